#if PulseAudio
import CPulse
import Dispatch
import Synchronization

/// What PulseAudio's callbacks report to the thread that owns a connection.
///
/// The callbacks run on the `pa_threaded_mainloop` thread and cannot capture context, so they
/// receive this object through their `userdata` pointer (`Unmanaged`, unretained: the owning
/// ``PulseConnection`` keeps it alive and clears every callback before releasing it). They only
/// count and signal; they never lock, allocate or block.
final class PulseEvents: Sendable {
    /// Signalled by every callback. A counting semaphore, so a wake-up that arrives between the
    /// owner releasing the mainloop lock and starting to wait is never lost.
    let wakeup = DispatchSemaphore(value: 0)
    /// Playback buffer overflows (only playback streams get these; see ``PulseCaptureStream``).
    let overflows = Atomic<Int>(0)
    /// Playback buffer underflows: the server ran out of data and played silence.
    let underflows = Atomic<Int>(0)
    /// The read callback wakes the owner only once this many bytes are readable (0: at any
    /// data), so a reader waiting to fill a fragment is not woken for each piece the server
    /// sends. Set by the owner before it waits; every wait is bounded, so a threshold that is
    /// never reached only delays, never loses, a wake-up.
    let readThreshold = Atomic<Int>(0)
    /// Set by a drain's completion callback: 0 pending, 1 succeeded, 2 failed.
    let drainState = Atomic<Int>(0)

    var userdata: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    static func from(_ userdata: UnsafeMutableRawPointer?) -> PulseEvents? {
        guard let userdata else { return nil }
        return Unmanaged<PulseEvents>.fromOpaque(userdata).takeUnretainedValue()
    }

    /// Waits up to `nanoseconds` for any callback. - Thread: the owner's; blocks.
    func wait(nanoseconds: UInt64) {
        _ = wakeup.wait(timeout: .now() + .nanoseconds(Int(min(nanoseconds, UInt64(Int.max)))))
    }

    // MARK: C callbacks (mainloop thread, lock held). Computed, so each is a plain C function
    // pointer formed from a non-capturing closure literal.

    static var contextState: pa_context_notify_cb_t {
        { _, userdata in
            PulseEvents.from(userdata)?.wakeup.signal()
        }
    }

    static var streamNotify: pa_stream_notify_cb_t {
        { _, userdata in
            PulseEvents.from(userdata)?.wakeup.signal()
        }
    }

    static var streamRequest: pa_stream_request_cb_t {
        { _, _, userdata in
            PulseEvents.from(userdata)?.wakeup.signal()
        }
    }

    static var streamReadable: pa_stream_request_cb_t {
        { _, readable, userdata in
            guard let events = PulseEvents.from(userdata) else { return }
            if readable >= events.readThreshold.load(ordering: .relaxed) { events.wakeup.signal() }
        }
    }

    static var streamOverflow: pa_stream_notify_cb_t {
        { _, userdata in
            guard let events = PulseEvents.from(userdata) else { return }
            events.overflows.add(1, ordering: .relaxed)
            events.wakeup.signal()
        }
    }

    static var streamUnderflow: pa_stream_notify_cb_t {
        { _, userdata in
            guard let events = PulseEvents.from(userdata) else { return }
            events.underflows.add(1, ordering: .relaxed)
            events.wakeup.signal()
        }
    }

    static var streamSuccess: pa_stream_success_cb_t {
        { _, _, userdata in
            PulseEvents.from(userdata)?.wakeup.signal()
        }
    }

    static var drainDone: pa_stream_success_cb_t {
        { _, success, userdata in
            guard let events = PulseEvents.from(userdata) else { return }
            events.drainState.store(success != 0 ? 1 : 2, ordering: .releasing)
            events.wakeup.signal()
        }
    }
}
#endif
