#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The clock that paces the null backend, injectable so tests can run with virtual time.
public protocol PacingClock: Sendable {
    /// Monotonic nanoseconds.
    /// - Thread: any. Never blocks.
    func nowNanoseconds() -> UInt64
    /// Blocks the calling thread until `deadline` (monotonic nanoseconds).
    /// - Thread: the device thread. Blocks.
    func sleep(untilNanoseconds deadline: UInt64)
    /// Whether it keeps real time (a device paced by it must not be kept waiting), or is a
    /// virtual clock whose sleeps return at once: then a full hand-off buffer is waited for,
    /// never dropped. `true` unless a clock says otherwise.
    /// - Thread: any. Never blocks.
    var isRealTime: Bool { get }
}

extension PacingClock {
    public var isRealTime: Bool { true }
}

/// Real time: `CLOCK_MONOTONIC` with absolute-deadline sleeps, so pacing does not drift.
public struct MonotonicPacingClock: PacingClock {
    public init() {}

    public func nowNanoseconds() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    public func sleep(untilNanoseconds deadline: UInt64) {
        var ts = timespec(tv_sec: Int(deadline / 1_000_000_000), tv_nsec: Int(deadline % 1_000_000_000))
        while clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nil) == EINTR {}
    }
}
