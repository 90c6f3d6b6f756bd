import TapedeckCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// FLAC's positional file: the shared ``PositionalFile``.
typealias FLACFile = PositionalFile

/// Write-once helper: retrying `pwrite` of a whole buffer, returning `errno` (0 on success).
/// Used from libFLAC's write callback, which cannot throw.
func writeFully(_ fd: Int32, _ bytes: UnsafeRawPointer, _ count: Int, at offset: Int64) -> Int32 {
    var done = 0
    while done < count {
        let n = pwrite(fd, bytes + done, count - done, off_t(offset) + off_t(done))
        if n < 0 {
            if errno == EINTR { continue }
            return errno
        }
        if n == 0 { return EIO }
        done += n
    }
    return 0
}
