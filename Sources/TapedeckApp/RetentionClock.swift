public import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The time retention counts ages to, and whether to trust it. The wall clock can step (NTP
/// correcting a clock, a machine without a battery-backed clock booting at an old time); a step
/// forward would make every take look older and be deleted early. Each run compares the wall
/// clock with the one before it on the monotonic clock since boot (which never steps): a step of
/// more than two minutes is reported and not believed for a day (ages are counted as if it had
/// not happened); a clock that stayed where it stepped to for a day is believed. A step back only
/// makes takes look younger: reported, never harmful. A take dated in the future says the clock
/// is behind. A plain value; any thread.
public struct RetentionClock: Sendable, Hashable, Codable {
    /// One look at the clocks.
    public struct Reading: Sendable, Hashable, Codable {
        public var wall: Date
        /// Seconds since boot on CLOCK_BOOTTIME (counts suspend, never steps).
        public var boot: Double
        /// The kernel's id of this boot: the monotonic clock starts again with another.
        public var bootID: String

        public init(wall: Date, boot: Double, bootID: String) {
            self.wall = wall
            self.boot = boot
            self.bootID = bootID
        }

        /// The clocks now. - Thread: any. Blocks briefly reading /proc.
        public static func now() -> Reading {
            var ts = timespec()
            clock_gettime(CLOCK_BOOTTIME, &ts)
            let id = (try? String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8))?
                .trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
            return Reading(wall: Date(), boot: Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9, bootID: id)
        }
    }

    /// The last reading, and a step not yet believed: how far, and when (on the boot clock).
    public var last: Reading?
    public var step: Double?
    public var stepAtBoot: Double?

    public init(last: Reading? = nil) { self.last = last }

    /// A step is believed once the clock has stayed there this long.
    public static let believeAfter = 86_400.0
    /// Differences smaller than this are drift, not a step.
    public static let tolerance = 120.0

    /// The time to count ages to, whether ages may be trusted, and what went wrong with the clock;
    /// remembers `reading` (and a step) for the next run.
    public mutating func trustedNow(_ reading: Reading, newestTake: Date?) -> (now: Date, trusted: Bool, problem: String?) {
        defer { last = reading }
        var problem: String?
        if let last, last.bootID == reading.bootID, !reading.bootID.isEmpty {
            let expected = last.wall.addingTimeInterval(reading.boot - last.boot)
            let drift = reading.wall.timeIntervalSince(expected)
            if abs(drift) > Self.tolerance {
                step = (step ?? 0) + drift
                stepAtBoot = reading.boot
            }
        } else if last?.bootID != reading.bootID {
            // Another boot: what was measured on the old one's clock means nothing now.
            (step, stepAtBoot) = (nil, nil)
        }
        if let s = step, let at = stepAtBoot {
            if reading.boot - at >= Self.believeAfter || abs(s) <= Self.tolerance {
                (step, stepAtBoot) = (nil, nil)
            } else {
                problem = "The clock stepped \(s > 0 ? "forward" : "back") by \(Self.duration(abs(s))) \(Self.duration(reading.boot - at)) ago; ages are counted as if it had not, until it has stayed there for a day."
            }
        }
        var now = reading.wall
        if let s = step, s > 0 { now = now.addingTimeInterval(-s) }
        if let newest = newestTake, newest.timeIntervalSince(reading.wall) > Self.tolerance {
            let behind = newest.timeIntervalSince(reading.wall)
            problem = [problem, "A take is dated \(Self.duration(behind)) after the clock's time: the clock is behind. No take goes for its age until it is right."].compactMap { $0 }.joined(separator: " ")
            return (now, false, problem)
        }
        return (now, true, problem)
    }

    /// `3 h 20 min`, `2 d 4 h`, `45 s`: a length as messages give it. - Thread: any.
    public static func duration(_ seconds: Double) -> String {
        let s = Int(seconds.rounded())
        if s >= 86_400 { return "\(s / 86_400) d \(s % 86_400 / 3600) h" }
        if s >= 3600 { return "\(s / 3600) h \(s % 3600 / 60) min" }
        if s >= 60 { return "\(s / 60) min" }
        return "\(s) s"
    }
}
