import Dispatch
#if canImport(Glibc)
import Glibc
#endif

/// Turns stop signals into a callback on a private queue (the default actions are disabled
/// while the trap is armed, so the process is not killed before it can finalize the take).
///
/// A second signal means the first did not end things: the process exits at once with status
/// 130, and anything unfinished is recovered the next time the library is opened.
final class SignalTrap {
    private let sources: [any DispatchSourceSignal]
    private let signals: [Int32]

    init(signals: [Int32], handler: @escaping @Sendable (Int32) -> Void) {
        let queue = DispatchQueue(label: "tapedeck.signals")
        self.signals = signals
        nonisolated(unsafe) var received = 0 // only touched on `queue`
        sources = signals.map { sig in
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: queue)
            source.setEventHandler {
                received += 1
                if received > 1 {
                    Terminal.writeStderr("\ntapedeck: Stopping again: exiting now. An unfinished take is recovered the next time the library is opened.\n")
                    _exit(130)
                }
                handler(sig)
            }
            source.resume()
            return source
        }
    }

    func cancel() {
        for s in sources { s.cancel() }
        for sig in signals { signal(sig, SIG_DFL) }
    }
}
