import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Output helpers: results go to stdout, messages and meters to stderr.
enum Terminal {
    static var stdoutIsTerminal: Bool { isatty(STDOUT_FILENO) == 1 }
    static var stdinIsTerminal: Bool { isatty(STDIN_FILENO) == 1 }
    /// Meters and progress bars go to stderr, and only when it is a terminal.
    static var showsProgress: Bool { isatty(STDERR_FILENO) == 1 }

    static func printError(_ message: String) {
        writeStderr("tapedeck: \(message)\n")
    }

    /// Redraws the status line (meter, progress) in place. The line is cut to the terminal's
    /// width, read at every redraw (`TIOCGWINSZ`, so a resized window is followed): a line that
    /// wrapped would leave its first row behind at every redraw.
    static func status(_ line: String) {
        let columns = terminalColumns()
        let fitted = columns > 1 && line.count >= columns ? String(line.prefix(columns - 2)) + "…" : line
        writeStderr("\r\u{1B}[K\(fitted)")
    }

    /// The width of the terminal on stderr; 0 when it is not a terminal or does not say.
    static func terminalColumns() -> Int {
        var size = winsize()
        guard ioctl(STDERR_FILENO, UInt(TIOCGWINSZ), &size) == 0 else { return 0 }
        return Int(size.ws_col)
    }

    static func endStatus() {
        writeStderr("\r\u{1B}[K")
    }

    /// Writes to stderr with write(2), ignoring failures: a terminal that hung up must never
    /// stop a recording from finalizing.
    static func writeStderr(_ text: String) {
        var bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeMutableBytes { write(STDERR_FILENO, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return }
            offset += n
        }
    }

    static func printJSON<T: Encodable>(_ value: T) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(date.iso8601UTC)
        }
        StandardOutput.write(String(decoding: try encoder.encode(value), as: UTF8.self) + "\n")
    }

    /// `1 take`, `2 takes`: a count with its noun in the right number.
    static func counted(_ n: Int, _ singular: String, _ plural: String? = nil) -> String {
        "\(n) \(n == 1 ? singular : plural ?? singular + "s")"
    }

    static func clock(_ seconds: Double) -> String {
        let ms = Int((seconds * 1000).rounded())
        let h = ms / 3_600_000, m = (ms / 60_000) % 60, s = (ms / 1000) % 60, frac = ms % 1000
        return h > 0 ? String(format: "%d:%02d:%02d.%03d", h, m, s, frac) : String(format: "%d:%02d.%03d", m, s, frac)
    }

    static func bytes(_ n: Int64) -> String {
        let units = ["B", "KB", "MB", "GB", "TB"]
        var v = Double(n), i = 0
        while v >= 1000 && i < units.count - 1 { v /= 1000; i += 1 }
        return i == 0 ? "\(n) B" : String(format: "%.1f %@", v, units[i])
    }

    static func date(_ d: Date) -> String {
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.dateFormat = "yyyy-MM-dd HH:mm:ss"
        return f.string(from: d)
    }

    /// A bar of `width` cells for a peak level 0...1, on a dBFS scale from -60 to 0.
    static func meter(_ peak: Float, width: Int = 20) -> String {
        let db = peak > 0 ? 20 * log10(Double(peak)) : -120
        let filled = max(0, min(width, Int(((db + 60) / 60 * Double(width)).rounded())))
        let label = peak > 0 ? String(format: "%5.1f", db) : " -inf"
        return "[" + String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled) + "] " + label
    }
}
