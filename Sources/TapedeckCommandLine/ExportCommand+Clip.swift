import Foundation
import TapedeckApp
import TapedeckCore

extension ExportCommand {
    /// `export --from … --to …`: the time asked for, cut from one session's takes, as export
    /// items (one, or one per stretch with `--gaps split`).
    /// - Throws: `.invalidArgument` for times that do not make a range, or takes named too;
    ///   what ``RecordingTimeline/clips(from:to:gaps:)`` throws.
    /// - Thread: main actor; never blocks.
    @MainActor
    func clipItems(in store: SessionStore) throws -> [ExportItem] {
        guard from != nil || to != nil else {
            throw TapedeckError(.invalidArgument, "--duration and --gaps go with a time: give --from (and --to or --duration), e.g. --from 14:05 --duration 15m.")
        }
        guard takes.isEmpty else {
            throw TapedeckError(.invalidArgument, "--from/--to export a time, not takes: leave out \(takes.joined(separator: " ")), or export the takes without --from/--to.")
        }
        let length = try duration.map { try DurationText.seconds($0) }
        if from != nil && to != nil && length != nil {
            throw TapedeckError(.invalidArgument, "--from, --to and --duration: give two of them, not all three.")
        }
        if length == nil && (from == nil || to == nil) {
            throw TapedeckError(.invalidArgument, "\(from == nil ? "--to" : "--from") needs \(from == nil ? "--from" : "--to") or --duration, e.g. --from 14:05 --to 14:20 or --from 14:05 --duration 15m.")
        }
        let timeline = try clipTimeline(in: store)
        let now = Date()
        var start = try from.map { try Self.time($0, flag: "--from", timeline: timeline, now: now, after: nil) }
        var end = try to.map { try Self.time($0, flag: "--to", timeline: timeline, now: now, after: start) }
        if let length {
            if let s = start { end = s.addingTimeInterval(length) } else if let e = end { start = e.addingTimeInterval(-length) }
        }
        guard let start, let end, end > start else {
            throw TapedeckError(.invalidArgument, "--to is not after --from: the time to export runs from one to the other.")
        }
        let clips = try timeline.clips(from: start, to: end, gaps: gaps?.policy ?? .refuse)
        return clips.map { ExportItem(take: $0.take(in: timeline.session), session: timeline.session, clip: $0) }
    }

    /// The timeline of the session the time is cut from: `--session`, or the one session that
    /// recorded in the range (or has the marker).
    @MainActor
    private func clipTimeline(in store: SessionStore) throws -> RecordingTimeline {
        if session.count > 1 {
            throw TapedeckError(.invalidArgument, "--from/--to cut from one session: give --session once.")
        }
        if let name = session.first {
            guard case .session(let s) = try store.resolve(name) else {
                throw TapedeckError(.invalidArgument, "\"\(name)\" is a take; --session names a session.")
            }
            return RecordingTimeline(session: s)
        }
        let timelines = try (store.isLoaded ? store.sessions : store.storage.sessions()).map(RecordingTimeline.init(session:)).filter { !$0.stretches.isEmpty }
        // Without --session: the sessions that hold the markers named, or that recorded at the
        // times given (approximately: the range is not known until the markers are).
        let markers = [from, to].compactMap { $0 }.filter { $0.lowercased().hasPrefix("marker:") }.map { String($0.dropFirst(7)) }
        let now = Date()
        let times = [from, to].compactMap { $0 }.filter { !$0.lowercased().hasPrefix("marker:") }.compactMap { try? ClockTime.parse($0, flag: "", now: now) }
        let candidates = timelines.filter { t in
            if !markers.isEmpty { return markers.allSatisfy { label in (try? t.mark(label)) != nil } }
            let span = (times.min() ?? now, times.max() ?? now)
            let lo = span.0.addingTimeInterval(times.count < 2 ? -DurationText.limit : 0), hi = span.1.addingTimeInterval(times.count < 2 ? DurationText.limit : 0)
            return t.stretches.contains { $0.end > lo && $0.start < hi }
        }
        if candidates.count == 1 { return candidates[0] }
        if candidates.isEmpty {
            let what = markers.isEmpty ? "audio at that time" : "a marker \(markers.map { "\"\($0)\"" }.joined(separator: " and "))"
            throw TapedeckError(.notFound, "No session has \(what). `tapedeck timeline` shows what was recorded when, and its markers.")
        }
        throw TapedeckError(.invalidArgument, "Several sessions recorded then: \(candidates.map { "\"\($0.session.name)\"" }.joined(separator: ", ")). Choose one with --session.")
    }

    /// `--from`/`--to` as a time: a clock time, or `marker:LABEL` (the latest such marker; for
    /// `--to`, the first one after `--from`).
    static func time(_ text: String, flag: String, timeline: RecordingTimeline, now: Date, after: Date?) throws -> Date {
        if text.lowercased().hasPrefix("marker:") {
            return try timeline.mark(String(text.dropFirst(7)), after: after).date
        }
        return try ClockTime.parse(text, flag: flag, now: now)
    }
}

/// A clip's part of `export --json`: the time it holds (UTC), the takes it is cut from, the gaps filled.
struct ClipJSON: Encodable {
    struct Gap: Encodable {
        var start: String
        var end: String
        var seconds: Double
    }
    var start: String
    var end: String
    var takes: [String]
    var takeIDs: [String]
    var filledGaps: [Gap]

    init(_ clip: ClipPlan) {
        start = UTCTimestamp.format(clip.start)
        end = UTCTimestamp.format(clip.end)
        takes = clip.takes.map(\.name)
        takeIDs = clip.takes.map(\.id)
        filledGaps = clip.filledGaps.map { Gap(start: UTCTimestamp.format($0.start), end: UTCTimestamp.format($0.end), seconds: $0.seconds) }
    }
}
