#if ALSA
#if canImport(Glibc)
import Glibc
#endif

/// `CLOCK_MONOTONIC` in nanoseconds, for xrun estimates and stall detection. It does not advance
/// while the machine is suspended, so a suspend is not counted as lost audio.
enum ALSAClock {
    /// - Thread: any. Never blocks or allocates.
    static func nanoseconds() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
    }

    /// Frames that `nanoseconds` of audio at `rate` hold, rounded, never negative.
    static func frames(_ nanoseconds: Int64, rate: Int) -> Int64 {
        max(0, (nanoseconds * Int64(rate) + 500_000_000) / 1_000_000_000)
    }
}
#endif
