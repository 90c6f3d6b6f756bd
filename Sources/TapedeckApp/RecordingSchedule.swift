public import Foundation
import TapedeckCore

/// When to record: windows of the day in a time zone (clock times, or the sun's events with an
/// offset: `sunrise-1h`, `civil-dusk+30m`), on some weekdays, every N days, and a duty cycle
/// inside them (`record: 1m, every: 5m`). Daylight-saving changes are the zone's: a window at a
/// time the clock skips begins when the clock passes it; at a time that happens twice, the first
/// time. A plain value; any thread, never blocks.
public struct RecordingSchedule: Sendable, Hashable {
    /// A moment of a day: a clock time, or one of the sun's events, plus an offset.
    public struct Point: Sendable, Hashable, CustomStringConvertible {
        public enum Base: Sendable, Hashable {
            case clock(seconds: Int)
            case sun(SolarTimes.Event)
        }
        public var base: Base
        public var offset: Double

        public var description: String {
            let head: String = switch base {
            case .clock(let s): String(format: "%02d:%02d", s / 3600, s % 3600 / 60) + (s % 60 == 0 ? "" : String(format: ":%02d", s % 60))
            case .sun(let e): e.rawValue
            }
            guard offset != 0 else { return head }
            let s = Int(abs(offset).rounded())
            let parts = [(s / 3600, "h"), (s % 3600 / 60, "m"), (s % 60, "s")].filter { $0.0 > 0 }.map { "\($0.0)\($0.1)" }
            return head + (offset > 0 ? "+" : "-") + parts.joined()
        }

        /// `06:00`, `sunrise`, `sunrise-1h`, `civil-dusk+30m`.
        /// - Throws: a sentence naming the forms accepted.
        public static func parse(_ text: String) throws -> Point {
            let t = text.trimmingSpaces.lowercased()
            let problem = TapedeckError(.configuration, "\"\(text)\" is not a time of day: give HH:MM (06:30), or sunrise, sunset, noon, civil-dawn, civil-dusk, nautical-dawn, nautical-dusk, astronomical-dawn or astronomical-dusk, with an offset if you like (sunrise-1h, civil-dusk+30m).")
            if let first = t.first, first.isNumber {
                let parts = t.split(separator: ":").map { Int($0) }
                guard (2...3).contains(parts.count), parts.allSatisfy({ $0 != nil }), let h = parts[0], let m = parts[1],
                      (0...24).contains(h), (0...59).contains(m), h < 24 || (m == 0 && (parts.count == 2 || parts[2] == 0)) else { throw problem }
                let s = parts.count == 3 ? parts[2]! : 0
                guard (0...59).contains(s) else { throw problem }
                return Point(base: .clock(seconds: h * 3600 + m * 60 + s), offset: 0)
            }
            // The longest event name that starts the text, then an offset.
            guard let event = SolarTimes.Event.allCases.sorted(by: { $0.rawValue.count > $1.rawValue.count }).first(where: { t.hasPrefix($0.rawValue) })
            else { throw problem }
            let rest = t.dropFirst(event.rawValue.count).trimmingSpaces
            guard !rest.isEmpty else { return Point(base: .sun(event), offset: 0) }
            guard let sign = rest.first, sign == "+" || sign == "-",
                  let seconds = try? DurationText.seconds(String(rest.dropFirst().trimmingSpaces), flag: "schedule") else { throw problem }
            guard seconds <= 12 * 3600 else { throw TapedeckError(.configuration, "\"\(text)\": an offset is at most 12 h.") }
            return Point(base: .sun(event), offset: sign == "+" ? seconds : -seconds)
        }
    }

    /// One `windows:` entry.
    public struct Window: Sendable, Hashable {
        public var from: Point
        public var to: Point
        /// Weekdays it applies on (1 Sunday … 7 Saturday); empty: every day.
        public var days: Set<Int> = []
        /// Every N days, counted from 1970-01-01 in the zone; 1: every day.
        public var everyDays = 1
        /// Its line in the config, for messages.
        public var line: Int?

        public init(from: Point, to: Point, days: Set<Int> = [], everyDays: Int = 1, line: Int? = nil) {
            self.from = from
            self.to = to
            self.days = days
            self.everyDays = everyDays
            self.line = line
        }
    }

    /// A stretch to record.
    public struct Occurrence: Sendable, Hashable {
        public var start: Date
        public var end: Date
        /// The window it comes from (from 0; merged ones name the first).
        public var window: Int
    }

    /// A window that has no stretch on a day: the sun does not reach its event there that day.
    public struct Skip: Sendable, Hashable {
        public var day: DateComponents
        public var window: Int
        public var reason: String
    }

    public var zone: TimeZone
    public var location: SolarTimes?
    public var windows: [Window]
    /// Inside the windows: record this long, every this long (from each window's start).
    public var dutyRecord: Double?
    public var dutyEvery: Double?

    public init(zone: TimeZone, location: SolarTimes?, windows: [Window], dutyRecord: Double? = nil, dutyEvery: Double? = nil) {
        self.zone = zone
        self.location = location
        self.windows = windows
        self.dutyRecord = dutyRecord
        self.dutyEvery = dutyEvery
    }

    private var calendar: Calendar {
        var c = Calendar(identifier: .gregorian)
        c.timeZone = zone
        return c
    }

