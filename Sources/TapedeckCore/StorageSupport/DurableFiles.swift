public import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The durable file-system steps of a store, each announced to a ``StorageSeam`` first, with
/// errors that say what failed.
///
/// Every mutation a store makes to its library goes through here, so an injected failure or a
/// simulated crash covers all of them; code outside a store (a recorder syncing its folder, an
/// export moving its file into place) uses `DurableFiles()` with no seam.
/// - Thread: any; every method blocks on disk I/O.
public struct DurableFiles: Sendable {
    public let seam: any StorageSeam

    public init(seam: any StorageSeam = .none) {
        self.seam = seam
    }

    /// Reports a completed step of `operation`.
    public func reached(_ operation: String, _ label: String) throws {
        try seam.reached(StorageStep(operation, label))
    }

    /// `fsync`s a folder so entries created, renamed or removed in it are durable.
    public func syncDirectory(_ url: URL) throws {
        try seam.willPerform(.sync, on: url)
        let fd = open(url.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw TapedeckError.system(errno, while: "open the folder \(url.path) to sync it") }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw TapedeckError.system(errno, while: "sync the folder \(url.path)") }
    }

    /// `fsync`s a file by path.
    public func syncFile(_ url: URL) throws {
        try seam.willPerform(.sync, on: url)
        let fd = open(url.path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw TapedeckError.system(errno, while: "open \(url.path) to sync it") }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw TapedeckError.system(errno, while: "sync \(url.path)") }
    }

    /// Moves `source` to `destination` on the same file system without ever replacing an
    /// existing file (a hard link, which fails if the destination exists, then removal of the old
    /// name), and syncs the destination's folder. A move interrupted between the link and the
    /// removal (both names on one file) is completed.
    public func moveIntoPlace(_ source: URL, _ destination: URL) throws {
        try seam.willPerform(.rename, on: destination)
        if link(source.path, destination.path) != 0 {
            let code = errno
            // File systems without hard links (FAT and exFAT on a USB stick, some network file
            // systems): rename, after checking that nothing has the destination's name.
            if code == EPERM || code == EOPNOTSUPP || code == ENOSYS || code == EMLINK {
                var st = stat()
                guard lstat(destination.path, &st) != 0, errno == ENOENT else {
                    throw TapedeckError(.alreadyExists, "Could not move \(source.lastPathComponent) into place: \(destination.path) exists already.")
                }
                guard rename(source.path, destination.path) == 0 else {
                    throw TapedeckError.system(errno, while: "move \(source.path) to \(destination.path)")
                }
                try syncDirectory(destination.deletingLastPathComponent())
                return
            }
            // An earlier move that linked but did not get to remove the old name (a crash, or a
            // failed unlink) left both names on one file: finish that move.
            guard code == EEXIST, Self.sameFile(source, destination) else {
                if code == EEXIST {
                    throw TapedeckError(.alreadyExists, "Could not move \(source.lastPathComponent) into place: \(destination.path) exists already.")
                }
                throw TapedeckError.system(code, while: "move \(source.path) to \(destination.path)")
            }
        }
        try seam.willPerform(.unlink, on: source)
        guard unlink(source.path) == 0 else {
            throw TapedeckError.system(errno, while: "remove the old name \(source.path)")
        }
        try syncDirectory(destination.deletingLastPathComponent())
    }

    /// Whether two paths name the same file (same device and inode; links not followed).
    static func sameFile(_ a: URL, _ b: URL) -> Bool {
        var sa = stat(), sb = stat()
        guard lstat(a.path, &sa) == 0, lstat(b.path, &sb) == 0 else { return false }
        return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino
    }

    /// Atomically replaces `destination` with `source` (`rename`), for files whose old version
    /// may go (manifests). Does not sync the folder.
    public func replace(_ destination: URL, with source: URL) throws {
        try seam.willPerform(.rename, on: destination)
        guard rename(source.path, destination.path) == 0 else {
            throw TapedeckError.system(errno, while: "replace \(destination.path)")
        }
    }

    /// Removes a file; a file already gone is not an error.
    public func remove(_ url: URL) throws {
        try seam.willPerform(.unlink, on: url)
        if unlink(url.path) != 0 && errno != ENOENT {
            throw TapedeckError.system(errno, while: "remove \(url.path)")
        }
    }

    /// Removes an empty folder; a folder that is gone or not empty is left as it is.
    public func removeEmptyDirectory(_ url: URL) throws {
        try seam.willPerform(.unlink, on: url)
        _ = rmdir(url.path)
    }

    /// Creates a folder (and missing parents) with mode ``FileModes/directory`` (0775) less the
    /// umask, syncing each parent.
    public func makeDirectory(_ url: URL) throws {
        var isDir: ObjCBool = false
        if FileManager.default.fileExists(atPath: url.path, isDirectory: &isDir) {
            guard isDir.boolValue else {
                throw TapedeckError(.io, "\(url.path) exists but is not a folder. Move it away or choose another library path.")
            }
            return
        }
        let parent = url.deletingLastPathComponent()
        if parent.path != url.path { try makeDirectory(parent) }
        try seam.willPerform(.mkdir, on: url)
        guard mkdir(url.path, mode_t(FileModes.directory)) == 0 || errno == EEXIST else {
            throw TapedeckError.system(errno, while: "create the folder \(url.path)")
        }
        try syncDirectory(parent)
    }

    /// Writes `data` to a new file `url` (which must not exist; never follows a link), syncs it,
    /// and returns. Permissions are `mode` (``FileModes/file``, 0664, unless said) less the umask.
    public func writeNewFile(_ data: Data, to url: URL, mode: UInt32 = FileModes.file) throws {
        try seam.willPerform(.write, on: url)
        let fd = open(url.path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode)
        guard fd >= 0 else { throw TapedeckError.system(errno, while: "create \(url.path)") }
        defer { close(fd) }
        var offset = 0
        try data.withUnsafeBytes { (raw: UnsafeRawBufferPointer) in
            while offset < raw.count {
                let n = write(fd, raw.baseAddress! + offset, raw.count - offset)
                if n < 0 {
                    if errno == EINTR { continue }
                    throw TapedeckError.system(errno, while: "write \(url.path)")
                }
                offset += n
            }
        }
        try seam.willPerform(.sync, on: url)
        guard fsync(fd) == 0 else { throw TapedeckError.system(errno, while: "sync \(url.path)") }
    }
}
