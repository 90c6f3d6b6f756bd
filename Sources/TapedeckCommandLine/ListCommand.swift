import ArgumentParser
import Foundation
import TapedeckApp
import TapedeckCore

/// `--state`: a take state, as `list` prints it.
enum StateChoice: String, ExpressibleByArgument, CaseIterable {
    case recording, complete, recovered, interrupted, truncated
    var state: TakeState { TakeState(rawValue: rawValue) ?? .complete }
}

struct ListCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "List sessions and their takes: id, name, length, format, size, date and state.",
        usage: "tapedeck list [<options>] [<session>]",
        discussion: "The session a bare `tapedeck record` goes into is marked \"(next record)\". Filters combine; a session is shown when any of its takes passes them." + HelpExamples.text([
            "tapedeck list": "Every session and its takes.",
            "tapedeck list Interview --since 3d": "The takes of Interview from the last three days.",
            "tapedeck list --json | jq -r '.[].takes[].id'": "Every take's id, for a script.",
        ]))

    @Argument(help: "Only this session (name or id).", completion: TakeCompletion.kind(.sessions))
    var session: String?

    @Option(help: ArgumentHelp("Only takes recorded since a date (2026-11-01, \"2026-11-01 14:00\") or within a time back (3d, 12h, 30m).", valueName: "when"))
    var since: String?

    @Option(help: "Only takes in this state.")
    var state: StateChoice?

    @Option(help: ArgumentHelp("Only takes whose session, name, notes or tags contain TEXT (any case).", valueName: "text"))
    var search: String?

    @Flag(help: "Print JSON.")
    var json = false

    @OptionGroup var global: GlobalOptions

    @MainActor
    mutating func run() async throws {
        try await reportingErrors {
            let sinceDate = try since.map { try Self.date($0, now: Date()) }
            // The library is not loaded: sessions are read and printed one at a time, so the
            // first appears at once and memory holds one session, whatever the library's size.
            let studio = try await global.makeStudio()
            let storage = studio.store.storage
            var only: Session?
            if let session {
                guard case .session(let s) = try studio.store.resolve(session) else {
                    throw TapedeckError(.invalidArgument, "\"\(session)\" is a take, not a session. Use `tapedeck show \(session)`.")
                }
                only = s
            }
            let filtering = sinceDate != nil || state != nil || search != nil
            let needle = search?.lowercased()
            let (stateFilter, json) = (state, self.json)
            func filtered(_ s: Session) -> Session? {
                var s = s
                s.takes = s.takes.filter { t in
                    if let sinceDate, t.createdAt < sinceDate { return false }
                    if let stateFilter, t.state != stateFilter.state { return false }
                    if let needle {
                        let haystack = ([s.name, t.name, t.notes] + t.tags.map { "\($0.key)=\($0.value)" }).joined(separator: "\n").lowercased()
                        if !haystack.contains(needle) { return false }
                    }
                    return true
                }
                return filtering && s.takes.isEmpty ? nil : s
            }
            let next = json ? nil : try? storage.findSessionForRecording(named: nil)?.id
            let columns = Terminal.stdoutColumns()
            var printed = 0
            func emit(_ session: Session) throws {
                guard let s = filtered(session) else { return }
                let files = storage.audioFiles(of: s)
                if json {
                    let model = SessionJSON(id: s.id, shortID: s.shortID, name: s.name, createdAt: s.createdAt,
                                            takes: s.takes.map { TakeJSON($0, session: s, file: files[$0.id]) })
                    // Elements of one JSON array, written as they come (not indented again: that
                    // would cost a pass over every line of a large session).
                    // Written by PrettyJSON: what Terminal.json prints, without the generic encoder.
                    StandardOutput.write((printed == 0 ? "[\n" : ",\n") + PrettyJSON.text { model.write(to: &$0) })
                } else {
                    if printed > 0 { StandardOutput.write("\n") }
                    StandardOutput.write(Self.table(s, files: files, next: next, columns: columns))
                }
                printed += 1
            }
            if let only {
                try emit(only)
            } else {
                try storage.forEachSession(emit)
            }
            if json {
                StandardOutput.write(printed == 0 ? "[\n\n]\n" : "\n]\n")
                return
            }
            if printed == 0 {
                // An empty listing of a library that holds audio (a lost catalog, damaged bundles)
                // must not look like a new library.
                if !filtering, let maintenance = storage as? any LibraryMaintenance {
                    let damaged = (try? maintenance.damagedParts()) ?? []
                    let unnamed = (try? maintenance.unreferencedFiles()) ?? []
                    if !damaged.isEmpty || !unnamed.isEmpty {
                        var parts: [String] = []
                        if !damaged.isEmpty { parts.append(Terminal.counted(damaged.count, "part") + " that cannot be read (\(damaged.prefix(2).map(\.path).joined(separator: ", ")))") }
                        if !unnamed.isEmpty { parts.append(Terminal.counted(unnamed.count, "file") + " that no take names") }
                        Terminal.printError("No sessions are listed, but \(storage.rootURL.path) holds \(parts.joined(separator: " and ")). Run `tapedeck doctor` to see them; `tapedeck doctor --rebuild-catalog` makes entries for audio files no take names.")
                    }
                }
                print(filtering ? "No takes match." : "No sessions yet. Record one with `tapedeck record`.")
            }
        }
    }

    /// One session as text: its line, then its takes as a table fitted to `columns` (straight
    /// from the takes: the JSON models would compute fields the table never shows).
    static func table(_ s: Session, files: [String: AudioFileInfo], next: String?, columns: Int) -> String {
        let seconds = s.takes.reduce(0.0) { $0 + $1.seconds }
        let bytes = s.takes.reduce(Int64(0)) { $0 + (files[$1.id]?.bytes ?? 0) }
        var out = "\(s.name)  [\(s.shortID)]  \(Terminal.counted(s.takes.count, "take")), \(Terminal.clock(seconds)), \(Terminal.bytes(bytes))\(s.id == next ? "  (next record)" : "")\n"
        guard !s.takes.isEmpty else { return out }
        var header = ["ID", "NAME", "LENGTH", "FORMAT", "SIZE", "RECORDED", "STATE"]
        var rows: [[String]] = s.takes.map { t in
            let format = "\(Terminal.kilohertz(t.format.sampleRate)) kHz \(t.format.channels)ch \(t.format.sampleFormat.rawValue) \(t.encoding)"
            var state = t.state.rawValue
            if !t.overruns.isEmpty { state += ", \(Terminal.counted(t.overruns.count, "overrun"))" }
            if t.clippedSamples > 0 { state += ", clipped" }
            return [t.shortID, t.name, Terminal.clock(t.seconds), format, files[t.id]?.bytes.map(Terminal.bytes) ?? "missing",
                    Terminal.date(t.createdAt), state].map(Terminal.safe)
        }
        fit(header: &header, rows: &rows, columns: columns)
        let widths = header.indices.map { c in ([Terminal.displayWidth(header[c])] + rows.map { Terminal.displayWidth($0[c]) }).max() ?? 0 }
        func line(_ cells: [String]) -> String {
            cells.indices.map { c in c == cells.count - 1 ? cells[c] : Terminal.pad(cells[c], to: widths[c]) }.joined(separator: "  ")
        }
        out += "  " + line(header) + "\n"
        for row in rows { out += "  " + line(row) + "\n" }
        return out
    }

    /// On a terminal `columns` wide (0: not a terminal, nothing changes), makes the table fit:
    /// the time of day goes first, then the format, then the size; last, names are cut.
    static func fit(header: inout [String], rows: inout [[String]], columns: Int) {
        guard columns > 0 else { return }
        func width() -> Int {
            2 + header.indices.map { c in ([Terminal.displayWidth(header[c])] + rows.map { Terminal.displayWidth($0[c]) }).max() ?? 0 }
                .reduce(0, +) + 2 * (header.count - 1)
        }
        func drop(_ name: String) {
            guard let c = header.firstIndex(of: name) else { return }
            header.remove(at: c)
            rows = rows.map { var r = $0; r.remove(at: c); return r }
        }
        if width() > columns, let c = header.firstIndex(of: "RECORDED") {
            rows = rows.map { var r = $0; r[c] = String(r[c].prefix(10)); return r }
        }
        for name in ["FORMAT", "SIZE"] where width() > columns { drop(name) }
        if width() > columns, let c = header.firstIndex(of: "NAME") {
            let widest = rows.map { Terminal.displayWidth($0[c]) }.max() ?? 0
            let room = max(8, widest - (width() - columns))
            rows = rows.map { var r = $0; r[c] = Terminal.cut(r[c], to: room); return r }
        }
    }

    /// `--since`: a date (`2026-11-01`, `2026-11-01 14:00[:05]`, local time) or a time back from
    /// `now` (`3d`, `12h`, `30m`, `1d12h`).
    static func date(_ text: String, now: Date) throws -> Date {
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        for pattern in ["yyyy-MM-dd HH:mm:ss", "yyyy-MM-dd HH:mm", "yyyy-MM-dd'T'HH:mm:ss", "yyyy-MM-dd"] {
            f.dateFormat = pattern
            if let d = f.date(from: text) { return d }
        }
        var seconds = 0.0, number = "", matched = false
        for ch in text.lowercased() {
            if ch.isNumber || ch == "." { number.append(ch); continue }
            let unit: Double? = switch ch { case "d": 86400; case "h": 3600; case "m": 60; case "s": 1; case "w": 604_800; default: nil }
            guard let unit, let n = Double(number) else { matched = false; seconds = -1; break }
            seconds += n * unit
            number = ""
            matched = true
        }
        guard matched, number.isEmpty, seconds >= 0 else {
            throw TapedeckError(.invalidArgument, "--since \(text): not a date or a time back. Write 2026-11-01, \"2026-11-01 14:00\", or 3d, 12h, 30m.")
        }
        return now.addingTimeInterval(-seconds)
    }
}
