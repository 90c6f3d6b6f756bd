import ArgumentParser
import Foundation
import TapedeckApp
import TapedeckCore

struct TimelineCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "timeline",
        abstract: "Show what was recorded when: stretches of audio, the gaps between them, and markers.",
        discussion: """
            Times are the recording's own (each take's first frame, then its frames) in this machine's time \
            zone; takes split from one run are one stretch. Any stretch of time can be exported as one file: \
            tapedeck export --session S --from TIME --to TIME.
            """ + HelpExamples.text([
            "tapedeck timeline": "Every session's stretches, gaps and markers.",
            "tapedeck timeline --session Logger --date 2026-12-01": "What Logger recorded that day.",
            "tapedeck timeline --json | jq '.[].gaps'": "The gaps, for a script.",
        ]))

    @Option(help: "Only this session (name or id).", completion: TakeCompletion.kind(.sessions))
    var session: String?

    @Option(help: ArgumentHelp("Only this day: YYYY-MM-DD, today or yesterday (this machine's time zone).", valueName: "day"))
    var date: String?

    @Flag(help: "Print JSON: an array of one object per session.")
    var json = false

    @OptionGroup var global: GlobalOptions

    @MainActor
    mutating func run() async throws {
        try await reportingErrors {
            let day = try date.map { try Self.day($0) }
            let studio = try await global.makeStudio()
            var sessions: [Session]
            if let session {
                guard case .session(let s) = try studio.store.resolve(session) else {
                    throw TapedeckError(.invalidArgument, "\"\(session)\" is a take, not a session. Give its session, or see the take with `tapedeck show \(session)`.")
                }
                sessions = [s]
            } else {
                sessions = try studio.store.storage.sessions()
            }
            let timelines = sessions.map(RecordingTimeline.init(session:)).map { t in (t, t.stretches(reaching: day)) }
                .filter { !$0.1.isEmpty || session != nil }
            if json {
                try Terminal.printJSON(timelines.map { TimelineJSON($0.0, stretches: $0.1, day: day) })
                return
            }
            if timelines.allSatisfy({ $0.1.isEmpty }) {
                let when = date.map { " on \($0)" } ?? ""
                print(session.map { "Session \"\($0)\" has no audio\(when)." } ?? "No audio was recorded\(when).")
                return
            }
            for (index, (timeline, stretches)) in timelines.enumerated() {
                if index > 0 { print("") }
                print(Self.lines(timeline, stretches).joined(separator: "\n"))
            }
        }
    }

    /// The printed lines of one session: a heading, then each stretch, its markers, and the gap to
    /// the next. At most 80 columns for names up to about 30 characters.
    static func lines(_ timeline: RecordingTimeline, _ stretches: [RecordingTimeline.Stretch]) -> [String] {
        var out = ["\(timeline.session.name)"]
        guard !stretches.isEmpty else { return out + ["  no audio"] }
        let marks = timeline.marks
        var lastDay = ""
        func time(_ date: Date) -> String {
            let full = RecordingTimeline.shown(date)
            let day = String(full.prefix(10))
            defer { lastDay = day }
            return day == lastDay ? String(full.dropFirst(11)) : full
        }
        for (i, s) in stretches.enumerated() {
            let takes = s.pieces.count == 1 ? s.pieces[0].take.name : "\(s.pieces[0].take.name) … \(s.pieces[s.pieces.count - 1].take.name) (\(s.pieces.count) takes)"
            let approximate = s.pieces.contains { $0.timeSource == .created } ? "  ~ (time approximate)" : ""
            out.append("  \(time(s.start)) to \(time(s.end))  \(RecordingTimeline.length(s.end.timeIntervalSince(s.start)))")
            out.append("      \(takes), \(s.format.sampleRate) Hz, \(s.format.channels) ch, \(s.format.sampleFormat)\(approximate)")
            for mark in marks where mark.date >= s.start && mark.date < s.end {
                out.append("      marker \(time(mark.date))\(mark.label.isEmpty ? "" : "  \(mark.label)")")
            }
            if i + 1 < stretches.count {
                let next = stretches[i + 1]
                let seconds = next.start.timeIntervalSince(s.end)
                out.append(seconds >= 0 ? "  gap \(RecordingTimeline.length(seconds))" : "  overlap \(RecordingTimeline.length(-seconds)) (the clock was set back)")
            }
        }
        return out
    }

    /// `--date`: the day as an interval in this machine's time zone.
    static func day(_ text: String) throws -> DateInterval {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = .current
        let lower = text.lowercased()
        let base: Date
        if lower == "today" || lower == "yesterday" {
            base = lower == "today" ? Date() : calendar.date(byAdding: .day, value: -1, to: Date()) ?? Date()
        } else if text.count == 10, let date = try? ClockTime.parse(text, flag: "--date") {
            base = date
        } else {
            throw TapedeckError(.invalidArgument, "--date \(text): give a day as YYYY-MM-DD (2026-12-01), today or yesterday.")
        }
        let start = calendar.startOfDay(for: base)
        return DateInterval(start: start, end: calendar.date(byAdding: .day, value: 1, to: start) ?? start.addingTimeInterval(86_400))
    }
}
