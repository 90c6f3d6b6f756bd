#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Disk space held back while a take records, so that finishing it still works when the audio
/// fills the disk.
///
/// A recording that runs the disk full must still rewrite its header, move its file into place
/// and commit its catalog row or manifest — and SQLite's journal and a manifest's temporary copy
/// need free blocks for that. A store therefore allocates ``bytes`` inside the take's lock file
/// when the take begins (`posix_fallocate`, so the blocks are really taken) and gives them back
/// (truncating the lock file) first thing when the take is finished. Lock files are removed when a
/// take is finished or recovered, so the reserve never outlives its take.
public enum SpaceReserve {
    /// What a take holds back: enough for a catalog commit or a manifest rewrite.
    public static let bytes: Int64 = 2 << 20

    /// Allocates ``bytes`` in the open lock file `fd`.
    /// - Throws: `.diskFull` when the file system has less than that free (nothing can be
    ///   recorded then); file systems that cannot preallocate are recorded on without a reserve.
    /// - Thread: any. Blocks on disk I/O.
    public static func claim(_ fd: Int32, path: String) throws {
        let result = posix_fallocate(fd, 0, off_t(bytes))
        switch result {
        case 0, EOPNOTSUPP, EINVAL, ENOSYS:
            return
        case ENOSPC, EDQUOT:
            throw TapedeckError(.diskFull,
                "The disk holding \(path) has less than \(bytes >> 20) MiB free, too little to record a take and keep it. "
                + "Free some space and try again.",
                systemCode: result)
        default:
            throw TapedeckError.system(result, while: "reserve space for the take in \(path)")
        }
    }

    /// Gives the reserve back (the lock file stays, empty, and still locked).
    /// - Thread: any. Never blocks for long.
    public static func release(_ fd: Int32) {
        _ = ftruncate(fd, 0)
    }

    /// What a library keeps in its lock file for its catalog or manifests: when another program
    /// has filled the disk, a commit that fails for want of space gives it back and tries once
    /// more, so a delete that makes room still goes through.
    public static let libraryBytes = 1 << 20

    /// Takes the library's reserve in its open lock file `fd`, where there is room (a full disk
    /// leaves it as it is). - Thread: any. Blocks on disk I/O.
    public static func keepLibraryReserve(_ fd: Int32) {
        _ = posix_fallocate(fd, 0, off_t(libraryBytes))
    }

    /// Gives the library's reserve in `lockFile` back, only when the disk under `root` really
    /// is full (less free than the reserve); whether it did. - Thread: any. Never blocks for long.
    public static func releaseLibraryReserve(lockFile: String, root: String) -> Bool {
        var fs = statvfs()
        guard statvfs(root, &fs) == 0, Int64(fs.f_bavail) * Int64(fs.f_frsize) < Int64(libraryBytes) else { return false }
        let fd = open(lockFile, O_RDWR | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_size > 0 else { return false }
        return ftruncate(fd, 0) == 0
    }
}
