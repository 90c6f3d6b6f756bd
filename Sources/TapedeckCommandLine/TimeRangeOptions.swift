import ArgumentParser
import Foundation
import TapedeckApp
import TapedeckCore

/// `--from`, `--to`, `--duration` and `--gaps`: a stretch of wall-clock time, for `export` and
/// `fleet export`. Main actor (the commands'); never blocks.
struct TimeRangeOptions: ParsableArguments {
    @Option(help: ArgumentHelp("Export the time from here (with --to or --duration): YYYY-MM-DD HH:MM[:SS[.fff]], HH:MM (today), now, or marker:LABEL.", valueName: "time"))
    var from: String?

    @Option(help: ArgumentHelp("Export the time up to here (same forms as --from).", valueName: "time"))
    var to: String?

    @Option(help: ArgumentHelp("With --from or --to: how long, e.g. 15m or 1h30m.", valueName: "length"))
    var duration: String?

    @Option(help: "Where nothing was recorded in --from/--to: refuse and list the gaps (default), silence (filled, and said so), or split (a file per stretch).")
    var gaps: GapChoice?

    /// Whether any of them was given.
    var given: Bool { from != nil || to != nil || duration != nil || gaps != nil }

    var policy: GapPolicy { gaps?.policy ?? .refuse }

    /// Checks that they make a range, before anything is read: two of `--from`, `--to` and
    /// `--duration`, and two clock times in order. - Returns: the duration's seconds.
    /// - Throws: `.invalidArgument` saying what to give.
    func check(now: Date) throws -> Double? {
        guard from != nil || to != nil else {
            throw TapedeckError(.invalidArgument, "--duration and --gaps go with a time: give --from (and --to or --duration), e.g. --from 14:05 --duration 15m.")
        }
        let length = try duration.map { try DurationText.seconds($0) }
        if from != nil && to != nil && length != nil {
            throw TapedeckError(.invalidArgument, "--from, --to and --duration: give two of them, not all three.")
        }
        if length == nil && (from == nil || to == nil) {
            throw TapedeckError(.invalidArgument, "\(from == nil ? "--to" : "--from") needs \(from == nil ? "--from" : "--to") or --duration, e.g. --from 14:05 --to 14:20 or --from 14:05 --duration 15m.")
        }
        if let from, let to, !Self.isMarker(from), !Self.isMarker(to),
           try ClockTime.parse(to, flag: "--to", now: now) <= ClockTime.parse(from, flag: "--from", now: now) {
            throw TapedeckError(.invalidArgument, "--to is not after --from: the time to export runs from one to the other.")
        }
        return length
    }

    /// The range on `timeline` (its markers for `marker:LABEL`: the latest such marker; for
    /// `--to`, the first one after `--from`). - Throws: as ``check(now:)``, and `.notFound` for a marker it lacks.
    func range(on timeline: RecordingTimeline, now: Date) throws -> (start: Date, end: Date) {
        let length = try check(now: now)
        func time(_ text: String, _ flag: String, after: Date?) throws -> Date {
            Self.isMarker(text) ? try timeline.mark(String(text.dropFirst(7)), after: after).date : try ClockTime.parse(text, flag: flag, now: now)
        }
        var start = try from.map { try time($0, "--from", after: nil) }
        var end = try to.map { try time($0, "--to", after: start) }
        if let length {
            if let s = start { end = s.addingTimeInterval(length) } else if let e = end { start = e.addingTimeInterval(-length) }
        }
        guard let start, let end, end > start else {
            throw TapedeckError(.invalidArgument, "--to is not after --from: the time to export runs from one to the other.")
        }
        return (start, end)
    }

    /// The labels of the markers named (`marker:LABEL`).
    var markers: [String] { [from, to].compactMap { $0 }.filter(Self.isMarker).map { String($0.dropFirst(7)) } }

    /// The range when no marker is named (clock times only), to find the session that
    /// recorded then; nil otherwise.
    func clockRange(now: Date) -> (start: Date, end: Date)? {
        guard markers.isEmpty else { return nil }
        let length = try? duration.map { try DurationText.seconds($0) }
        let start = try? from.map { try ClockTime.parse($0, flag: "--from", now: now) }
        let end = try? to.map { try ClockTime.parse($0, flag: "--to", now: now) }
        switch (start ?? nil, end ?? nil, length ?? nil) {
        case let (s?, e?, _): return (s, e)
        case let (s?, nil, l?): return (s, s.addingTimeInterval(l))
        case let (nil, e?, l?): return (e.addingTimeInterval(-l), e)
        default: return nil
        }
    }

    static func isMarker(_ text: String) -> Bool { text.lowercased().hasPrefix("marker:") }
}
