#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Positional reads and writes on an open file descriptor, retrying on `EINTR` and reporting
/// `errno` as ``TapedeckError``. Reads are of sizes the caller chose after checking them against
/// the real file length, never of a size taken from a header, so a damaged file cannot make
/// Tapedeck allocate or read wildly.
///
/// Used by the codecs to parse and repair headers. Does not own the descriptor: whoever opened it
/// closes it. Thread: whichever thread owns the descriptor; every method blocks on disk I/O.
public struct PositionalFile: Sendable {
    /// The largest single read accepted.
    public static let maxRead = 4 << 20

    /// The descriptor, opened for reading (and writing, for the writing calls).
    public let fd: Int32
    /// The path, for messages.
    public let path: String
    /// What the file holds, for messages: "WAV", "FLAC".
    public let kind: String

    public init(fd: Int32, path: String, kind: String) {
        self.fd = fd
        self.path = path
        self.kind = kind
    }

    /// Creates `path` for reading and writing with mode ``FileModes/file`` (0664) less the umask, never replacing an
    /// existing file and never following a symbolic link.
    /// - Returns: the new descriptor; the caller owns and closes it.
    /// - Throws: `.alreadyExists` if anything is at `path`; an I/O error (`.diskFull` for ENOSPC) otherwise.
    /// - Thread: any. Blocks on disk I/O.
    public static func createNew(atPath path: String) throws -> Int32 {
        let fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, FileModes.file)
        guard fd >= 0 else {
            let code = errno
            if code == EEXIST {
                throw TapedeckError(.alreadyExists,
                    "\(path) exists already. Tapedeck never overwrites a file; choose another name or remove it.",
                    systemCode: code)
            }
            throw TapedeckError.system(code, while: "create \(path)")
        }
        return fd
    }

    /// The file's current length in bytes.
    public func length() throws -> Int64 {
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw TapedeckError.system(errno, while: "inspect \(path)") }
        return Int64(st.st_size)
    }

    /// Reads exactly `count` bytes at `offset` (at most ``maxRead``). A longer read is refused, not
    /// made: a size a file's contents led to can never trap or allocate wildly; what is longer is
    /// read in pieces by the caller.
    /// - Throws: `.unsupportedFormat` for a count over ``maxRead`` (or below 0), before reading
    ///   anything; `.corruptFile` if the file ends first; an I/O error if reading fails.
    public func read(_ count: Int, at offset: Int64) throws -> [UInt8] {
        guard count >= 0, count <= Self.maxRead, offset >= 0 else {
            throw TapedeckError(.unsupportedFormat,
                "\(path) has a block of \(kind) data of \(count) bytes at byte \(offset), more than the \(Self.maxRead >> 20) MiB Tapedeck reads at once, so it was not read. Re-save the file with the program that made it (or without its metadata) to use it here.")
        }
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
                    throw TapedeckError(.corruptFile, "\(path) ends in the middle of its \(kind) data: the file is damaged.")
                }
                done += n
            }
        }
        return bytes
    }

    /// Writes all of `count` bytes from `bytes` at `offset`.
    public func write(_ bytes: UnsafeRawPointer, count: Int, at offset: Int64) throws {
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
    public func write(_ bytes: [UInt8], at offset: Int64) throws {
        try bytes.withUnsafeBytes { raw in
            guard let base = raw.baseAddress else { return }
            try write(base, count: raw.count, at: offset)
        }
    }

    /// Cuts (or zero-extends) the file to `length` bytes.
    public func truncate(to length: Int64) throws {
        while ftruncate(fd, off_t(length)) != 0 {
            if errno == EINTR { continue }
            throw TapedeckError.system(errno, while: "truncate \(path)")
        }
    }

    /// Flushes data and metadata to the disk.
    public func sync() throws {
        guard fsync(fd) == 0 else { throw TapedeckError.system(errno, while: "flush \(path) to disk") }
    }
}
