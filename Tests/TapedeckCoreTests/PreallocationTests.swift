import Foundation
import TapedeckCore
import TapedeckTesting
import Testing

@Suite("Preallocation of take files")
struct PreallocationTests {
    private func temporaryFile() throws -> (URL, Int32) {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("prealloc-\(UUID().uuidString)")
        let fd = try PositionalFile.createNew(atPath: url.path)
        return (url, fd)
    }

    private func allocated(_ fd: Int32) -> Int64 {
        var st = stat()
        _ = fstat(fd, &st)
        return Int64(st.st_blocks) * 512
    }

    private func length(_ fd: Int32) -> Int64 {
        var st = stat()
        _ = fstat(fd, &st)
        return Int64(st.st_size)
    }

    @Test("blocks are allocated a chunk ahead of the written end, the length stays what was written, and trim gives them back")
    func allocatesAheadAndTrims() throws {
        let (url, fd) = try temporaryFile()
        defer { close(fd); unlink(url.path) }
        var preallocation = Preallocation()
        let data = [UInt8](repeating: 7, count: 10_000)
        preallocation.cover(fd, through: Int64(data.count))
        #expect(data.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } == data.count)
        #expect(length(fd) == 10_000)
        #expect(allocated(fd) >= Preallocation.chunkBytes, "allocated \(allocated(fd)) bytes")
        // Within the allocated range nothing more is asked; past it, the next chunk is taken.
        preallocation.cover(fd, through: Preallocation.chunkBytes)
        #expect(allocated(fd) < 2 * Preallocation.chunkBytes)
        preallocation.cover(fd, through: Preallocation.chunkBytes + 20_000)
        #expect(allocated(fd) >= 2 * Preallocation.chunkBytes)
        #expect(length(fd) == 10_000)
        #expect(try EncoderConformance.blocksPastEnd(url) >= Preallocation.chunkBytes, "the blocks ahead lie past the end")

        Preallocation.trim(fd)
        #expect(length(fd) == 10_000)
        #expect(try EncoderConformance.blocksPastEnd(url) == 0)
        #expect(try Data(contentsOf: url) == Data(data), "trimming keeps every byte written")
    }

    @Test("a file in many extents has no blocks past its end, though the file system keeps bookkeeping blocks for it")
    func fragmentedFileHasNothingPastItsEnd() throws {
        // Two files appended to in turn, each synced after every write (as takes are at their
        // checkpoints), get their blocks in many separate extents; ext4 then gives each a 4 KiB
        // extent-tree block that st_blocks counts but that lies past nothing.
        let (first, a) = try temporaryFile()
        let (second, b) = try temporaryFile()
        defer { close(a); close(b); unlink(first.path); unlink(second.path) }
        var chunk = [UInt8](repeating: 0, count: 6_000)
        for round in 0..<48 {
            for fd in [a, b] {
                for i in chunk.indices { chunk[i] = UInt8(truncatingIfNeeded: i &* 31 &+ round) }
                #expect(chunk.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } == chunk.count)
                #expect(fdatasync(fd) == 0)
            }
        }
        #expect(try EncoderConformance.blocksPastEnd(first) == 0)
        #expect(try EncoderConformance.blocksPastEnd(second) == 0)
    }

    @Test("a descriptor that cannot be preallocated is written as before, and not asked again")
    func refusalIsQuiet() throws {
        let (url, fd) = try temporaryFile()
        defer { close(fd); unlink(url.path) }
        let readOnly = open(url.path, O_RDONLY)
        defer { close(readOnly) }
        var preallocation = Preallocation()
        preallocation.cover(readOnly, through: 100)  // EBADF: refused
        preallocation.cover(fd, through: 100)        // not asked any more, even on a writable one
        #expect(allocated(fd) == 0)
    }
}
