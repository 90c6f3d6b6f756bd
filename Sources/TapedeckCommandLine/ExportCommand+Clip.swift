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
        let now = Date()
        _ = try range.check(now: now)
        guard takes.isEmpty else {
            throw TapedeckError(.invalidArgument, "--from/--to export a time, not takes: leave out \(takes.joined(separator: " ")), or export the takes without --from/--to.")
        }
        let timeline = try clipTimeline(in: store, now: now)
        let (start, end) = try range.range(on: timeline, now: now)
        let clips = try timeline.clips(from: start, to: end, gaps: range.policy)
        return clips.map { ExportItem(take: $0.take(in: timeline.session), session: timeline.session, clip: $0) }
    }

    /// The timeline of the session the time is cut from: `--session`, or the one session that
    /// recorded in the range (or has the marker).
    @MainActor
    private func clipTimeline(in store: SessionStore, now: Date) throws -> RecordingTimeline {
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
        // Without --session: the sessions that hold the markers named, or that recorded then.
        let markers = range.markers
        let clock = range.clockRange(now: now)
        let candidates = timelines.filter { t in
            if !markers.isEmpty { return markers.allSatisfy { label in (try? t.mark(label)) != nil } }
            guard let clock else { return false }
            return t.stretches.contains { $0.end > clock.start && $0.start < clock.end }
        }
        if candidates.count == 1 { return candidates[0] }
        if candidates.isEmpty {
            let what = markers.isEmpty ? "audio at that time" : "a marker \(markers.map { "\"\($0)\"" }.joined(separator: " and "))"
            throw TapedeckError(.notFound, "No session has \(what). `tapedeck timeline` shows what was recorded when, and its markers.")
        }
        throw TapedeckError(.invalidArgument, "Several sessions recorded then: \(candidates.map { "\"\($0.session.name)\"" }.joined(separator: ", ")). Choose one with --session.")
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
