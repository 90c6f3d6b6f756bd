#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Free space on the disk that holds a path, and how a recording watches it.
public struct FreeSpace: Sendable, Hashable {
    /// A folder on the disk to watch (the take's folder).
    public var path: String
    /// Below this many free bytes a recording warns (once while it runs).
    public var warnBelowBytes: Int64

    public init(path: String, warnBelowBytes: Int64) {
        self.path = path
        self.warnBelowBytes = warnBelowBytes
    }

    /// The bytes an unprivileged process may still write on the disk holding `path`
    /// (`statvfs`: available blocks × fragment size), or `nil` if it cannot be asked.
    /// - Thread: any. A system call; does not block for long.
    public static func available(at path: String) -> Int64? {
        var info = statvfs()
        guard statvfs(path, &info) == 0 else { return nil }
        return Int64(info.f_bavail) * Int64(info.f_frsize)
    }

    /// The warning for `free` bytes left when `format` is recorded uncompressed.
    public static func lowSpaceMessage(free: Int64, format: AudioFormat, path: String) -> String {
        let minutes = Double(free) / Double(max(1, format.bytesPerSecond)) / 60
        let megabytes = Double(free) / 1_000_000
        let left = minutes >= 1 ? "about \(Int(minutes)) minute\(Int(minutes) == 1 ? "" : "s")" : "less than a minute"
        return "The disk holding \(path) has room for \(left) of \(format) audio (\(Int(megabytes)) MB free). "
            + "A recording that fills it stops and keeps what was written; free some space to record longer."
    }
}