    /// The instant a clock time of `day` stands for in the zone: the first, when it happens twice;
    /// the end of the gap, when the clock skips it.
    func instant(clock seconds: Int, on day: DateComponents) -> Date? {
        guard let y = day.year, let m = day.month, let d = day.day,
              let midnightUTC = SolarTimes.utcDate(y, m, d, shift: 0) else { return nil }
        let wall = midnightUTC.addingTimeInterval(Double(seconds))  // the wall time, read as if UTC
        let offsets = Set([zone.secondsFromGMT(for: wall.addingTimeInterval(-86_400)), zone.secondsFromGMT(for: wall),
                           zone.secondsFromGMT(for: wall.addingTimeInterval(86_400))])
        let candidates = offsets.map { wall.addingTimeInterval(-Double($0)) }.filter { zone.secondsFromGMT(for: $0) == Int(wall.timeIntervalSince($0)) }
        if let first = candidates.min() { return first }
        // Skipped by a change to summer time: when the clock passes it.
        let before = offsets.max() ?? 0
        return zone.nextDaylightSavingTimeTransition(after: wall.addingTimeInterval(-Double(before) - 3 * 3600))
    }

    /// `point` on `day`, or a reason it has none.
    func resolve(_ point: Point, on day: DateComponents) -> Result<Date, ScheduleGap> {
        switch point.base {
        case .clock(let s):
            guard let t = instant(clock: s, on: day) else { return .failure(ScheduleGap(reason: "the day has no such time")) }
            return .success(t.addingTimeInterval(point.offset))
        case .sun(let event):
            guard let location else { return .failure(ScheduleGap(reason: "no location is set for the sun's times")) }
            guard let t = location.time(of: event, on: day, in: zone) else {
                let polar = location.latitude >= 0 ? "north" : "south"
                return .failure(ScheduleGap(reason: "the sun does not reach \(event.rawValue) that day at \(String(format: "%.2f", abs(location.latitude)))° \(polar)"))
            }
            return .success(t.addingTimeInterval(point.offset))
        }
    }

    struct ScheduleGap: Error { var reason: String }

    /// The stretches of `window` on `day` (before the duty cycle), or why there is none.
    func stretch(_ index: Int, on day: DateComponents) -> Result<Occurrence, ScheduleGap>? {
        let window = windows[index]
        let cal = calendar
        guard let noon = cal.date(from: DateComponents(year: day.year, month: day.month, day: day.day, hour: 12)) else { return nil }
        if !window.days.isEmpty && !window.days.contains(cal.component(.weekday, from: noon)) { return nil }
        if window.everyDays > 1 {
            let epoch = DateComponents(year: 1970, month: 1, day: 1)
            let n = cal.dateComponents([.day], from: epoch, to: DateComponents(year: day.year, month: day.month, day: day.day)).day ?? 0
            if n % window.everyDays != 0 { return nil }
        }
        let start: Date
        switch resolve(window.from, on: day) {
        case .success(let t): start = t
        case .failure(let gap): return .failure(gap)
        }
        var end: Date
        switch resolve(window.to, on: day) {
        case .success(let t): end = t
        case .failure(let gap): return .failure(gap)
        }
        // A window that ends before it starts ends the next day (22:00 to 06:00).
        if end <= start, let next = cal.date(byAdding: .day, value: 1, to: noon) {
            let nextDay = cal.dateComponents([.year, .month, .day], from: next)
            if case .success(let t) = resolve(window.to, on: nextDay) { end = t } else { end = start }
        }
        guard end > start else { return nil }
        return .success(Occurrence(start: start, end: end, window: index))
    }

    /// The stretches to record that end after `after`, in order, windows that overlap merged and
    /// the duty cycle applied; at most `count`, looking at most `days` days ahead. Also the
    /// windows skipped on those days, and why.
    public func occurrences(after: Date, count: Int, days: Int = 400) -> (occurrences: [Occurrence], skipped: [Skip]) {
        let cal = calendar
        var stretches: [Occurrence] = []
        var skipped: [Skip] = []
        // From the day before (a window may run past midnight into today).
        guard let first = cal.date(byAdding: .day, value: -1, to: after) else { return ([], []) }
        var merged: [Occurrence] = []
        for offset in 0..<max(1, days) {
            guard let date = cal.date(byAdding: .day, value: offset, to: first) else { break }
            let day = cal.dateComponents([.year, .month, .day], from: date)
            for index in windows.indices {
                switch stretch(index, on: day) {
                case .success(let o)?: stretches.append(o)
                case .failure(let gap)?: if date >= after.addingTimeInterval(-86_400) { skipped.append(Skip(day: day, window: index, reason: gap.reason)) }
                case nil: break
                }
            }
            merged = Self.merge(stretches).filter { $0.end > after }
            if dutyRecord == nil && merged.count > count + 1 { break }
            if dutyRecord != nil && merged.count > 2 && applyDuty(merged, after: after).count > count { break }
        }
        var result = dutyRecord == nil ? merged : applyDuty(merged, after: after)
        result = Array(result.prefix(count))
        let horizon = result.last?.end ?? after
        return (result, skipped.filter { s in cal.date(from: s.day).map { $0 <= horizon } ?? false })
    }

    static func merge(_ list: [Occurrence]) -> [Occurrence] {
        var out: [Occurrence] = []
        for o in list.sorted(by: { $0.start < $1.start }) {
            if let last = out.last, o.start <= last.end {
                out[out.count - 1].end = max(last.end, o.end)
            } else {
                out.append(o)
            }
        }
        return out
    }

    func applyDuty(_ list: [Occurrence], after: Date) -> [Occurrence] {
        guard let record = dutyRecord, let every = dutyEvery, every > 0 else { return list }
        var out: [Occurrence] = []
        for o in list {
            var t = o.start
            while t < o.end {
                let end = min(t.addingTimeInterval(record), o.end)
                if end > after { out.append(Occurrence(start: t, end: end, window: o.window)) }
                t = t.addingTimeInterval(every)
            }
        }
        return out
    }

    /// The stretch to record at `now`, or the next one. - Thread: any.
    public func current(at now: Date) -> Occurrence? {
        occurrences(after: now, count: 1).occurrences.first
    }
}
