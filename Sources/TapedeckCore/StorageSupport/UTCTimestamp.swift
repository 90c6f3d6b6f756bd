public import Foundation

/// Tapedeck's one UTC timestamp codec: ISO 8601 text to the microsecond (manifests), to the
/// second (file tags, `--json`), and the compact stamp of quarantine folders. Proleptic
/// Gregorian arithmetic on integers, not Foundation's calendar: loading a calendar costs
/// milliseconds of start-up, and text read from a file must round-trip exactly.
/// Plain functions; any thread, never block.
public enum UTCTimestamp {
    /// The microsecond a manifest can store for `date`, as stored.
    public static func micros(_ date: Date) -> Int64 {
        let v = (date.timeIntervalSince1970 * 1e6).rounded()
        // Years 0001 to 9999.
        let lo = -62_135_596_800.0 * 1e6, hi = 253_402_300_799.0 * 1e6
        guard v.isFinite else { return 0 }
        return Int64(min(max(v, lo), hi))
    }

    /// `date` as a manifest stores it (whole microseconds), so values read back compare equal.
    public static func quantize(_ date: Date) -> Date {
        self.date(micros: micros(date))
    }

    /// The `Date` that ``micros(_:)`` maps back to `wanted`, microseconds since 1970. A `Date`
    /// (a `Double` from 2001) cannot hold every microsecond far from 2001 and the division rounds,
    /// so the plain conversion can land a microsecond off, and a manifest read and written again
    /// would drift (found by fuzzing the manifest parser): step to the neighbouring values until it maps back.
    /// Where no `Date` has that microsecond (around year 9999), the nearest one stays.
    public static func date(micros wanted: Int64) -> Date {
        var date = Date(timeIntervalSince1970: Double(wanted) / 1e6)
        for _ in 0..<16 {
            let got = micros(date)
            if got == wanted { break }
            let t = date.timeIntervalSinceReferenceDate
            let next = Date(timeIntervalSinceReferenceDate: got < wanted ? t.nextUp : t.nextDown)
            if abs(micros(next) - wanted) > abs(got - wanted) { break }
            date = next
        }
        return date
    }

    /// `2024-05-01T18:30:00.123456Z`.
    public static func format(_ date: Date) -> String {
        let us = micros(date)
        var seconds = us / 1_000_000
        var fraction = us % 1_000_000
        if fraction < 0 {
            fraction += 1_000_000
            seconds -= 1
        }
        var days = seconds / 86_400
        var rest = seconds % 86_400
        if rest < 0 {
            rest += 86_400
            days -= 1
        }
        let (y, m, d) = civil(fromDays: days)
        return "\(pad(y, 4))-\(pad(m, 2))-\(pad(d, 2))T\(pad(rest / 3600, 2)):\(pad(rest / 60 % 60, 2)):\(pad(rest % 60, 2)).\(pad(fraction, 6))Z"
    }

    /// Parses `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`; `nil` for anything else.
    public static func parse(_ text: String) -> Date? {
        let b = Array(text.utf8)
        guard b.count >= 20, b.count <= 40 else { return nil }
        func digits(_ from: Int, _ count: Int) -> Int64? {
            guard from + count <= b.count else { return nil }
            var v: Int64 = 0
            for i in from..<(from + count) {
                guard b[i] >= 0x30, b[i] <= 0x39 else { return nil }
                v = v * 10 + Int64(b[i] - 0x30)
            }
            return v
        }
        guard let y = digits(0, 4), b[4] == 0x2D, let mo = digits(5, 2), b[7] == 0x2D, let d = digits(8, 2),
              b[10] == 0x54 || b[10] == 0x74, let h = digits(11, 2), b[13] == 0x3A, let mi = digits(14, 2), b[16] == 0x3A,
              let s = digits(17, 2) else { return nil }
        guard y >= 1, (1...12).contains(mo), d >= 1, d <= daysIn(month: mo, year: y), h <= 23, mi <= 59, s <= 59 else { return nil }
        var i = 19
        var micro: Int64 = 0
        if b[i] == 0x2E {
            i += 1
            let start = i
            while i < b.count, b[i] >= 0x30, b[i] <= 0x39 { i += 1 }
            let n = i - start
            guard (1...9).contains(n) else { return nil }
            for k in 0..<6 { micro = micro * 10 + (k < n ? Int64(b[start + k] - 0x30) : 0) }
        }
        guard i < b.count else { return nil }
        var offset: Int64 = 0
        if b[i] == 0x5A || b[i] == 0x7A {
            i += 1
        } else if b[i] == 0x2B || b[i] == 0x2D {
            guard let oh = digits(i + 1, 2), i + 3 < b.count, b[i + 3] == 0x3A, let om = digits(i + 4, 2), oh <= 23, om <= 59 else { return nil }
            offset = (oh * 3600 + om * 60) * (b[i] == 0x2D ? -1 : 1)
            i += 6
        } else {
            return nil
        }
        guard i == b.count else { return nil }
        let seconds = days(fromCivil: y, mo, d) * 86_400 + h * 3600 + mi * 60 + s - offset
        return date(micros: seconds * 1_000_000 + micro)
    }

    static func pad(_ v: Int64, _ width: Int) -> String {
        let s = String(v)
        return s.count >= width ? s : String(repeating: "0", count: width - s.count) + s
    }

    static func daysIn(month: Int64, year: Int64) -> Int64 {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
    static func days(fromCivil year: Int64, _ month: Int64, _ day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    static func civil(fromDays days: Int64) -> (Int64, Int64, Int64) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (m <= 2 ? 1 : 0), m, d)
    }

    /// `2024-05-01T18:30:00Z`: to the whole second (rounded down), as `Date.ISO8601Format()`.
    public static func seconds(_ date: Date) -> String {
        // The nearest second, never the one before: a take that began at 14:59:59.9998 says 15:00:00.
        let full = format(Date(timeIntervalSince1970: date.timeIntervalSince1970.rounded()))
        return String(full.prefix(19)) + "Z"
    }

    /// `20240501T183000Z`: ISO 8601's basic format to the whole second (S3's `x-amz-date`).
    public static func basic(_ date: Date) -> String {
        String(format(date).prefix(19).filter { $0 != "-" && $0 != ":" }) + "Z"
    }

    /// `20240501-183000`, for folder names that sort by time.
    public static func compact(_ date: Date) -> String {
        let digits = basic(date)
        return String(digits.prefix(8)) + "-" + String(digits.dropFirst(9).prefix(6))
    }
}
