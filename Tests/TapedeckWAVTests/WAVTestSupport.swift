import Foundation
import TapedeckCore
import TapedeckNull
@testable import TapedeckWAV

/// Helpers shared by the WAV tests.
enum WAVTestSupport {
    static let metadata = TakeMetadata(takeName: "Take 1", sessionName: "Tests", takeNumber: 1,
                                       startDate: Date(timeIntervalSince1970: 1_700_000_000), notes: "from the WAV tests")

    /// A fresh empty directory; remove it with `cleanUp`.
    static func makeTempDirectory() throws -> URL {
        let url = FileManager.default.temporaryDirectory
            .appendingPathComponent("tapedeck-wav-tests-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    static func cleanUp(_ url: URL) {
        try? FileManager.default.removeItem(at: url)
    }

    /// `frames` frames of `signal` starting at frame 0, packed as `format` says.
    static func render(_ signal: NullSignal, format: AudioFormat, frames: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: frames * format.bytesPerFrame)
        bytes.withUnsafeMutableBytes { raw in
            if let base = raw.baseAddress {
                signal.render(into: base, startFrame: 0, frames: frames, format: format)
            }
        }
        return bytes
    }

    /// Writes `bytes` (whole frames) to `writer` in pieces of at most `chunkFrames` frames.
    static func write(_ bytes: [UInt8], to writer: any TakeWriter, format: AudioFormat, chunkFrames: Int = 1000) throws {
        let total = bytes.count / format.bytesPerFrame
        var frame = 0
        try bytes.withUnsafeBytes { raw in
            guard let base = raw.baseAddress else { return }
            while frame < total {
                let n = min(chunkFrames, total - frame)
                try writer.write(base + frame * format.bytesPerFrame, frames: n)
                frame += n
            }
        }
    }

    /// Writes a whole take and finishes it; returns the frames `finish()` reported.
    @discardableResult
    static func writeTake(_ bytes: [UInt8], at url: URL, format: AudioFormat) throws -> Int64 {
        let writer = try WAVEncoder().makeWriter(at: url, format: format, metadata: metadata)
        try write(bytes, to: writer, format: format)
        return try writer.finish()
    }

    /// Reads a whole file with the decoder, in pieces of `chunkFrames` frames.
    static func readAll(_ url: URL, chunkFrames: Int = 999) throws -> (format: AudioFormat, frameCount: Int64, bytes: [UInt8]) {
        let reader = try WAVDecoder().openReader(at: url)
        defer { reader.close() }
        let bpf = reader.format.bytesPerFrame
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: chunkFrames * bpf)
        while true {
            let n = try buffer.withUnsafeMutableBytes { raw in
                try reader.read(into: raw.baseAddress!, maxFrames: chunkFrames)
            }
            if n == 0 { break }
            out += buffer[0..<(n * bpf)]
        }
        return (reader.format, reader.frameCount, out)
    }

    static func bytes(of url: URL) throws -> [UInt8] {
        [UInt8](try Data(contentsOf: url))
    }

    /// The chunks of a RIFF/RF64 file up to and including `data`: id, offset of the chunk header, size.
    static func chunks(_ b: [UInt8]) -> [(id: String, offset: Int, size: UInt32)] {
        var result: [(id: String, offset: Int, size: UInt32)] = []
        var offset = 12
        while offset + 8 <= b.count {
            let id = String(decoding: b[offset..<(offset + 4)], as: UTF8.self)
            let size = u32(b, offset + 4)
            result.append((id, offset, size))
            if id == "data" { break }
            offset += 8 + Int(size) + Int(size & 1)
        }
        return result
    }

    static func u16(_ b: [UInt8], _ i: Int) -> UInt16 { UInt16(b[i]) | UInt16(b[i + 1]) << 8 }
    static func u32(_ b: [UInt8], _ i: Int) -> UInt32 { UInt32(u16(b, i)) | UInt32(u16(b, i + 2)) << 16 }
    static func u64(_ b: [UInt8], _ i: Int) -> UInt64 { UInt64(u32(b, i)) | UInt64(u32(b, i + 4)) << 32 }

    /// Overwrites 4 bytes of the file at `offset` with `value`, little-endian.
    static func patch32(_ url: URL, at offset: Int, _ value: UInt32) throws {
        let handle = try FileHandle(forUpdating: url)
        defer { try? handle.close() }
        try handle.seek(toOffset: UInt64(offset))
        try handle.write(contentsOf: (0..<4).map { UInt8(truncatingIfNeeded: value >> (8 * UInt32($0))) })
    }

    /// Appends `bytes` to the file.
    static func append(_ bytes: [UInt8], to url: URL) throws {
        let handle = try FileHandle(forUpdating: url)
        defer { try? handle.close() }
        try handle.seekToEnd()
        try handle.write(contentsOf: bytes)
    }

    /// Runs a tool found on PATH; returns its exit status, standard output and standard error.
    static func run(_ tool: String, _ arguments: [String]) throws -> (status: Int32, stdout: String, stderr: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [tool] + arguments
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let outData = out.fileHandleForReading.readDataToEndOfFile()
        let errData = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: outData, as: UTF8.self), String(decoding: errData, as: UTF8.self))
    }

    /// Whether `body` throws a ``TapedeckError`` with `code`.
    static func error(of body: () throws -> Void) -> TapedeckError? {
        do {
            try body()
            return nil
        } catch let error as TapedeckError {
            return error
        } catch {
            return TapedeckError(.internalError, "unexpected error type: \(error)")
        }
    }
}
