import Foundation
import Synchronization
import TapedeckApp
import TapedeckCore
#if canImport(Glibc)
import Glibc
#endif

/// Output helpers: results go to stdout, messages and meters to stderr.
enum Terminal {
    static var stdoutIsTerminal: Bool { isatty(STDOUT_FILENO) == 1 }
    static var stdinIsTerminal: Bool { isatty(STDIN_FILENO) == 1 }
    /// Meters and progress bars go to stderr, and only when it is a terminal.
    static var showsProgress: Bool { isatty(STDERR_FILENO) == 1 && !quiet.load(ordering: .relaxed) }
    /// `--quiet`: no meter, banner or progress; only errors on stderr.
    static let quiet = Atomic<Bool>(false)

    /// Back to the start of the status line, erased: the erase-line escape, or blanks on a
    /// terminal that takes none (`TERM=dumb`).
    static var clearLine: String {
        guard ProcessInfo.processInfo.environment["TERM"] == "dumb" else { return "\r\u{1B}[K" }
        return "\r" + String(repeating: " ", count: max(0, (terminalColumns() > 0 ? terminalColumns() : 80) - 1)) + "\r"
    }

    /// A message on stderr, `tapedeck: MESSAGE`; under systemd, a journal entry with the
    /// run's fields (``journalFields``) and `event`'s, at `priority` (a `warning:` message at
    /// warning's).
    static func printError(_ message: String, priority: JournalSink.Priority? = nil, event: String? = nil) {
        if journal.isActive {
            var fields = journalFields.withLock { $0 }
            if let event { fields["EVENT"] = event }
            let level = priority ?? (message.hasPrefix("warning:") ? .warning : message.hasPrefix("error:") ? .error : .notice)
            if journal.send(message, priority: level, fields: fields) { return }
        }
        let clear = statusShown.load(ordering: .relaxed) ? clearLine : ""
        writeStderr("\(clear)tapedeck: \(safe(message))\n")
    }

    /// The journal, when stderr is connected to it (a systemd service); else inactive.
    static let journal = JournalSink(environment: ProcessInfo.processInfo.environment)
    /// The fields every journal entry of this run carries now: `TAKE_ID`, `SESSION_ID`, `RUN_ID`
    /// of the take being recorded (`record` keeps them current).
    static let journalFields = Mutex<[String: String]>([:])

