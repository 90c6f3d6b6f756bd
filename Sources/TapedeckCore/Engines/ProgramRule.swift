public import Foundation

/// A programme: a stretch of the local clock each day (or on some weekdays) that a run also
/// keeps as a take of its own, cut from the same capture, with some padding before and after
/// (`record --program "News 09:00-09:10 pad 2m"`, `programs:` in the config). The run's own
/// takes go on unchanged; the programme's take holds the same frames. A plain value; any
/// thread, never blocks.
public struct ProgramRule: Sendable, Hashable {
    /// The programme's name; its takes are named after it and tagged `program` with it.
    public var name: String
    /// When it starts and ends, in seconds after local midnight; an ``end`` not after
    /// ``start`` is on the next day (`23:00-01:00`).
    public var start: Int
    public var end: Int
    /// Audio kept before its start and after its end.
    public var padSeconds: Double
    /// Weekdays it is on (1 Sunday … 7 Saturday, as `Calendar`); empty: every day.
    public var days: Set<Int>

    /// The tag a programme's take carries, with the programme's name as its value.
    public static let tag = "PROGRAM"

    /// The longest padding.
    public static let longestPad = 3600.0

    public init(name: String, start: Int, end: Int, padSeconds: Double = 0, days: Set<Int> = []) {
        self.name = name
        self.start = start
        self.end = end
        self.padSeconds = padSeconds
        self.days = days
    }

    /// The programme's first occurrence whose padded end comes after `date`, in `calendar`'s
    /// time zone; `nil` when it has no day in the coming week.
    public func nextWindow(endingAfter date: Date, calendar: Calendar = .current) -> ProgramWindow? {
        let today = calendar.startOfDay(for: date)
        for offset in -1...8 {
            guard let day = calendar.date(byAdding: .day, value: offset, to: today) else { continue }
            if !days.isEmpty && !days.contains(calendar.component(.weekday, from: day)) { continue }
            guard let from = Self.time(start, on: day, calendar), var to = Self.time(end, on: day, calendar) else { continue }
            if to <= from, let next = calendar.date(byAdding: .day, value: 1, to: day), let t = Self.time(end, on: next, calendar) { to = t }
            let window = ProgramWindow(name: name, start: from, end: to, padSeconds: padSeconds)
            if window.paddedEnd > date { return window }
        }
        return nil
    }

    /// `seconds` after midnight on `day` (a time the clock skips: when it passes it).
    private static func time(_ seconds: Int, on day: Date, _ calendar: Calendar) -> Date? {
        calendar.date(bySettingHour: seconds / 3600 % 24, minute: seconds % 3600 / 60, second: seconds % 60, of: day,
                      matchingPolicy: .nextTime, repeatedTimePolicy: .first, direction: .forward)
            .map { seconds >= 86_400 ? $0.addingTimeInterval(86_400) : $0 }
    }
}

/// One occurrence of a ``ProgramRule``: the programme's start and end, and the padding kept
/// around them. A plain value.
public struct ProgramWindow: Sendable, Hashable {
    public var name: String
    public var start: Date
    public var end: Date
    public var padSeconds: Double

    public init(name: String, start: Date, end: Date, padSeconds: Double) {
        self.name = name
        self.start = start
        self.end = end
        self.padSeconds = padSeconds
    }

    /// Where its take begins and ends: the programme with its padding.
    public var paddedStart: Date { start.addingTimeInterval(-padSeconds) }
    public var paddedEnd: Date { end.addingTimeInterval(padSeconds) }
}
