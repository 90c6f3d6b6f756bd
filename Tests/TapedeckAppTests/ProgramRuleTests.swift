import Foundation
@testable import TapedeckApp
import TapedeckCore
import Testing

/// Programmes as typed (`--program`, `programs:`) and where their windows fall on the clock.
@Suite("Programme rules")
struct ProgramRuleTests {
    static var amsterdam: Calendar {
        var c = Calendar(identifier: .gregorian)
        c.timeZone = TimeZone(identifier: "Europe/Amsterdam")!
        return c
    }

    static func date(_ text: String) -> Date {
        let f = ISO8601DateFormatter()
        return f.date(from: text)!
    }

    @Test("NAME START-END [pad D] [DAYS], with names of several words, days as ranges round the week, and what is refused")
    func parsing() throws {
        let news = try ProgramRule.parse("Morning News 09:00-09:10:30 pad 2m mon-fri")
        #expect(news.name == "Morning News" && news.start == 9 * 3600 && news.end == 9 * 3600 + 630 && news.padSeconds == 120)
        #expect(news.days == [2, 3, 4, 5, 6])
        #expect(try ProgramRule.parse("Late 23:00-01:00 days fri-mon").days == [6, 7, 1, 2])
        #expect(news.text == "Morning News 09:00-09:10:30 pad 2m mon,tue,wed,thu,fri")
        let again = try ProgramRule.parse(news.text)
        #expect(again == news)
        #expect(try ProgramRule.parse("Weekend 10:00-11:00 sat,sun").days == [7, 1])
        #expect(try ProgramRule.parse("Daily 10:00-11:00 daily").days.isEmpty)
        // A YAML list of days (`days: [mon, tue]`) arrives as "mon, tue".
        #expect(try ProgramRule.days("mon, tue", flag: "programs[1].days") == [2, 3])
        for bad in ["09:00-09:10", "News", "News 09:00-09:00", "News 09:00-25:00", "News 09:00-09:10 pad", "News 09:00-09:10 pad 2h",
                    "News 09:00-09:10 someday", "News sunrise-sunset", "Bad\u{7}Name 09:00-10:00"] {
            #expect(throws: TapedeckError.self, "\(bad)") { try ProgramRule.parse(bad) }
        }
    }

    @Test("the next window ending after a moment: today's, tomorrow's once today's padded end has passed, over midnight, only on its days")
    func windows() throws {
        let c = Self.amsterdam
        let news = ProgramRule(name: "News", start: 9 * 3600, end: 9 * 3600 + 600, padSeconds: 120)
        // 2026-12-01 is a Tuesday; Amsterdam is UTC+1 in December.
        let w = try #require(news.nextWindow(endingAfter: Self.date("2026-12-01T07:00:00Z"), calendar: c))
        #expect(w.start == Self.date("2026-12-01T08:00:00Z") && w.end == Self.date("2026-12-01T08:10:00Z"))
        #expect(w.paddedStart == Self.date("2026-12-01T07:58:00Z") && w.paddedEnd == Self.date("2026-12-01T08:12:00Z"))
        // Inside the padding after the end: still today's.
        #expect(news.nextWindow(endingAfter: Self.date("2026-12-01T08:11:00Z"), calendar: c)?.start == w.start)
        #expect(news.nextWindow(endingAfter: Self.date("2026-12-01T08:12:00Z"), calendar: c)?.start == Self.date("2026-12-02T08:00:00Z"))
        // Over midnight: begun yesterday, still on.
        let late = ProgramRule(name: "Late", start: 23 * 3600, end: 3600)
        let l = try #require(late.nextWindow(endingAfter: Self.date("2026-12-01T23:30:00Z"), calendar: c))
        #expect(l.start == Self.date("2026-12-01T22:00:00Z") && l.end == Self.date("2026-12-02T00:00:00Z"))
        // Weekdays only: from Friday evening, Monday's.
        var weekdays = news
        weekdays.days = [2, 3, 4, 5, 6]
        #expect(weekdays.nextWindow(endingAfter: Self.date("2026-12-04T12:00:00Z"), calendar: c)?.start == Self.date("2026-12-07T08:00:00Z"))
        // A summer day: UTC+2.
        #expect(news.nextWindow(endingAfter: Self.date("2026-07-01T00:00:00Z"), calendar: c)?.start == Self.date("2026-07-01T07:00:00Z"))
    }

    @Test("a programme take stands on the timeline only where no take of the log does")
    func programmeTakesOnTheTimeline() throws {
        var programme = RecordingTimelineTests.take(20, run: nil, offset: 100, seconds: 120)
        programme.tags = [ProgramRule.tag: "News"]
        let both = RecordingTimeline(session: RecordingTimelineTests.session(RecordingTimelineTests.run + [programme]))
        #expect(both.stretches.count == 1 && !both.stretches[0].pieces.contains { $0.take.number == 20 } && both.overlaps.isEmpty)
        // The log's takes over it (2 to 4) deleted: the programme's copy is what there is.
        let left = RecordingTimelineTests.run.filter { $0.number <= 1 || $0.number >= 5 }
        let alone = RecordingTimeline(session: RecordingTimelineTests.session(left + [programme]))
        #expect(alone.stretches.map { $0.pieces.map(\.take.number) } == [[1], [20], [5, 6, 7, 8, 9, 10]])
        // Only take 3 deleted: the log still covers part of it, so it stays out.
        let part = RecordingTimeline(session: RecordingTimelineTests.session(RecordingTimelineTests.run.filter { $0.number != 3 } + [programme]))
        #expect(!part.stretches.flatMap(\.pieces).contains { $0.take.number == 20 })
    }
}
