import TapedeckCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Positional reads and writes on an open descriptor, retrying on `EINTR`, reporting `errno` as
/// ``TapedeckError``. Does not own the descriptor. Every read size is chosen by the caller after a
/// bounds check against the real file length, never taken from a header unchecked.
/// Thread: whichever thread owns the descriptor. Blocks on disk I/O.
struct FLACFile {
    let fd: Int32
    /// The path, for messages.
    let path: String

    /// The file's current length in bytes.
    func length() throws -> Int64 {
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw TapedeckError.system(errno, while: "inspect \(path)") }
        return Int64(st.st_size)
    }

    /// Reads exactly `count` bytes at `offset` (at most 4 MiB; callers check bounds first).
    /// - Throws: `.corruptFile` if the file ends first.
    func read(_ count: Int, at offset: Int64) throws -> [UInt8] {
        precondition(count >= 0 && count <= 4 << 20, "FLACFile reads are bounded by the caller")
        var bytes = [UInt8](repeating: 0, count: count)
        var done = 0
        try bytes.withUnsafeMutableBytes { raw in
            guard let base = raw.baseAddress else { return }
            while done < count {
                let n = pread(fd, base + done, count - done, off_t(offset) + off_t(done))
                if n < 0 {
                    if errno == EINTR { continue }
                    throw TapedeckError.system(errno, while: "read \(path)")
                }
                if n == 0 { throw TapedeckError(.corruptFile, "\(path) ends unexpectedly; the FLAC file is damaged.") }
                done += n
            }
        }
        return bytes
    }

    /// Writes all of `count` bytes from `bytes` at `offset`.
    func write(_ bytes: UnsafeRawPointer, count: Int, at offset: Int64) throws {
        var done = 0
        while done < count {
            let n = pwrite(fd, bytes + done, count - done, off_t(offset) + off_t(done))
            if n < 0 {
                if errno == EINTR { continue }
                throw TapedeckError.system(errno, while: "write to \(path)")
            }
            done += n
        }
    }

    /// Writes all of `bytes` at `offset`.
    func write(_ bytes: [UInt8], at offset: Int64) throws {
        try bytes.withUnsafeBytes { raw in
            guard let base = raw.baseAddress else { return }
            try write(base, count: raw.count, at: offset)
        }
    }

    /// Cuts the file to `length` bytes.
    func truncate(to length: Int64) throws {
        while ftruncate(fd, off_t(length)) != 0 {
            if errno == EINTR { continue }
            throw TapedeckError.system(errno, while: "truncate \(path)")
        }
    }

    /// Flushes data and metadata to the disk.
    func sync() throws {
        guard fsync(fd) == 0 else { throw TapedeckError.system(errno, while: "flush \(path) to disk") }
    }
}

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
