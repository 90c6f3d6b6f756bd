import Hummingbird
import TapedeckApp
import TapedeckCore
import Foundation

/// `/api/sessions/{id}/timeline` and `/api/sessions/{id}/clips`: what a session recorded when,
/// and any stretch of it exported as one file (as `tapedeck timeline` and `tapedeck export
/// --from … --to …`). The export is a child process like a take's (``ExportJobs``); the page
/// waits for the verified file, then offers it to play and download.
struct TimelineController: Sendable {
    typealias Context = ServerContext
    let server: WebServer

    /// The longest stretch one request exports.
    static let longestClip = 86_400.0

    /// - Thread: main actor.
    @MainActor var endpoints: RouteCollection<Context> {
        RouteCollection(context: Context.self)
            .get("sessions/:id/timeline", use: self.timeline)
            .post("sessions/:id/clips") { try await self.clip($0, context: $1) }
    }

    /// `GET /api/sessions/{id}/timeline[?date=YYYY-MM-DD]`: the session's stretches, gaps and
    /// markers on that day of the server's time zone (default: the last day it recorded on), and
    /// every day it has audio on. - Thread: main actor; suspends while the library is read.
    @MainActor func timeline(_ request: Request, context: Context) async throws -> WebServer.TimelineBody {
        let s = try await server.library.session(context.parameters.require("id"))
        let timeline = RecordingTimeline(session: s)
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = .current
        let days = Self.days(timeline, calendar)
        let day: Date
        if let text = request.uri.queryParameters.get("date") {
            guard text.count == 10, let parsed = try? ClockTime.parse(text, flag: "date") else {
                throw APIError(.badRequest, "invalid-argument", "date=\(text.prefix(40)): give a day as YYYY-MM-DD, e.g. date=\(days.last ?? "2026-12-01").")
            }
            day = calendar.startOfDay(for: parsed)
        } else {
            day = calendar.startOfDay(for: timeline.stretches.last?.end.addingTimeInterval(-0.001) ?? Date())
        }
        let interval = DateInterval(start: day, end: calendar.date(byAdding: .day, value: 1, to: day) ?? day.addingTimeInterval(86_400))
        var json = TimelineJSON(timeline, stretches: timeline.stretches(reaching: interval), day: interval)
        json.date = Self.dayText(day, calendar)
        json.dayStart = UTCTimestamp.format(interval.start)
        json.dayEnd = UTCTimestamp.format(interval.end)
        json.days = days
        return WebServer.TimelineBody(json: json)
    }

    /// `POST /api/sessions/{id}/clips`: starts exporting `from..<to` of the session's time
    /// (`gaps`: `refuse`, the default, or `silence`). - Thread: main actor; the export runs in a
    /// child process.
    @MainActor func clip(_ request: Request, context: Context) async throws -> sending EditedResponse<WebServer.ExportStatus> {
        let s = try await server.library.session(context.parameters.require("id"))
        let body = try await request.decode(as: WebServer.ClipRequest.self, context: context)
        guard let from = UTCTimestamp.parse(body.from), let to = UTCTimestamp.parse(body.to) else {
            throw APIError(.badRequest, "invalid-argument", "from and to are times in ISO 8601 with their zone, e.g. {\"from\": \"2026-12-01T14:05:00Z\", \"to\": \"2026-12-01T14:20:00Z\"}.")
        }
        guard to > from, to.timeIntervalSince(from) <= Self.longestClip else {
            throw APIError(.badRequest, "invalid-argument", "to must come after from, at most a day later. Select a range on the timeline.")
        }
        let fill = body.gaps ?? "refuse"
        guard ["refuse", "silence"].contains(fill) else {
            throw APIError(.badRequest, "invalid-argument", "gaps is refuse (the default) or silence (gaps filled with silence of their length).")
        }
        let timeline = RecordingTimeline(session: s)
        let overlapping = timeline.stretches.filter { $0.end > from && $0.start < to }
        guard let format = overlapping.first?.format else {
            throw APIError(.notFound, "not-found", "Nothing of session \"\(s.name)\" was recorded in that range. Select a range where the timeline shows audio.")
        }
        let gaps = timeline.gaps(from: from, to: to)
        if fill == "refuse", !gaps.isEmpty {
            let list = gaps.prefix(5).map { "\(RecordingTimeline.shown($0.start)) to \(RecordingTimeline.shown($0.end))" }.joined(separator: ", ")
            throw APIError(.unprocessableContent, "timeline-gap",
                           "Nothing was recorded in \(gaps.count == 1 ? "one stretch" : "\(gaps.count) stretches") of that range: \(list)\(gaps.count > 5 ? ", …" : ""). Select a range without gaps, or export with the gaps filled with silence.")
        }
        let job = try server.exports.start(clipOf: s, from: from, to: to, format: body.format ?? server.parts.defaultExportFormat,
                                           sampleFormat: format, fillingGaps: fill == "silence")
        return EditedResponse(status: .accepted, response: server.status(job))
    }

    /// Every day (`YYYY-MM-DD` in `calendar`'s zone) the timeline has audio on, in order.
    static func days(_ timeline: RecordingTimeline, _ calendar: Calendar) -> [String] {
        var days: [String] = []
        for s in timeline.stretches {
            var day = calendar.startOfDay(for: s.start)
            while day < s.end, days.count < 4000 {
                let text = dayText(day, calendar)
                if days.last != text && !days.contains(text) { days.append(text) }
                guard let next = calendar.date(byAdding: .day, value: 1, to: day) else { break }
                day = next
            }
        }
        return days.sorted()
    }

    static func dayText(_ day: Date, _ calendar: Calendar) -> String {
        let c = calendar.dateComponents([.year, .month, .day], from: day)
        return "\(zeroPadded(c.year ?? 0, width: 4))-\(zeroPadded(c.month ?? 0, width: 2))-\(zeroPadded(c.day ?? 0, width: 2))"
    }
}
