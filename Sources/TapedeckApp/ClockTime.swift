public import Foundation
import TapedeckCore

/// A time of day as a user types it for `export --from`/`--to` and `timeline --date`: in this
/// machine's time zone unless it says its own. A namespace of pure functions; any thread.
///
/// - `2026-12-01 14:05`, `2026-12-01T14:05:30.25`: that day and time;
/// - `14:05`, `14:05:30`: today (`yesterday 14:05`: the day before);
/// - `2026-12-01T13:05:00Z`, `…+01:00`: ISO 8601 with its zone;
/// - `now`.
public enum ClockTime {
    /// Reads `text` for `flag` (`--from`), with `now` as the present.
    /// - Throws: `.invalidArgument` naming the forms it reads.
    public static func parse(_ text: String, flag: String, now: Date = Date(), zone: TimeZone = .current) throws -> Date {
        let t = text.trimmingCharacters(in: .whitespaces)
        if t.lowercased() == "now" { return now }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = zone
        var rest = Substring(t)
        var day = calendar.dateComponents([.year, .month, .day], from: now)
        if rest.lowercased().hasPrefix("yesterday ") {
            let before = calendar.date(byAdding: .day, value: -1, to: now) ?? now
            day = calendar.dateComponents([.year, .month, .day], from: before)
            rest = rest.dropFirst("yesterday ".count)
        } else if let date = Self.date(rest.prefix(10)), rest.count == 10 || [" ", "T", "t"].contains(rest.dropFirst(10).first) {
            day = date
            rest = rest.count == 10 ? "00:00" : rest.dropFirst(11)
        }
        guard let time = Self.time(rest) else {
            throw TapedeckError(.invalidArgument, "\(flag) \(text): give a time as HH:MM[:SS] (today), YYYY-MM-DD HH:MM[:SS[.fff]], yesterday HH:MM, an ISO 8601 time with its zone (2026-12-01T13:05:00Z), or now.")
        }
        var c = day
        c.hour = time.hour
        c.minute = time.minute
        c.second = time.second
        let zoneOf = time.offset.flatMap { TimeZone(secondsFromGMT: $0) } ?? zone
        calendar.timeZone = zoneOf
        guard let whole = calendar.date(from: c) else {
            throw TapedeckError(.invalidArgument, "\(flag) \(text): there is no such time\(time.offset == nil ? " in \(zone.identifier)" : "").")
        }
        return whole.addingTimeInterval(time.fraction)
    }

    /// `YYYY-MM-DD` as a day.
    static func date(_ text: Substring) -> DateComponents? {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0].count == 4, parts[1].count == 2, parts[2].count == 2,
              let y = Int(parts[0]), let m = Int(parts[1]), let d = Int(parts[2]), (1...12).contains(m), (1...31).contains(d) else { return nil }
        return DateComponents(year: y, month: m, day: d)
    }

    /// `HH:MM[:SS[.fff]]` with an optional `Z` or `±HH:MM`.
    static func time(_ text: Substring) -> (hour: Int, minute: Int, second: Int, fraction: Double, offset: Int?)? {
        var body = text
        var offset: Int?
        if body.hasSuffix("Z") || body.hasSuffix("z") {
            offset = 0
            body = body.dropLast()
        } else if let sign = body.lastIndex(where: { $0 == "+" || $0 == "-" }) {
            let zone = body[body.index(after: sign)...].split(separator: ":")
            guard zone.count == 2, let h = Int(zone[0]), let m = Int(zone[1]), (0...14).contains(h), (0...59).contains(m) else { return nil }
            offset = (h * 3600 + m * 60) * (body[sign] == "-" ? -1 : 1)
            body = body[..<sign]
        }
        let parts = body.split(separator: ":", omittingEmptySubsequences: false)
        guard (2...3).contains(parts.count), parts[0].count <= 2, parts[1].count == 2,
              let h = Int(parts[0]), let m = Int(parts[1]), (0...23).contains(h), (0...59).contains(m) else { return nil }
        var second = 0, fraction = 0.0
        if parts.count == 3 {
            let s = parts[2].split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
            guard s[0].count == 2, let whole = Int(s[0]), (0...60).contains(whole) else { return nil }
            second = whole
            if s.count == 2 {
                guard !s[1].isEmpty, s[1].allSatisfy(\.isASCII), s[1].allSatisfy(\.isNumber), let f = Double("0." + s[1]) else { return nil }
                fraction = f
            }
        }
        return (h, m, second, fraction, offset)
    }
}
