import Dispatch
#if canImport(Glibc)
import Glibc
#endif

/// Turns stop signals into a callback on a private queue (the default actions are disabled
/// while the trap is armed, so the process is not killed before it can finalize the take).
final class SignalTrap {
    private let sources: [any DispatchSourceSignal]
    private let signals: [Int32]

    init(signals: [Int32], handler: @escaping @Sendable (Int32) -> Void) {
        let queue = DispatchQueue(label: "tapedeck.signals")
        self.signals = signals
        sources = signals.map { sig in
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: queue)
            source.setEventHandler { handler(sig) }
            source.resume()
            return source
        }
    }

    func cancel() {
        for s in sources { s.cancel() }
        for sig in signals { signal(sig, SIG_DFL) }
    }
}
