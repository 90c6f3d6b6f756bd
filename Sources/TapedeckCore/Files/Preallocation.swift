import CFileSpace
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Allocates a growing take file's disk blocks ahead of its audio, a few seconds at a time.
///
/// Without it, every page a take writer appends makes the file system reserve a block (ext4's
/// delayed allocation), and every checkpoint's `fdatasync` then allocates those blocks one write
/// at a time. With the blocks allocated ahead in one extent, appending only fills them in.
///
/// The blocks lie past the end of the file (`FALLOC_FL_KEEP_SIZE`), so the file's length stays
/// exactly what was written: readers, repair and recovery never see them. ``trim(_:)`` gives the
/// unused ones back when the take is finished; a take whose process died keeps at most
/// ``chunkBytes`` allocated past its end until repair trims it.
///
/// Preallocation is an optimization only. When the file system cannot do it (`EOPNOTSUPP`), or
/// has no room for a whole chunk (`ENOSPC`, `EDQUOT`), the writer stops asking and goes on
/// appending as before, so a disk that fills still fails the write itself, exactly where it would
/// have without preallocation.
///
/// Single owner, like the take writer that holds it. Thread: the writer's. Blocks on disk I/O.
public struct Preallocation {
    /// How far past the written end blocks are allocated: 4 MiB, about 14 s of 48 kHz 24-bit
    /// stereo, so a minute of audio costs four or five `fallocate` calls.
    public static let chunkBytes: Int64 = 4 << 20

    /// End of the allocated range (0: nothing allocated yet).
    private var allocatedEnd: Int64 = 0
    /// Cleared when the file system refuses; then nothing more is asked.
    private var enabled = true

    /// - Thread: any. Does not block.
    public init() {}

    /// Makes sure blocks are allocated up to at least `end` (the file's end after the write about
    /// to happen), allocating ``chunkBytes`` past it when they are not.
    /// - Thread: the owning writer's. Blocks on disk I/O (rarely: once per chunk).
    public mutating func cover(_ fd: Int32, through end: Int64) {
        guard enabled, end > allocatedEnd else { return }
        let target = end + Self.chunkBytes
        if tapedeck_preallocate(fd, allocatedEnd, target - allocatedEnd) == 0 {
            allocatedEnd = target
        } else {
            enabled = false
        }
    }

    /// Gives back the blocks allocated past the file's end (truncating it to its own length).
    /// - Thread: the owning writer's. Does not block noticeably.
    public static func trim(_ fd: Int32) {
        var st = stat()
        guard fstat(fd, &st) == 0 else { return }
        // Allocated blocks (512-byte units) beyond what the length needs: something to give back
        // (or the file system's own bookkeeping blocks, which the truncate leaves as they are).
        guard Int64(st.st_blocks) * 512 > Int64(st.st_size) + Int64(st.st_blksize) else { return }
        _ = ftruncate(fd, st.st_size)
    }
}
