public import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The file-system steps that make a change survive power loss, with errors that say what failed.
public enum Durability {
    /// `fsync`s a directory so that entries created, renamed or removed in it are durable.
    /// - Thread: any. Blocks on disk I/O.
    public static func syncDirectory(_ url: URL) throws {
        let fd = open(url.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw TapedeckError.system(errno, while: "open the folder \(url.path) to sync it") }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw TapedeckError.system(errno, while: "sync the folder \(url.path)") }
    }

    /// `fsync`s a file by path.
    /// - Thread: any. Blocks on disk I/O.
    public static func syncFile(_ url: URL) throws {
        let fd = open(url.path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw TapedeckError.system(errno, while: "open \(url.path) to sync it") }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw TapedeckError.system(errno, while: "sync \(url.path)") }
    }

    /// Moves `source` to `destination` on the same file system without ever replacing an existing
    /// file (a hard link, which fails if the destination exists, then removal of the old name),
    /// and syncs the destination's folder. A move interrupted between the link and the removal
    /// (both names on one file) is completed.
    /// - Thread: any. Blocks on disk I/O.
    public static func moveIntoPlace(_ source: URL, _ destination: URL) throws {
        try DurableFiles().moveIntoPlace(source, destination)
    }

    /// Creates a directory (and missing parents) with mode ``FileModes/directory`` (0775) less the
    /// umask; syncs its parent.
    /// - Thread: any. Blocks on disk I/O.
    public static func makeDirectory(_ url: URL) throws {
        try DurableFiles().makeDirectory(url)
    }
}
