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

        Preallocation.trim(fd)
        #expect(length(fd) == 10_000)
        #expect(try EncoderConformance.blocksPastEnd(url) == 0)
        #expect(try Data(contentsOf: url) == Data(data), "trimming keeps every byte written")
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
