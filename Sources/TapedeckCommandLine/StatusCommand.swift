import ArgumentParser
import Foundation
import TapedeckApp
import TapedeckAssembly
import TapedeckCore
#if canImport(Glibc)
import Glibc
#endif

struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show the recordings running now: what, where, for how long, levels, markers.",
        discussion: """
            Every recorder of yours is listed: each `tapedeck record`, and the recording of each `tapedeck serve` \
            page. Several may record into one library at once, each into takes of its own. Levels are the peaks of the \
            audio that arrived last (up to a second's worth). Mark, split or stop one from here with `tapedeck mark`, or from the page \
            of a `tapedeck serve` on its library. Exits 0 whether or not anything records; --json prints [] when \
            nothing does.
            """)

    @Flag(help: "Print one JSON object per recorder (a list).")
    var json = false

    @MainActor
    mutating func run() async throws {
        try await reportingErrors {
            let paths = UserPaths(environment: ProcessInfo.processInfo.environment)
            let running = RecorderRegistry.running(paths)
            // Asked until new audio has arrived (the writer takes it in batches): the first
            // answer's peaks are since whoever asked last, the next ones' over the new audio.
            var statuses: [RecorderStatus] = []
            var silent: [RecorderRegistry.Entry] = []
            for entry in running {
                let socket = entry.socket(paths)
                let ask = { (try? RecorderControl.ask(RecorderControl.Request(op: "status"), at: socket, timeout: 5))?.status }
                guard let first = ask() else {
                    silent.append(entry)
                    continue
                }
                var latest = first
                for _ in 0..<10 where latest.frames == first.frames && first.phase == "recording" {
                    try? await Task.sleep(for: .milliseconds(100))
                    guard let next = ask() else { break }
                    latest = next
                }
                statuses.append(latest)
            }
            if json {
                try Terminal.printJSON(statuses)
                return
            }
            guard !statuses.isEmpty || !silent.isEmpty else {
                print("Nothing is recording. Start a recording with `tapedeck record`, or from the page of `tapedeck serve`.")
                return
            }
            for (i, status) in statuses.enumerated() {
                if i > 0 { print("") }
                for line in Self.describe(status, now: Date()) { print(line) }
            }
            for entry in silent {
                print("PID \(entry.pid) records into \(Terminal.safe(entry.session)) of \(Terminal.safe(entry.library)), but does not answer (a tapedeck from before `status`, or busy).")
            }
        }
    }

    /// A recorder in lines of at most 80 columns.
    static func describe(_ s: RecorderStatus, now: Date) -> [String] {
        let what = s.target.map { Terminal.safe($0) } ?? s.session.map { Terminal.safe($0) } ?? "the most recent session"
        var head = "PID \(s.pid) \(s.phase == "recording" ? (s.waiting != nil ? "waiting for \(s.waiting == "trigger" ? "its trigger" : "sound") in" : "recording") : s.phase) \(what)"
        if s.splits { head += " (take \(s.takeIndex) of a run)" }
        var facts = [Terminal.clock(s.seconds).replacingOccurrences(of: ".000", with: "")]
        if let rate = s.sampleRate { facts.append("\(Terminal.kilohertz(rate)) kHz") }
        if !s.peaks.isEmpty {
            let names = s.peaks.count == 2 ? ["L", "R"] : s.peaks.indices.map { String($0 + 1) }
            facts.append(zip(names, s.peaks).map { name, peak in
                let db = peak > 0 ? max(-90, 20 * log10(Double(peak))) : -90
                return "\(name) \(String(format: "%.1f", db))"
            }.joined(separator: " ") + " dBFS")
        }
        facts.append(Terminal.counted(s.markers, "marker"))
        if s.overruns > 0 { facts.append(Terminal.counted(s.overruns, "overrun")) }
        if let split = s.framesToSplit, let rate = s.sampleRate, rate > 0 {
            facts.append("split in \(Terminal.clock(Double(split) / Double(rate)).dropLast(4))")
        }
        if let stops = s.stopsAt {
            let formatter = DateFormatter()
            formatter.dateFormat = Calendar.current.isDate(stops, inSameDayAs: now) ? "HH:mm:ss" : "EEE HH:mm:ss"
            facts.append("stops \(formatter.string(from: stops)) (in \(Terminal.clock(max(0, stops.timeIntervalSince(now))).dropLast(4)))")
        }
        let started = DateFormatter()
        started.dateFormat = "yyyy-MM-dd HH:mm:ss"
        return [Terminal.middleCut(head, 80)] + Self.wrap(facts, indent: "  ")
            + ["  started by tapedeck \(s.startedBy) at \(started.string(from: s.startedAt))", "  library \(Terminal.middleCut(Terminal.safe(s.library), 70))"]
    }

    /// `parts` joined by " · " in lines of at most 80 columns.
    static func wrap(_ parts: [String], indent: String) -> [String] {
        var lines: [String] = []
        var line = ""
        for part in parts {
            if !line.isEmpty && indent.count + line.count + 3 + part.count > 80 {
                lines.append(indent + line)
                line = ""
            }
            line += (line.isEmpty ? "" : " · ") + part
        }
        if !line.isEmpty { lines.append(indent + line) }
        return lines
    }
}
