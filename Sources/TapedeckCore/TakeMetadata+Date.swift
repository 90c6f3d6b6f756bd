import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension TakeMetadata {
    /// ``startDate`` as the DATE tag of a file carries it: ISO 8601 in UTC, to the second
    /// (`2023-11-14T22:13:20Z`), the same text as `Date.ISO8601Format()`.
    ///
    /// Made with the C library's `gmtime_r`, not Foundation's calendar: a writer is created when
    /// a recording starts, and loading a calendar there costs milliseconds of start-up.
    /// - Thread: any. Never blocks.
    public var startDateISO8601: String {
        var seconds = time_t(startDate.timeIntervalSince1970.rounded(.down))
        var parts = tm()
        guard gmtime_r(&seconds, &parts) != nil else { return startDate.ISO8601Format() }
        func pad(_ value: Int32, _ width: Int) -> String {
            let digits = String(value)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        return "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))"
            + "T\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2))Z"
    }
}
