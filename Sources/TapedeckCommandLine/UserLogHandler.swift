import Logging
import TapedeckApp

/// Log output for people: at the default levels each message is one plain sentence on stderr,
/// `tapedeck: warning: …` (or `error:`; notices and info without a label), with no timestamp or
/// module. `--log-level debug` or `trace` switches to swift-log's developer format, with the
/// details the code logs at those levels. Safe on any thread; writing never blocks for long.
struct UserLogHandler: LogHandler {
    var logLevel: Logger.Level = .notice
    var metadata: Logger.Metadata = [:]

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        if Terminal.journal.isActive {
            // Under systemd: the logger's metadata as fields (`take` as TAKE_ID, `event` as EVENT).
            var fields = Terminal.journalFields.withLock { $0 }
            for (key, value) in metadata.merging(event.metadata ?? [:], uniquingKeysWith: { $1 }) {
                fields[["take": "TAKE_ID", "session": "SESSION_ID", "run": "RUN_ID"][key] ?? key.uppercased()] = "\(value)"
            }
            let priority: JournalSink.Priority = switch event.level {
            case .critical, .error: .error
            case .warning: .warning
            case .notice: .notice
            case .info: .info
            case .debug, .trace: .debug
            }
            if Terminal.journal.send(event.message.description, priority: priority, fields: fields) { return }
        }
        let label: String = switch event.level {
        case .critical, .error: "error: "
        case .warning: "warning: "
        default: ""
        }
        let clear = Terminal.statusShown.load(ordering: .relaxed) ? Terminal.clearLine : ""
        Terminal.writeStderr("\(clear)tapedeck: \(label)\(Terminal.safe(event.message.description))\n")
    }

    /// The logger for `level`: plain sentences at notice and above, the developer format below.
    static func logger(level: Logger.Level) -> Logger {
        var logger = level <= .debug
            ? Logger(label: "tapedeck") { StreamLogHandler.standardError(label: $0) }
            : Logger(label: "tapedeck") { _ in UserLogHandler() }
        logger.logLevel = level
        return logger
    }
}
