public import Foundation

/// When the sun rises and sets, and civil, nautical and astronomical dawn and dusk, from NOAA's
/// solar equations (the Astronomical Almanac's low-precision series NOAA's calculator uses:
/// about a minute's accuracy between ±72° latitude), with the atmosphere's refraction and the
/// sun's apparent radius for sunrise and sunset. No service is asked. A plain value; any thread.
public struct SolarTimes: Sendable, Hashable {
    /// A moment of the sun's day.
    public enum Event: String, Sendable, Hashable, CaseIterable {
        case sunrise, sunset, noon
        case civilDawn = "civil-dawn", civilDusk = "civil-dusk"
        case nauticalDawn = "nautical-dawn", nauticalDusk = "nautical-dusk"
        case astronomicalDawn = "astronomical-dawn", astronomicalDusk = "astronomical-dusk"

        /// The sun's zenith angle at the event (before refraction), and whether it is rising.
        var zenith: (degrees: Double, rising: Bool)? {
            switch self {
            case .sunrise: (90 + 16.0 / 60, true)
            case .sunset: (90 + 16.0 / 60, false)
            case .civilDawn: (96, true)
            case .civilDusk: (96, false)
            case .nauticalDawn: (102, true)
            case .nauticalDusk: (102, false)
            case .astronomicalDawn: (108, true)
            case .astronomicalDusk: (108, false)
            case .noon: nil
            }
        }
    }

    public var latitude: Double
    public var longitude: Double

    public init(latitude: Double, longitude: Double) {
        self.latitude = latitude
        self.longitude = longitude
    }

    /// `event` on the day `day` (year, month, day) in `zone`: `nil` when the sun does not reach
    /// it that day there (it stays above or below: polar day and night, white nights).
    public func time(of event: Event, on day: DateComponents, in zone: TimeZone) -> Date? {
        guard let y = day.year, let m = day.month, let d = day.day else { return nil }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = zone
        // As the almanacs (and astral) do: the event of that date in UTC; when it falls on another
        // local date, the event of the day before or after, toward the date asked for.
        func localDay(_ t: Date) -> (Int, Int, Int) {
            let c = calendar.dateComponents([.year, .month, .day], from: t)
            return (c.year ?? 0, c.month ?? 0, c.day ?? 0)
        }
        guard let date = Self.utcDate(y, m, d, shift: 0), let first = transit(event, utcDay: date) else { return nil }
        let day = localDay(first)
        if day == (y, m, d) { return first }
        let shift = day < (y, m, d) ? 1 : -1
        guard let other = Self.utcDate(y, m, d, shift: shift), let second = transit(event, utcDay: other), localDay(second) == (y, m, d) else { return nil }
        return second
    }

    static func utcDate(_ y: Int, _ m: Int, _ d: Int, shift: Int) -> Date? {
        var utc = Calendar(identifier: .gregorian)
        utc.timeZone = TimeZone(identifier: "UTC")!
        guard let base = utc.date(from: DateComponents(year: y, month: m, day: d)) else { return nil }
        return base.addingTimeInterval(Double(shift) * 86_400)
    }

    /// The event on the UTC day starting at `utcDay` (midnight UTC), or `nil` if the sun does not
    /// reach its angle.
    func transit(_ event: Event, utcDay: Date) -> Date? {
        let jd0 = utcDay.timeIntervalSince1970 / 86_400 + 2_440_587.5
        guard let (zenith, rising) = event.zenith else {
            let t = Self.centuries(jd0)
            return utcDay.addingTimeInterval((720 - 4 * longitude - Self.equationOfTime(t)) * 60)
        }
        let lat = min(max(latitude, -89.8), 89.8)
        let target = zenith + Self.refraction(atZenith: zenith)
        var minutes = 720.0
        var adjustment = 0.0
        for _ in 0..<2 {
            let t = Self.centuries(jd0 + adjustment)
            let decl = Self.declination(t)
            let cosH = (cos(target * .pi / 180) - sin(lat * .pi / 180) * sin(decl * .pi / 180))
                / (cos(lat * .pi / 180) * cos(decl * .pi / 180))
            guard cosH >= -1, cosH <= 1 else { return nil }
            var hourAngle = acos(cosH) * 180 / .pi
            if !rising { hourAngle = -hourAngle }
            var offset = (-longitude - hourAngle) * 4 - Self.equationOfTime(t)
            if offset < -720 { offset += 1440 }
            minutes = 720 + offset
            adjustment = minutes / 1440
        }
        return utcDay.addingTimeInterval(minutes * 60)
    }

    static func centuries(_ jd: Double) -> Double { (jd - 2_451_545.0) / 36_525.0 }

    static func radians(_ d: Double) -> Double { d * .pi / 180 }

    static func meanLongitude(_ t: Double) -> Double {
        (280.46646 + t * (36_000.76983 + 0.0003032 * t)).truncatingRemainder(dividingBy: 360)
    }

    static func meanAnomaly(_ t: Double) -> Double { 357.52911 + t * (35_999.05029 - 0.0001537 * t) }

    static func eccentricity(_ t: Double) -> Double { 0.016708634 - t * (0.000042037 + 0.0000001267 * t) }

    static func obliquity(_ t: Double) -> Double {
        let seconds = 21.448 - t * (46.815 + t * (0.00059 - t * 0.001813))
        let mean = 23.0 + (26.0 + seconds / 60.0) / 60.0
        return mean + 0.00256 * cos(radians(125.04 - 1934.136 * t))
    }

    static func declination(_ t: Double) -> Double {
        let m = radians(meanAnomaly(t))
        let center = sin(m) * (1.914602 - t * (0.004817 + 0.000014 * t)) + sin(2 * m) * (0.019993 - 0.000101 * t) + sin(3 * m) * 0.000289
        let trueLongitude = meanLongitude(t) + center
        let apparent = trueLongitude - 0.00569 - 0.00478 * sin(radians(125.04 - 1934.136 * t))
        return asin(sin(radians(obliquity(t))) * sin(radians(apparent))) * 180 / .pi
    }

    /// The equation of time in minutes.
    static func equationOfTime(_ t: Double) -> Double {
        let l0 = radians(meanLongitude(t))
        let e = eccentricity(t)
        let m = radians(meanAnomaly(t))
        let y = pow(tan(radians(obliquity(t)) / 2), 2)
        let value = y * sin(2 * l0) - 2 * e * sin(m) + 4 * e * y * sin(m) * cos(2 * l0)
            - 0.5 * y * y * sin(4 * l0) - 1.25 * e * e * sin(2 * m)
        return value * 180 / .pi * 4
    }

    /// The atmosphere's refraction at a zenith angle, in degrees (Bennett's and NOAA's series).
    static func refraction(atZenith zenith: Double) -> Double {
        let elevation = 90 - zenith
        if elevation >= 85 { return 0 }
        let te = tan(radians(elevation))
        let seconds: Double
        if elevation > 5 {
            seconds = 58.1 / te - 0.07 / pow(te, 3) + 0.000086 / pow(te, 5)
        } else if elevation > -0.575 {
            seconds = 1735 + elevation * (-518.2 + elevation * (103.4 + elevation * (-12.79 + elevation * 0.711)))
        } else {
            seconds = -20.774 / te
        }
        return seconds / 3600
    }
}
