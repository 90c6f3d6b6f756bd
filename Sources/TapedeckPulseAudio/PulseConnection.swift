#if PulseAudio
import CPulse
import CPulseLoop
import Dispatch
import TapedeckCore
#if canImport(Glibc)
import Glibc
#endif

/// A main loop (`CPulseLoop`, libpulse's main loop API without `pa_mainloop`'s wake-up pipe) with
/// one connected `pa_context`: what each stream and each device listing owns. Not thread-safe; it
/// is owned by one thread (a device thread, or the caller of `devices()`), which also runs the
/// loop: every wait is ``iterate(nanoseconds:)`` (one bounded `poll` on the server's socket, then
/// PulseAudio's callbacks, on this thread), so there is no mainloop thread, no lock, and no
/// hand-off between threads per fragment. The callbacks only record what happened in ``events``.
final class PulseConnection {
    let settings: PulseSettings
    let events = PulseEvents()
    private(set) var mainloop: OpaquePointer?
    private(set) var context: OpaquePointer?

    /// How long connecting and opening may take before we give up.
    static let openTimeoutNanos: UInt64 = 5_000_000_000

    /// Connects to the server and waits (bounded) until the context is ready.
    /// - Thread: the owning thread. Blocks up to ``openTimeoutNanos``.
    /// - Throws: `.deviceUnavailable` naming the server and what to do.
    init(settings: PulseSettings) throws {
        self.settings = settings
        guard let ml = tapedeck_pulse_loop_new() else {
            throw TapedeckError(.deviceUnavailable, "Could not create a PulseAudio main loop (out of memory?).")
        }
        mainloop = ml
        let api = tapedeck_pulse_loop_api(ml).assumingMemoryBound(to: pa_mainloop_api.self)
        guard let ctx = pa_context_new(api, settings.clientName) else {
            close()
            throw TapedeckError(.deviceUnavailable, "Could not create a PulseAudio context (out of memory?).")
        }
        context = ctx
        let rc = pa_context_connect(ctx, settings.serverAddress, PA_CONTEXT_NOAUTOSPAWN, nil)
        let early = rc < 0 ? errorText() : nil
        if let early {
            close()
            throw noServer(early)
        }
        let finished = wait(nanoseconds: Self.openTimeoutNanos) {
            let s = pa_context_get_state(ctx)
            return s == PA_CONTEXT_READY || !PulseConnection.isGood(s)
        }
        let state = pa_context_get_state(ctx)
        let reason = errorText()
        if state != PA_CONTEXT_READY {
            close()
            if !finished {
                throw TapedeckError(.deviceUnavailable,
                    "The PulseAudio server at \(settings.serverLabel) did not answer within \(Self.openTimeoutNanos / 1_000_000_000) s. Is it running and reachable? Check \(settings.key(PulseKeys.server)).")
            }
            throw noServer(reason)
        }
    }

    private func noServer(_ reason: String) -> TapedeckError {
        TapedeckError(.deviceUnavailable,
            "No PulseAudio server at \(settings.serverLabel) (\(reason.lowercased())). Is it running? \(settings.serverAdvice).")
    }

    /// Whether a context state is connecting or connected (not failed or terminated).
    static func isGood(_ s: pa_context_state_t) -> Bool {
        s != PA_CONTEXT_FAILED && s != PA_CONTEXT_TERMINATED
    }

    /// Whether the context is still connected. - Thread: owner.
    var contextIsGood: Bool {
        guard let context else { return false }
        return Self.isGood(pa_context_get_state(context))
    }

    /// The context's last error as text. - Thread: owner.
    func errorText() -> String {
        guard let context else { return "not connected" }
        return String(cString: pa_strerror(pa_context_errno(context)))
    }

    /// The context's last error code. - Thread: owner.
    var errorCode: Int32 { context.map { pa_context_errno($0) } ?? 0 }

    /// Monotonic nanoseconds. Never blocks or allocates.
    static func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

    /// Runs one iteration of the main loop: waits up to `nanoseconds` for the server's socket
    /// (or one of PulseAudio's timers), then runs the callbacks for what arrived. A signal that
    /// interrupts the wait ends it early. Never allocates.
    /// - Thread: owner; blocks up to `nanoseconds`.
    func iterate(nanoseconds: UInt64) {
        guard let mainloop else { return }
        let micros = Int64(min(nanoseconds / 1_000, UInt64(Int64.max)))
        // A signal ends the poll early (EINTR is not a failure). Should poll really fail, the
        // callers' own deadlines end their waits; the pause keeps the loop from spinning until then.
        if tapedeck_pulse_loop_iterate(mainloop, micros) < 0 {
            usleep(UInt32(min(max(micros, 1_000), 10_000)))
        }
    }

    /// Runs the callbacks for everything that has already arrived (or is due), without waiting.
    /// Never allocates. - Thread: owner; never blocks.
    func dispatchPending() {
        guard let mainloop else { return }
        // Each pass handles what one poll found; a bound keeps a flood from holding the thread.
        var passes = 0
        while passes < 64 && tapedeck_pulse_loop_iterate(mainloop, 0) > 0 { passes += 1 }
    }

    /// Sleeps up to `nanoseconds` without running the main loop: what the server sends meanwhile
    /// waits in the socket and the server's queue. Only the server going away (its socket hanging
    /// up) ends the sleep early, so a lost server is noticed at once. Never allocates.
    /// - Thread: owner; blocks up to `nanoseconds`.
    func doze(nanoseconds: UInt64) {
        guard let mainloop else { return }
        let micros = Int64(min(nanoseconds / 1_000, UInt64(Int64.max)))
        if tapedeck_pulse_loop_doze(mainloop, micros) < 0 {
            usleep(UInt32(min(max(micros, 1_000), 10_000)))
        }
    }

    /// Evaluates `done` until it returns true or `nanoseconds` pass, running the main loop in
    /// between. Never allocates.
    /// - Returns: whether `done` became true.
    /// - Thread: owner; blocks up to `nanoseconds`.
    func wait(nanoseconds: UInt64, until done: () -> Bool) -> Bool {
        let deadline = Self.now() + nanoseconds
        while true {
            if done() { return true }
            let now = Self.now()
            if now >= deadline { return false }
            iterate(nanoseconds: deadline - now)
        }
    }

    /// Waits (bounded) for an operation to finish, then releases it.
    /// - Returns: whether it finished in time. - Thread: owner; blocks up to `nanoseconds`.
    func finish(_ operation: OpaquePointer?, nanoseconds: UInt64 = PulseConnection.openTimeoutNanos) -> Bool {
        guard let operation else { return false }
        let done = wait(nanoseconds: nanoseconds) {
            pa_operation_get_state(operation) != PA_OPERATION_RUNNING || !contextIsGood
        }
        if pa_operation_get_state(operation) == PA_OPERATION_RUNNING { pa_operation_cancel(operation) }
        pa_operation_unref(operation)
        return done
    }

    /// Disconnects the context and frees the mainloop. Idempotent.
    /// - Thread: owner. Never blocks.
    func close() {
        guard let ml = mainloop else { return }
        if let ctx = context {
            pa_context_disconnect(ctx)
            pa_context_unref(ctx)
            context = nil
        }
        tapedeck_pulse_loop_free(ml)
        mainloop = nil
    }

    deinit { close() }
}
#endif
