public import TapedeckCore
public import Foundation
import CFileSpace
import Testing

/// The contract every `AudioEncoder` (with its decoder) keeps.
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
        #expect(try blocksPastEnd(url) == 0, "a finished take keeps no disk blocks past its end")
    }

    /// A take with no audio (a device lost at frame 0, an empty export): the writer finishes
    /// with 0 frames, never aborting, and the decoder reads an empty file in the same format.
    /// - Thread: any; blocks on disk I/O.
    public static func zeroFrames(encoder: any AudioEncoder, decoder: any AudioDecoder, format: AudioFormat, in directory: URL) throws {
        let url = directory.appendingPathComponent("empty-\(UUID().uuidString).\(encoder.fileExtension)")
        let writer = try encoder.makeWriter(at: url, format: format, metadata: TakeMetadata(takeName: "Empty", sessionName: "S", takeNumber: 1, startDate: Date()))
        try writer.checkpoint()
        #expect(try writer.finish() == 0)
        let reader = try decoder.openReader(at: url)
        defer { reader.close() }
        #expect(reader.frameCount == 0)
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: 4096 * max(reader.format.bytesPerFrame, 1), alignment: 16)
        defer { buffer.deallocate() }
        #expect(try reader.read(into: buffer, maxFrames: 4096) == 0)
    }

    /// Bytes of disk blocks allocated past the end of the file at `url` (beyond the block its
    /// last byte is in): what a writer that allocates ahead has not given back.
    ///
    /// The file's data blocks are read from the file system's extent map (FIEMAP), not from
    /// `st_blocks`: that also counts blocks the file system keeps for its own bookkeeping (ext4
    /// gives a file of more than four extents, as a take synced at every checkpoint beside other
    /// writers can be, a 4 KiB extent-tree block), which are not past the end. Where there is no
    /// extent map (tmpfs), `st_blocks` is used; such file systems keep no bookkeeping blocks there.
    /// - Thread: any; blocks on disk I/O.
    public static func blocksPastEnd(_ url: URL) throws -> Int64 {
        let fd = open(url.path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw TapedeckError.system(errno, while: "open \(url.path)") }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw TapedeckError.system(errno, while: "inspect \(url.path)") }
        let blockSize = Int64(st.st_blksize)
        let needed = (Int64(st.st_size) + blockSize - 1) / blockSize * blockSize
        var allocatedEnd: Int64 = 0
        switch tapedeck_allocated_end(fd, &allocatedEnd) {
        case 0: return max(0, allocatedEnd - needed)
        case EOPNOTSUPP: return max(0, Int64(st.st_blocks) * 512 - needed)
        case let code: throw TapedeckError.system(code, while: "map the blocks of \(url.path)")
        }
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
        #expect(try blocksPastEnd(url) == 0, "a repaired take keeps no disk blocks past its end")
    }

    /// For lossy codecs, which keep the sound and not the samples: a 1 kHz sine at half scale
    /// decodes to the same duration (at the decoder's rate, within 0.5 %), the same frequency
    /// (zero crossings, within 1 %) and the same level (RMS within 1 dB) on every channel.
    /// - Thread: any; blocks on disk I/O.
    public static func lossyRoundTrip(encoder: any AudioEncoder, decoder: any AudioDecoder, format: AudioFormat,
                                      seconds: Double, in directory: URL) throws {
        let url = directory.appendingPathComponent("lossy-\(UUID().uuidString).\(encoder.fileExtension)")
        let frames = Int(seconds * Double(format.sampleRate))
        let writer = try encoder.makeWriter(at: url, format: format, metadata: sampleMetadata)
        try writeSine(writer, format: format, frames: frames)
        #expect(try writer.finish() == Int64(frames))
        let (bytes, readFormat) = try readAll(decoder: decoder, url: url)
        let decoded = try floats(bytes, readFormat)
        let expectedFrames = Double(frames) * Double(readFormat.sampleRate) / Double(format.sampleRate)
        let gotFrames = Double(decoded.count / readFormat.channels)
        #expect(abs(gotFrames - expectedFrames) <= expectedFrames * 0.005, "decoded \(gotFrames) frames, expected \(expectedFrames)")
        #expect(readFormat.channels == format.channels)
        // The middle half, away from the codec's start-up and the end.
        let count = decoded.count / readFormat.channels
        let range = (count / 4)..<(3 * count / 4)
        for c in 0..<readFormat.channels {
            var crossings = 0
            var sumSquares = 0.0
            var previous = decoded[range.lowerBound * readFormat.channels + c]
            for i in range {
                let v = decoded[i * readFormat.channels + c]
                if (previous < 0) != (v < 0) { crossings += 1 }
                previous = v
                sumSquares += Double(v) * Double(v)
            }
            let frequency = Double(crossings) / 2 / (Double(range.count) / Double(readFormat.sampleRate))
            #expect(abs(frequency - 1000) < 10, "channel \(c): \(frequency) Hz")
            let rms = (sumSquares / Double(range.count)).squareRoot()
            let db = 20 * log10(rms / (0.5 / 2.0.squareRoot()))
            #expect(abs(db) < 1, "channel \(c): level off by \(db) dB")
        }
    }

    /// For lossy codecs: a writer abandoned after a checkpoint (as a killed process leaves it) is
    /// repaired to a file the decoder reads, holding all but at most `maxLossSeconds` of what was
    /// written before the checkpoint.
    public static func lossyRepair(encoder: any AudioEncoder, decoder: any AudioDecoder, format: AudioFormat,
                                   maxLossSeconds: Double, in directory: URL) throws {
        let url = directory.appendingPathComponent("killed-\(UUID().uuidString).\(encoder.fileExtension)")
        let frames = 2 * format.sampleRate
        let writer = try encoder.makeWriter(at: url, format: format, metadata: sampleMetadata)
        try writeSine(writer, format: format, frames: frames)
        try writer.checkpoint()
        writer.abandon()
        let repaired = try encoder.repair(fileAt: url)
        #expect(repaired.frames <= Int64(frames))
        #expect(Double(frames) - Double(repaired.frames) <= maxLossSeconds * Double(format.sampleRate),
                "repair kept \(repaired.frames) of \(frames) frames")
        let (bytes, readFormat) = try readAll(decoder: decoder, url: url)
        #expect(bytes.count / readFormat.bytesPerFrame > 0)
        #expect(try encoder.repair(fileAt: url).frames == repaired.frames, "repairing again changes nothing")
    }

    /// Writes `frames` of a 1 kHz sine at half scale, on every channel, in uneven chunks.
    static func writeSine(_ writer: any TakeWriter, format: AudioFormat, frames: Int) throws {
        var f32 = [Float](repeating: 0, count: frames * format.channels)
        for i in 0..<frames {
            let v = Float(0.5 * sin(2 * Double.pi * 1000 * Double(i) / Double(format.sampleRate)))
            for c in 0..<format.channels { f32[i * format.channels + c] = v }
        }
        let floatFormat = AudioFormat(sampleRate: format.sampleRate, channels: format.channels, sampleFormat: .f32)
        var bytes = [UInt8](repeating: 0, count: frames * format.bytesPerFrame)
        f32.withUnsafeBytes { src in
            bytes.withUnsafeMutableBytes { dst in
                if format.sampleFormat == .f32 {
                    dst.copyMemory(from: src)
                } else {
                    SampleConverter(from: floatFormat, to: format.sampleFormat).convert(src.baseAddress!, into: dst.baseAddress!, frames: frames)
                }
            }
        }
        var offset = 0
        var chunk = 1000
        try bytes.withUnsafeBytes { raw in
            while offset < frames {
                let n = min(chunk, frames - offset)
                try writer.write(raw.baseAddress! + offset * format.bytesPerFrame, frames: n)
                offset += n
                chunk = chunk * 2 + 7
            }
        }
    }

    /// Decoded bytes as floats (converting integer formats).
    static func floats(_ bytes: [UInt8], _ format: AudioFormat) throws -> [Float] {
        let frames = bytes.count / format.bytesPerFrame
        var out = [Float](repeating: 0, count: frames * format.channels)
        bytes.withUnsafeBytes { src in
            out.withUnsafeMutableBytes { dst in
                if format.sampleFormat == .f32 {
                    dst.copyMemory(from: UnsafeRawBufferPointer(rebasing: src[0..<(frames * format.bytesPerFrame)]))
                } else {
                    SampleConverter(from: format, to: .f32).convert(src.baseAddress!, into: dst.baseAddress!, frames: frames)
                }
            }
        }
        return out
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
