#if canImport(Glibc)
import Glibc
#endif

/// Writes to a stream that cannot seek (a pipe), for the encoders' stream writers.
/// - Thread: the owning writer thread; blocks while the reader is slow.
public enum StreamOutput {
    /// Writes all of `bytes` to `fd`, retrying after signals.
    /// - Throws: `.io` saying the reader went away (`EPIPE`), or the system's reason.
    public static func write(_ fd: Int32, _ bytes: UnsafeRawPointer, _ count: Int) throws {
        var done = 0
        while done < count {
            let n = Glibc.write(fd, bytes + done, count - done)
            if n < 0 {
                if errno == EINTR { continue }
                if errno == EPIPE { throw TapedeckError(.io, "The program reading the audio stream went away.", systemCode: EPIPE) }
                throw TapedeckError.system(errno, while: "write the audio stream")
            }
            done += n
        }
    }
}
