public import TapedeckCore
public import Foundation
import Testing

/// The contract every ``AudioEncoder`` (with its decoder) keeps.
public enum EncoderConformance {
    /// Writes the counter pattern in uneven chunks with checkpoints, finishes, decodes, and
    /// expects the same bytes (bit-exact codecs) and frame count.
    /// - Thread: any; blocks on disk I/O.
    public static func roundTrip(encoder: any AudioEncoder, decoder: any AudioDecoder, format: AudioFormat,
                                 frames: Int, in directory: URL) throws {
        let url = directory.appendingPathComponent("rt-\(UUID().uuidString).\(encoder.fileExtension)")
        let expected = try write(encoder: encoder, format: format, frames: frames, to: url, finish: true)
        let (decoded, readFormat) = try readAll(decoder: decoder, url: url)
        #expect(readFormat == format)
        #expect(decoded.count == expected.count, "decoded \(decoded.count / format.bytesPerFrame) of \(frames) frames")
        #expect(firstDifference(decoded, expected) == nil, "round trip must be bit-exact for \(format)")
    }

    /// Refuses to overwrite an existing file.
    public static func refusesOverwrite(encoder: any AudioEncoder, format: AudioFormat, in directory: URL) throws {
        let url = directory.appendingPathComponent("exists-\(UUID().uuidString).\(encoder.fileExtension)")
        try Data("keep me".utf8).write(to: url)
        #expect(throws: TapedeckError.self) {
            _ = try encoder.makeWriter(at: url, format: format, metadata: sampleMetadata)
        }
        #expect(try Data(contentsOf: url) == Data("keep me".utf8))
    }

    /// A writer abandoned mid-take (as a killed process leaves it) is repaired to every whole
    /// frame it holds, and decodes to exactly those frames.
    public static func repairsAbandonedFile(encoder: any AudioEncoder, decoder: any AudioDecoder, format: AudioFormat,
                                            in directory: URL) throws {
        let url = directory.appendingPathComponent("killed-\(UUID().uuidString).\(encoder.fileExtension)")
        let expected = try write(encoder: encoder, format: format, frames: 10_000, to: url, finish: false)
        let repaired = try encoder.repair(fileAt: url)
        #expect(repaired.format == format)
        #expect(repaired.frames == 10_000)
        let (decoded, _) = try readAll(decoder: decoder, url: url)
        #expect(firstDifference(decoded, expected) == nil)
        // Repairing again changes nothing.
        #expect(try encoder.repair(fileAt: url).frames == 10_000)
    }

    static let sampleMetadata = TakeMetadata(takeName: "Take 1", sessionName: "Session 1", takeNumber: 1, startDate: Date())

    @discardableResult
    static func write(encoder: any AudioEncoder, format: AudioFormat, frames: Int, to url: URL, finish: Bool) throws -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: frames * format.bytesPerFrame)
        bytes.withUnsafeMutableBytes { TestSignal.counter($0.baseAddress!, 0, frames, format) }
        let writer = try encoder.makeWriter(at: url, format: format, metadata: sampleMetadata)
        var offset = 0
        var chunk = 1
        try bytes.withUnsafeBytes { raw in
            while offset < frames {
                let n = min(chunk, frames - offset)
                try writer.write(raw.baseAddress! + offset * format.bytesPerFrame, frames: n)
                offset += n
                chunk = chunk * 3 + 1
                try writer.checkpoint()
            }
        }
        if finish {
            #expect(try writer.finish() == Int64(frames))
        } else {
            writer.abandon()
        }
        return bytes
    }

    static func readAll(decoder: any AudioDecoder, url: URL) throws -> ([UInt8], AudioFormat) {
        let reader = try decoder.openReader(at: url)
        defer { reader.close() }
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096 * reader.format.bytesPerFrame)
        while true {
            let n = try buffer.withUnsafeMutableBytes { try reader.read(into: $0.baseAddress!, maxFrames: 4096) }
            if n == 0 { break }
            out += buffer[0..<(n * reader.format.bytesPerFrame)]
        }
        #expect(reader.frameCount == Int64(out.count / reader.format.bytesPerFrame))
        return (out, reader.format)
    }
}
