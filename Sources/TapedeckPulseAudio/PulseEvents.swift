#if PulseAudio
import CPulse
import Synchronization

/// What PulseAudio's callbacks report to the thread that owns a connection.
///
/// The callbacks run inside ``PulseConnection/iterate(nanoseconds:)`` on the owning thread itself
/// and cannot capture context, so they receive this object through their `userdata` pointer
/// (`Unmanaged`, unretained: the owning ``PulseConnection`` keeps it alive and clears every
/// callback before releasing it). State changes need no record here: the owner reads the context
/// and stream state after each iteration. The callbacks only count; they never allocate or block.
/// The counters are atomic so that reports may read them from any thread.
final class PulseEvents: Sendable {
    /// Playback buffer overflows (only playback streams get these; see ``PulseCaptureStream``).
    let overflows = Atomic<Int>(0)
    /// Playback buffer underflows: the server ran out of data and played silence.
    let underflows = Atomic<Int>(0)
    /// Set by a drain's completion callback: 0 pending, 1 succeeded, 2 failed.
    let drainState = Atomic<Int>(0)

    var userdata: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    static func from(_ userdata: UnsafeMutableRawPointer?) -> PulseEvents? {
        guard let userdata else { return nil }
        return Unmanaged<PulseEvents>.fromOpaque(userdata).takeUnretainedValue()
    }

    // MARK: C callbacks (the owning thread, inside an iteration). Computed, so each is a plain C
    // function pointer formed from a non-capturing closure literal.

    static var streamOverflow: pa_stream_notify_cb_t {
        { _, userdata in
            PulseEvents.from(userdata)?.overflows.add(1, ordering: .relaxed)
        }
    }

    static var streamUnderflow: pa_stream_notify_cb_t {
        { _, userdata in
            PulseEvents.from(userdata)?.underflows.add(1, ordering: .relaxed)
        }
    }

    static var drainDone: pa_stream_success_cb_t {
        { _, success, userdata in
            PulseEvents.from(userdata)?.drainState.store(success != 0 ? 1 : 2, ordering: .releasing)
        }
    }
}
#endif
