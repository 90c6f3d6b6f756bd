public import Foundation
import TapedeckCore

/// `timeline --json` and `GET /api/sessions/{id}/timeline`: one session's stretches (with their
/// takes), gaps and markers; times in UTC (docs/JSON.md). A plain value; any thread.
public struct TimelineJSON: Encodable, Sendable {
    public struct Piece: Encodable, Sendable {
        public var id: String
        public var name: String
        public var start: String
        public var frames: Int64
        public var timeSource: String
    }
    public struct Stretch: Encodable, Sendable {
        public var start: String
        public var end: String
        public var seconds: Double
        public var format: FormatJSON
        public var takes: [Piece]
    }
    public struct Gap: Encodable, Sendable {
        public var start: String
        public var end: String
        public var seconds: Double
    }
    public struct Marker: Encodable, Sendable {
        public var time: String
        public var label: String
        public var takeID: String
    }
    public var kind = "timeline"
    public var schema = JSONSchema.version
    public var session: String
    public var sessionID: String
    public var stretches: [Stretch]
    public var gaps: [Gap]
    public var markers: [Marker]
    /// The day shown (`YYYY-MM-DD`) and its bounds, and every day with audio: set by the server's
    /// `GET /api/sessions/{id}/timeline`, absent from `tapedeck timeline --json`.
    public var date: String?
    public var dayStart: String?
    public var dayEnd: String?
    public var days: [String]?

    /// `shown`: the stretches of `timeline` to describe (``RecordingTimeline/stretches(reaching:)``).
    public init(_ timeline: RecordingTimeline, stretches shown: [RecordingTimeline.Stretch], day: DateInterval?) {
        session = timeline.session.name
        sessionID = timeline.session.id
        stretches = shown.map { s in
            Stretch(start: UTCTimestamp.format(s.start), end: UTCTimestamp.format(s.end), seconds: s.end.timeIntervalSince(s.start),
                    format: FormatJSON(s.format), takes: s.pieces.map {
                        Piece(id: $0.take.id, name: $0.take.name, start: UTCTimestamp.format($0.start), frames: $0.frames, timeSource: $0.timeSource.rawValue)
                    })
        }
        gaps = zip(shown, shown.dropFirst()).map { Gap(start: UTCTimestamp.format($0.end), end: UTCTimestamp.format($1.start), seconds: $1.start.timeIntervalSince($0.end)) }
        markers = timeline.marks.filter { m in shown.contains { m.date >= $0.start && m.date < $0.end } }
            .map { Marker(time: UTCTimestamp.format($0.date), label: $0.label, takeID: $0.take.id) }
    }
}