    /// `text` with everything that could change how a terminal shows what follows written as an
    /// escape instead: C0 and C1 controls and DEL (`\e`, `\t`, `\x07`, `\u{9B}`) and the
    /// bidirectional overrides and isolates (`\u{202E}`), which can make a name read as
    /// another. Line breaks are kept; a backslash stays as it is. - Thread: any; never blocks.
    static func safe(_ text: String) -> String {
        if text.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) { return text }
        guard text.unicodeScalars.contains(where: isUnsafe) else { return text }
        var out = ""
        for scalar in text.unicodeScalars {
            guard isUnsafe(scalar) else { out.unicodeScalars.append(scalar); continue }
            switch scalar {
            case "\t": out += "\\t"
            case "\r": out += "\\r"
            case "\u{1B}": out += "\\e"
            case _ where scalar.value < 0x80: out += String(format: "\\x%02X", scalar.value)
            default: out += String(format: "\\u{%X}", scalar.value)
            }
        }
        return out
    }

    private static func isUnsafe(_ s: Unicode.Scalar) -> Bool {
        switch s.value {
        case 0x0A: false
        case 0x00...0x1F, 0x7F...0x9F: true
        case 0x200E, 0x200F, 0x061C, 0x202A...0x202E, 0x2066...0x2069: true
        default: false
        }
    }

    /// Redraws the status line (meter, progress) in place. The line is cut to the terminal's
    /// width, read at every redraw (`TIOCGWINSZ`, so a resized window is followed): a line that
    /// wrapped would leave its first row behind at every redraw.
    static func status(_ line: String) {
        statusShown.store(true, ordering: .relaxed)
        let line = safe(line)
        let columns = terminalColumns()
        let fitted = columns > 1 && line.count >= columns ? String(line.prefix(columns - 2)) + "…" : line
        writeStderr(clearLine + fitted)
    }

    /// Whether the status line may use colour: stderr is a terminal that takes escapes (not
    /// `TERM=dumb`), and `NO_COLOR` is not set (no-color.org).
    /// Decided once: the meter asks ten times a second.
    static let usesColour: Bool = {
        let environment = ProcessInfo.processInfo.environment
        return isatty(STDERR_FILENO) == 1 && environment["TERM"] != "dumb" && (environment["NO_COLOR"] ?? "").isEmpty
    }()

    /// The width of the terminal on stderr; 0 when it is not a terminal or does not say.
    static func terminalColumns() -> Int {
        var size = winsize()
        guard ioctl(STDERR_FILENO, UInt(TIOCGWINSZ), &size) == 0 else { return 0 }
        return Int(size.ws_col)
    }

    /// Columns `text` takes on a terminal: two for wide (East Asian) characters and emoji, none
    /// for a combining mark on its own, one for the rest. - Thread: any.
    static func displayWidth(_ text: String) -> Int {
        // Printable ASCII, most of what a listing holds, is one column a byte.
        if text.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) { return text.utf8.count }
        return text.reduce(0) { $0 + width(of: $1) }
    }

    static func width(of character: Character) -> Int {
        guard let first = character.unicodeScalars.first else { return 0 }
        if character.unicodeScalars.contains(where: { $0.value == 0xFE0F }) || first.properties.isEmojiPresentation { return 2 }
        switch first.value {
        case 0x1100...0x115F, 0x2E80...0x303E, 0x3041...0x33FF, 0x3400...0x4DBF, 0x4E00...0x9FFF, 0xA000...0xA4CF,
             0xAC00...0xD7A3, 0xF900...0xFAFF, 0xFE30...0xFE4F, 0xFF00...0xFF60, 0xFFE0...0xFFE6, 0x20000...0x3FFFD:
            return 2
        default:
            return first.properties.generalCategory == .nonspacingMark || first.properties.generalCategory == .format ? 0 : 1
        }
    }

    /// `text` padded with spaces to `width` columns (never cut).
    static func pad(_ text: String, to width: Int) -> String {
        text + String(repeating: " ", count: max(0, width - displayWidth(text)))
    }

    /// `text` cut to at most `width` columns, ending in "…" when cut.
    static func cut(_ text: String, to width: Int) -> String {
        guard displayWidth(text) > width else { return text }
        var out = "", used = 0
        for c in text {
            let w = self.width(of: c)
            if used + w > width - 1 { break }
            out.append(c)
            used += w
        }
        return out + "…"
    }

    /// The width of the terminal on stdout; 0 when it is not a terminal.
    static func stdoutColumns() -> Int {
        var size = winsize()
        guard isatty(STDOUT_FILENO) == 1, ioctl(STDOUT_FILENO, UInt(TIOCGWINSZ), &size) == 0 else { return 0 }
        return Int(size.ws_col)
    }

    /// `text` cut to `width` characters by replacing its middle with "…" (a path keeps its
    /// start and its file name).
    static func middleCut(_ text: String, _ width: Int) -> String {
        guard text.count > width, width > 3 else { return text }
        let head = (width - 1) / 2, tail = width - 1 - head
        return String(text.prefix(head)) + "…" + String(text.suffix(tail))
    }

    static func endStatus() {
        statusShown.store(false, ordering: .relaxed)
        writeStderr(clearLine)
    }

    /// Whether a status line is on screen (a message then clears it first, and the next redraw
    /// puts it back below the message). Any thread.
    static let statusShown = Atomic<Bool>(false)

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
        StandardOutput.write(try json(value) + "\n")
    }

    /// `value` as the pretty-printed JSON ``printJSON(_:)`` writes.
    static func json<T: Encodable>(_ value: T) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(date.iso8601UTC)
        }
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }

    /// `1 take`, `2 takes`: a count with its noun in the right number.
    static func counted(_ n: Int, _ singular: String, _ plural: String? = nil) -> String {
        "\(n) \(n == 1 ? singular : plural ?? singular + "s")"
    }

    /// "-23.0 LUFS, range 4.5 LU, true peak -1.2 dBTP" (EBU R128 as a broadcaster reads it);
    /// a take under 0.4 s has no integrated loudness (R128 measures 400 ms blocks).
    static func loudness(_ l: Loudness, seconds: Double) -> String {
        func one(_ v: Double?, _ unit: String) -> String {
            v.map { String(format: "%.1f", $0) + " " + unit } ?? (seconds < 0.4 ? "too short to measure (under 0.4 s)" : "silent")
        }
        return "\(one(l.integrated, "LUFS")), range \(String(format: "%.1f", l.range)) LU, true peak \(l.truePeak.map { String(format: "%.1f dBTP", $0) } ?? "none")"
    }

    static func clock(_ seconds: Double) -> String {
        let ms = Int((seconds * 1000).rounded())
        let h = ms / 3_600_000, m = (ms / 60_000) % 60, s = (ms / 1000) % 60, frac = ms % 1000
        // Built by hand: String(format:) costs more than the rest of a listed row.
        let tail = "\(zeroPadded(s, width: 2)).\(zeroPadded(frac, width: 3))"
        return h > 0 ? "\(h):\(zeroPadded(m, width: 2)):\(tail)" : "\(m):\(tail)"
    }

    static func bytes(_ n: Int64) -> String {
        let units = ["B", "KB", "MB", "GB", "TB"]
        var v = Double(n), i = 0
        while v >= 1000 && i < units.count - 1 { v /= 1000; i += 1 }
        guard i > 0 else { return "\(n) B" }
        // One decimal as "%.1f" rounds, built by hand (String(format:) is slow in a listing);
        // 999.96 KB rounds up to the next unit, as 1.0 MB.
        var tenths = Int((v * 10).rounded())
        if tenths >= 10_000 && i < units.count - 1 { tenths = Int((v / 100).rounded()); i += 1 }
        return "\(tenths / 10).\(tenths % 10) \(units[i])"
    }

    static func date(_ d: Date) -> String {
        // localtime_r, not a DateFormatter: making one costs more than the rest of a listed row.
        // The nearest second, as every date Tapedeck writes (UTCTimestamp, LocalTimeOfDay).
        var seconds = time_t(d.timeIntervalSince1970.rounded())
        var t = tm()
        guard localtime_r(&seconds, &t) != nil else { return UTCTimestamp.seconds(d) }
        return "\(zeroPadded(Int(t.tm_year) + 1900, width: 4))-\(zeroPadded(Int(t.tm_mon) + 1, width: 2))-\(zeroPadded(Int(t.tm_mday), width: 2)) "
            + "\(zeroPadded(Int(t.tm_hour), width: 2)):\(zeroPadded(Int(t.tm_min), width: 2)):\(zeroPadded(Int(t.tm_sec), width: 2))"
    }

    /// A moment in this machine's local time to the millisecond, with its UTC offset:
    /// `2026-11-29 15:00:00.000 +01:00` (rounded as a whole: 14:59:59.9998 is 15:00:00.000).
    static func preciseDate(_ d: Date) -> String {
        let ms = (d.timeIntervalSince1970 * 1000).rounded()
        let whole = (ms / 1000).rounded(.down)
        let clock = LocalTimeOfDay(Date(timeIntervalSince1970: whole))
        return "\(clock.date) \(clock.time).\(zeroPadded(Int(ms - whole * 1000), width: 3)) \(clock.utcOffset)"
    }

    /// A format as `list` shows it: `48 kHz 2ch s16` (44.1 kHz with its decimal).
    static func format(_ f: AudioFormat) -> String {
        "\(kilohertz(f.sampleRate)) kHz \(f.channels)ch \(f.sampleFormat)"
    }

    /// A sample rate in kHz: `48`, `44.1`.
    static func kilohertz(_ rate: Int) -> String {
        rate % 1000 == 0 ? "\(rate / 1000)" : "\(Double(rate) / 1000)"
    }

    /// A level in dBFS as the meter prints it: one decimal, full scale as ` 0.0` (never `-0.0`),
    /// quieter than the meter's floor as `<-90`.
    static func decibels(_ db: Double) -> String {
        if db <= PeakMeter.floorDecibels { return "<-90" }
        let rounded = (db * 10).rounded() / 10
        return String(format: "%5.1f", rounded == 0 ? 0 : rounded)
    }

    /// A bar of `width` cells on a dBFS scale from -60 to 0, `|` marking the peak hold.
    static func bar(_ db: Double, hold: Double, width: Int, colour: Bool = false) -> String {
        func cells(_ v: Double) -> Int { max(0, min(width, Int(((v + 60) / 60 * Double(width)).rounded()))) }
        var chars = Array(String(repeating: "#", count: cells(db)) + String(repeating: "-", count: width - cells(db)))
        let h = cells(hold)
        if h > 0, h > cells(db) { chars[h - 1] = "|" }
        guard colour else { return "[" + String(chars) + "]" }
        // The page's scale: green up to -18 dBFS, yellow to -6, red above; empty cells plain.
        var out = "[", current = ""
        for (i, c) in chars.enumerated() {
            let level = -60 + Double(i + 1) / Double(width) * 60
            let code = c == "-" ? Colour.reset : level > -6 ? Colour.red : level > -18 ? Colour.yellow : Colour.green
            if code != current {
                out += code
                current = code
            }
            out.append(c)
        }
        return out + Colour.reset + "]"
    }

    /// The escapes the meter uses (``usesColour``).
    enum Colour {
        static let red = "\u{1B}[31m", yellow = "\u{1B}[33m", green = "\u{1B}[32m", bold = "\u{1B}[1m", reset = "\u{1B}[0m"
    }

    /// The recording meter, as wide as fits `columns` (0: unknown, 80 assumed): bars per
    /// channel; shorter bars; levels only; at last the loudest channel alone (many channels
    /// fold to this). Never wider than `columns`, so it never wraps.
    /// - Parameter run: a split run's state, e.g. `take 3, split in 59:12`; `nil` without splitting.
    /// - Parameter head: what replaces `● REC` (`○ ARMED` while a run waits).
    /// - Parameter total: how long the recording lasts (`-d`, `--until`), shown as sox does:
    ///   `0:00:09.0 of 0:00:10`.
    /// - Parameter colour: `● REC` and a clip count in red, the bars by level (``bar(_:hold:width:colour:)``);
    ///   the width is chosen from the plain text, as the escapes take no room.
    static func meterLine(seconds: Double, meter: PeakMeter, clipped: Int64, overruns: Int, columns: Int, run: String? = nil,
                          head label: String? = nil, of total: Double? = nil, colour: Bool = false) -> String {
        let width = columns > 0 ? columns - 1 : 79
        let tenths = Int((seconds * 10).rounded(.down))
        let clock = String(format: "%d:%02d:%02d.%d", tenths / 36000, (tenths / 600) % 60, (tenths / 10) % 60, tenths % 10)
        let whole = total.map { Int($0.rounded()) }
        let head = "\(label ?? "● REC") \(clock)" + (whole.map { String(format: " of %d:%02d:%02d", $0 / 3600, $0 / 60 % 60, $0 % 60) } ?? "")
        var tail = clipped > 0 ? "  CLIP \(clipped)" : "  clip 0"
        if overruns > 0 { tail += "  overruns \(overruns)" }
        if let run { tail += "  " + run }
        let levels = meter.levels, holds = meter.holds
        let names = levels.count == 2 ? ["L", "R"] : levels.indices.map { String($0 + 1) }
        func bars(_ barWidth: Int, colour: Bool) -> String {
            levels.indices.map { "\(names[$0]) \(bar(levels[$0], hold: holds[$0], width: barWidth, colour: colour)) \(decibels(levels[$0]))" }
                .joined(separator: " ")
        }
        let widths = [20, 12, 8, 6, 4]
        var forms = widths.map { bars($0, colour: false) }
        forms.append(levels.indices.map { "\(names[$0]) \(decibels(levels[$0]).trimmingCharacters(in: .whitespaces))" }.joined(separator: " "))
        if let loudest = levels.indices.max(by: { levels[$0] < levels[$1] }) {
            forms.append("max \(decibels(levels[loudest]).trimmingCharacters(in: .whitespaces)) dB (ch \(names[loudest]) of \(levels.count))")
        }
        for (i, form) in forms.enumerated() where head.count + 2 + form.count + tail.count <= width {
            guard colour else { return head + "  " + form + tail }
            let shown = i < widths.count ? bars(widths[i], colour: true) : form
            let redHead = head.hasPrefix("● REC") ? Colour.bold + Colour.red + "● REC" + Colour.reset + head.dropFirst(5) : head
            let redTail = clipped > 0 ? tail.replacingOccurrences(of: "  CLIP \(clipped)", with: "  " + Colour.bold + Colour.red + "CLIP \(clipped)" + Colour.reset) : tail
            return redHead + "  " + shown + redTail
        }
        let fallback = head + tail
        return fallback.count <= width ? fallback : String(fallback.prefix(width))
    }
}
