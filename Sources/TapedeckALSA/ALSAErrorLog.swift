#if ALSA
import CALSA
public import Logging
import Synchronization

/// Sends ALSA's own error messages (the `ALSA lib pcm.c:…` lines it would print on stderr) to
/// swift-log.
///
/// ALSA has one process-wide error handler, and its type is variadic, so Swift cannot be that
/// handler. `shim.h` installs a small C trampoline that formats the message and calls a plain C
/// function pointer; the pointer is a non-capturing `@convention(c)` closure that reads the logger
/// from a lock-protected holder. The latest logger installed wins (there is one handler per process).
///
/// Messages are logged at `.debug`: every ALSA failure that matters also comes back as an error
/// code, which the backend turns into a `TapedeckError` saying what to do; ALSA's text is the
/// detail behind it (`--log-level debug` shows it).
public enum ALSAErrorLog {
    private static let holder = Mutex<Logger?>(nil)

    /// Routes ALSA's messages to `logger` from now on.
    /// - Thread: any. Takes a lock briefly; never blocks otherwise.
    public static func install(_ logger: Logger) {
        holder.withLock { $0 = logger }
        _ = tapedeck_alsa_set_error_log { file, line, function, err, message in
            ALSAErrorLog.forward(file: file, line: line, function: function, err: err, message: message)
        }
    }

    /// Silences ALSA's messages (they are dropped, not printed to stderr).
    /// - Thread: any. Never blocks for long.
    public static func uninstall() {
        _ = tapedeck_alsa_set_error_log(nil)
        holder.withLock { $0 = nil }
    }

    /// Called by the C trampoline on whatever thread ALSA reported the error. This is the
    /// exceptional path: it may lock and log.
    private static func forward(file: UnsafePointer<CChar>?, line: Int32, function: UnsafePointer<CChar>?,
                                err: Int32, message: UnsafePointer<CChar>?) {
        guard let logger = holder.withLock({ $0 }) else { return }
        let text = message.map { String(cString: $0) } ?? ""
        var metadata: Logger.Metadata = [
            "alsa.file": "\(file.map { String(cString: $0) } ?? ""):\(line)",
            "alsa.function": "\(function.map { String(cString: $0) } ?? "")",
        ]
        if err != 0 {
            metadata["alsa.error"] = "\(String(cString: snd_strerror(err))) (\(err))"
        }
        logger.debug("ALSA: \(text)", metadata: metadata)
    }
}
#endif
