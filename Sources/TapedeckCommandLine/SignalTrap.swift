import CStopSignals
import Foundation
import Synchronization
import TapedeckCore
#if canImport(Glibc)
import Glibc
#endif

/// Turns stop signals into a callback on a thread of the trap's own (the default actions are
/// replaced while the trap is armed, so the process is not killed before it can finalize the take).
///
/// The handler is installed before `init` returns and only writes the signal's number to a pipe
/// (see `CStopSignals`); a reader thread turns each byte into a call of `handler`. A signal that
/// arrives at any moment after `init` is therefore seen, which a libdispatch signal source does
/// not promise on Linux: it installs its handler later, on its manager thread, and a signal in
/// between is lost (a `record` stopped in that window would record until killed).
///
/// A second signal means the first did not end things: the process exits at once with status
/// 130, and anything unfinished is recovered the next time the library is opened.
///
/// Request signals (a marker's SIGUSR1, a trigger's SIGUSR2) come as counts, never as a byte
/// each: however many arrive between two reads, the reader wakes once and hands their number
/// to `onRequest`, so a flood of them costs one call, not one per signal.
///
/// A signal the process was started with ignored stays ignored, as Unix programs leave it:
/// `nohup tapedeck record &` keeps recording when its terminal hangs up, and a script's
/// background job (whose SIGINT the shell ignores) is not stopped by a Ctrl-C meant for the
/// foreground. The other signals (SIGTERM, as a rule) still stop it.
final class SignalTrap {
    /// What a second stop signal says after "exiting now", once the command's work is safe (a
    /// recording whose takes are finished, sending its alerts); `nil`: the unfinished take is
    /// recovered later.
    static let secondStopNote = Mutex<String?>(nil)

    /// The signals the trap handles: those asked for that were not ignored when it was armed.
    private let signals: [Int32]
    private let writeFD: Int32
    private var armed = true

    /// Arms the trap for those of `signals` the process was not started with ignored.
    /// - Parameter handler: called once per stop signal, on the trap's reader thread; must not block.
    /// - Parameter requests: signals among `signals` that ask for something (SIGUSR1: a marker,
    ///   SIGUSR2: a trigger) rather than a stop; they never count as a second stop.
    /// - Parameter onRequest: called with a request signal and how many of it arrived since the
    ///   last call (at least 1), on the trap's reader thread; must not block.
    /// - Throws: `.io` when the pipe cannot be made (too many open files), `.internalError` when
    ///   `sigaction` refuses a handler; the default actions stay.
    /// - Thread: any (the commands arm it on the main actor). Never blocks.
    init(signals: [Int32], requests: Set<Int32> = [], onRequest: @escaping @Sendable (Int32, Int) -> Void = { _, _ in },
         handler: @escaping @Sendable (Int32) -> Void) throws {
        var readFD: Int32 = -1
        var writeFD: Int32 = -1
        guard tapedeck_stop_signals_pipe(&readFD, &writeFD) == 0 else {
            throw TapedeckError(.io, "Could not set up the stop-signal handler: \(String(cString: strerror(errno))). Close some files or raise the open-file limit (ulimit -n) and try again.")
        }
        self.writeFD = writeFD
        let pipeEnd = readFD
        let reader = Thread {
            var received = 0
            var byte: UInt8 = 0
            while true {
                let n = read(pipeEnd, &byte, 1)
                if n < 0 && errno == EINTR { continue }
                guard n == 1, byte != Self.stopReading else { break }
                if requests.contains(Int32(byte)) {
                    let count = Int(tapedeck_stop_signals_take(Int32(byte)))
                    if count > 0 { onRequest(Int32(byte), count) }
                    continue
                }
                received += 1
                if received > 1 {
                    let note = Self.secondStopNote.withLock { $0 } ?? "An unfinished take is recovered the next time the library is opened."
                    Terminal.writeStderr("\ntapedeck: Stopping again: exiting now. \(note)\n")
                    _exit(130)
                }
                handler(Int32(byte))
            }
        }
        reader.name = "tapedeck-signals"
        reader.start()
        for signal in requests where signals.contains(signal) { tapedeck_stop_signals_coalesce(signal) }
        var armed = [Int32](repeating: 0, count: signals.count)
        let status = signals.withUnsafeBufferPointer { requested in
            armed.withUnsafeMutableBufferPointer {
                tapedeck_stop_signals_arm(writeFD, requested.baseAddress, Int32(requested.count), $0.baseAddress)
            }
        }
        self.signals = zip(signals, armed).filter { $0.1 != 0 }.map(\.0)
        if status != 0 {
            let reason = String(cString: strerror(errno))
            cancel()
            throw TapedeckError(.internalError, "Could not install the stop-signal handler (\(reason)). This is a bug in Tapedeck; please report it with the command you ran.")
        }
    }

    /// The byte ``cancel()`` sends the reader (no signal has number 0).
    private static let stopReading: UInt8 = 0

    /// Restores the signals' default actions and ends the reader thread. The pipe stays open for
    /// the life of the process: a handler that was already running may still write to it, and a
    /// closed descriptor's number could by then belong to a take's file (commands arm one trap).
    /// - Thread: any; call once (later calls do nothing). Never blocks.
    func cancel() {
        guard armed else { return }
        armed = false
        signals.withUnsafeBufferPointer { tapedeck_stop_signals_disarm($0.baseAddress, Int32($0.count)) }
        var stop = Self.stopReading
        _ = write(writeFD, &stop, 1)
    }
}

/// Request signals counted until the main actor takes them: however fast they come, at most one
/// task waits for the main actor, and it takes every one that came by the time it runs.
/// - Thread: any. Never blocks.
final class SignalTally: Sendable {
    private let pending = Atomic<Int>(0)

    /// Adds `count`; when none were waiting, has the main actor call `body` with all that have
    /// come by the time it runs.
    func add(_ count: Int, _ body: @escaping @MainActor @Sendable (Int) -> Void) {
        guard count > 0, pending.add(count, ordering: .acquiringAndReleasing).oldValue == 0 else { return }
        Task { @MainActor in
            let taken = self.pending.exchange(0, ordering: .acquiringAndReleasing)
            if taken > 0 { body(taken) }
        }
    }
}
