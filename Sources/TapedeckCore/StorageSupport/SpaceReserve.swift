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
}
