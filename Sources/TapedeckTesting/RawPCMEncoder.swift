public import TapedeckCore
public import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A real, trivial encoder and decoder: headerless little-endian PCM in a `.raw` file. The file
/// has no header, so the format is fixed when the encoder is made and assumed when reading.
///
/// Used by tests that need a working encoder without a codec library, and as the shape a new
/// encoder starts from.
public struct RawPCMEncoder: AudioEncoder, AudioDecoder {
    public let name = "raw"
    public let fileExtension = "raw"
    public var encodings: Set<String> { ["raw"] }
    /// The format every raw file is read back as.
    public var format: AudioFormat

    public init(format: AudioFormat) { self.format = format }

    public func validate(_ format: AudioFormat) throws { try format.validate() }

    public func makeWriter(at url: URL, format: AudioFormat, metadata: TakeMetadata) throws -> any TakeWriter {
        let fd = try PositionalFile.createNew(atPath: url.path)
        return Writer(fd: fd, bytesPerFrame: format.bytesPerFrame, path: url.path)
    }

    public func repair(fileAt url: URL) throws -> RepairResult {
        let size = (try FileManager.default.attributesOfItem(atPath: url.path)[.size] as? Int64) ?? 0
        let whole = size / Int64(format.bytesPerFrame)
        if whole * Int64(format.bytesPerFrame) != size { truncate(url.path, off_t(whole * Int64(format.bytesPerFrame))) }
        return RepairResult(frames: whole, format: format, headerRepaired: false)
    }

    public func openReader(at url: URL) throws -> any TakeReader {
        guard let handle = FileHandle(forReadingAtPath: url.path) else {
            throw TapedeckError(.notFound, "Cannot open \(url.path).")
        }
        let size = (try FileManager.default.attributesOfItem(atPath: url.path)[.size] as? Int64) ?? 0
        return Reader(handle: handle, format: format, frameCount: size / Int64(format.bytesPerFrame))
    }

    final class Writer: TakeWriter {
        let fd: Int32
        let bytesPerFrame: Int
        let path: String
        var frames: Int64 = 0
        var closed = false
        /// A write failed part way: the file may hold bytes ``frames`` does not count.
        var writeFailed = false
        init(fd: Int32, bytesPerFrame: Int, path: String) {
            self.fd = fd
            self.bytesPerFrame = bytesPerFrame
            self.path = path
        }
        func write(_ buffer: UnsafeRawPointer, frames n: Int) throws {
            var offset = 0
            let total = n * bytesPerFrame
            while offset < total {
                let w = Glibc.write(fd, buffer + offset, total - offset)
                if w < 0 {
                    if errno == EINTR { continue }
                    writeFailed = true
                    throw TapedeckError.system(errno, while: "write to \(path)")
                }
                offset += w
            }
            frames += Int64(n)
        }
        func checkpoint() throws {
            guard fdatasync(fd) == 0 else { throw TapedeckError.system(errno, while: "sync \(path)") }
        }
        func finish() throws -> Int64 {
            defer { abandon() }
            // After a failed write the file's length, not `frames`, says what it holds: leave it
            // to repair (the TakeWriter contract).
            if writeFailed { throw TapedeckError(.io, "\(path) was cut short by a failed write; it is repaired from its length.") }
            guard fsync(fd) == 0 else { throw TapedeckError.system(errno, while: "sync \(path)") }
            return frames
        }
        func abandon() {
            if !closed { close(fd); closed = true }
        }
    }

    final class Reader: TakeReader {
        let handle: FileHandle
        let format: AudioFormat
        let frameCount: Int64
        init(handle: FileHandle, format: AudioFormat, frameCount: Int64) {
            self.handle = handle
            self.format = format
            self.frameCount = frameCount
        }
        func read(into buffer: UnsafeMutableRawPointer, maxFrames: Int) throws -> Int {
            let data = handle.readData(ofLength: maxFrames * format.bytesPerFrame)
            data.copyBytes(to: buffer.assumingMemoryBound(to: UInt8.self), count: data.count)
            return data.count / format.bytesPerFrame
        }
        func close() { try? handle.close() }
    }
}
