public import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `flock` on lock files, the way every store locks: a library lock that a change waits for, and
/// one lock per take being recorded, held by the recording process for as long as it lives (the
/// kernel releases it when the process dies, so a free take lock means an interrupted take).
/// Lock files are created with ``FileModes/file`` and never followed through a symbolic link.
/// - Thread: any. ``acquire(_:until:busy:)`` blocks until the deadline; the rest never block.
public enum LockFile {
    /// Opens (creating) `url` and takes its exclusive lock, waiting until `deadline`.
    /// - Returns: the locked descriptor; close it to release the lock.
    /// - Throws: `busy(url)` when another process holds the lock past the deadline; an I/O error
    ///   when the file cannot be opened.
    /// A library this process may only read (a read-only mount, another user's folder) is locked
    /// through a read-only descriptor: `flock` needs no write access.
    public static func acquire(_ url: URL, until deadline: Date, busy: (URL) -> TapedeckError) throws -> Int32 {
        var fd = open(url.path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, FileModes.file)
        if fd < 0, errno == EACCES || errno == EROFS || errno == EPERM {
            fd = open(url.path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        }
        guard fd >= 0 else { throw TapedeckError.system(errno, while: "open the lock file \(url.path)") }
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            let code = errno
            guard code == EWOULDBLOCK || code == EINTR else {
                close(fd)
                throw TapedeckError.system(code, while: "lock \(url.path)")
            }
            guard Date() < deadline else {
                close(fd)
                throw busy(url)
            }
            usleep(5_000)
        }
        return fd
    }

    /// Creates the lock file of a new take at `url` (which must not exist) and takes its lock.
    /// - Returns: the locked descriptor; keep it open for as long as the take records.
    /// - Throws: an I/O error when the file cannot be created (`.alreadyExists` if it exists).
    public static func create(_ url: URL) throws -> Int32 {
        let fd = open(url.path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, FileModes.file)
        guard fd >= 0 else {
            if errno == EEXIST { throw TapedeckError(.alreadyExists, "The lock file \(url.path) exists already. Try again.") }
            throw TapedeckError.system(errno, while: "create the lock file \(url.path)")
        }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            close(fd)
            throw TapedeckError(.busy, "Could not lock \(url.path). Try again.")
        }
        return fd
    }

    /// Takes the lock at `url` if no live process holds it, creating the file if it is gone.
    /// Only a lock on the file still at that name counts: a file removed (by a recorder that
    /// finished) between the open and the lock is opened again.
    /// - Returns: the locked descriptor, or `nil` when a live process holds the lock (or the file
    ///   cannot be opened).
    public static func claim(_ url: URL) -> Int32? {
        for _ in 0..<3 {
            let fd = open(url.path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, FileModes.file)
            guard fd >= 0 else { return nil }
            guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
                close(fd)
                return nil
            }
            var held = stat(), named = stat()
            if fstat(fd, &held) == 0, lstat(url.path, &named) == 0, held.st_ino == named.st_ino, held.st_dev == named.st_dev {
                return fd
            }
            close(fd)
        }
        return nil
    }

    /// Whether a live process holds the lock at `url`. Never creates the file: no file, no lock.
    public static func isHeld(_ url: URL) -> Bool {
        let fd = open(url.path, O_RDWR | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        return flock(fd, LOCK_EX | LOCK_NB) != 0
    }
}
