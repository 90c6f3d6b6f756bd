import TapedeckCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Positional reads and writes on an open file descriptor, retrying on `EINTR` and reporting
/// `errno` as ``TapedeckError``. Reads are always of a small size chosen by the caller, never of a
/// size taken from the file, so a damaged header cannot make Tapedeck allocate or read wildly.
///
/// Does not own the descriptor: whoever opened it closes it. Blocks on disk I/O.
struct RawFile {
    /// The descriptor, opened for reading (and writing, for the mutating calls).
    let fd: Int32
    /// The path, for messages.
    let path: String

    /// The file's current length in bytes.
    func length() throws -> Int64 {
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw TapedeckError.system(errno, while: "inspect \(path)") }
        return Int64(st.st_size)
    }

    /// Reads exactly `count` bytes at `offset`.
    /// - Throws: `.corruptFile` if the file ends first; an I/O error if reading fails.
    func read(_ count: Int, at offset: Int64) throws -> [UInt8] {
        precondition(count >= 0 && count <= 4096, "RawFile reads are small and chosen by the caller")
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
                if n == 0 {
                    throw TapedeckError(.corruptFile,
                        "\(path) ends in the middle of its WAV header. The file is damaged; it cannot be read or repaired.")
                }
                done += n
            }
        }
        return bytes
    }

    /// Writes all of `bytes` at `offset`.
    func write(_ bytes: [UInt8], at offset: Int64) throws {
        var done = 0
        try bytes.withUnsafeBytes { raw in
            guard let base = raw.baseAddress else { return }
            while done < bytes.count {
                let n = pwrite(fd, base + done, bytes.count - done, off_t(offset) + off_t(done))
                if n < 0 {
                    if errno == EINTR { continue }
                    throw TapedeckError.system(errno, while: "write the header of \(path)")
                }
                done += n
            }
        }
    }

    /// Writes `value` as 4 little-endian bytes at `offset` unless they are there already.
    /// - Returns: whether the file changed.
    @discardableResult
    func patch32(_ value: UInt32, at offset: Int64) throws -> Bool {
        let new = LE.bytes32(value)
        if try read(4, at: offset) == new { return false }
        try write(new, at: offset)
        return true
    }

    /// Writes `value` as 8 little-endian bytes at `offset` unless they are there already.
    /// - Returns: whether the file changed.
    @discardableResult
    func patch64(_ value: UInt64, at offset: Int64) throws -> Bool {
        let new = LE.bytes64(value)
        if try read(8, at: offset) == new { return false }
        try write(new, at: offset)
        return true
    }

    /// Cuts (or zero-extends) the file to `length` bytes.
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

/// Little-endian field access on byte arrays, bounds-checked by the caller's fixed read sizes.
enum LE {
    static func u16(_ b: [UInt8], _ i: Int) -> UInt16 {
        UInt16(b[i]) | UInt16(b[i + 1]) << 8
    }

    static func u32(_ b: [UInt8], _ i: Int) -> UInt32 {
        UInt32(b[i]) | UInt32(b[i + 1]) << 8 | UInt32(b[i + 2]) << 16 | UInt32(b[i + 3]) << 24
    }

    static func u64(_ b: [UInt8], _ i: Int) -> UInt64 {
        UInt64(u32(b, i)) | UInt64(u32(b, i + 4)) << 32
    }

    static func bytes16(_ v: UInt16) -> [UInt8] {
        [UInt8(truncatingIfNeeded: v), UInt8(truncatingIfNeeded: v >> 8)]
    }

    static func bytes32(_ v: UInt32) -> [UInt8] {
        (0..<4).map { UInt8(truncatingIfNeeded: v >> (8 * UInt32($0))) }
    }

    static func bytes64(_ v: UInt64) -> [UInt8] {
        (0..<8).map { UInt8(truncatingIfNeeded: v >> (8 * UInt64($0))) }
    }

    /// Whether `b[i..<i+4]` spells `id`.
    static func isID(_ b: [UInt8], _ i: Int, _ id: String) -> Bool {
        b.count >= i + 4 && b[i..<(i + 4)].elementsEqual(id.utf8)
    }
}
