import Foundation
import Testing
import TapedeckCore
@testable import TapedeckFLAC

/// The frame-parallel writer makes the same file a single libFLAC encoder makes: every frame
/// (renumbered, CRCs recomputed) and STREAMINFO, byte for byte, at level 5.
@Suite("FLAC frame-parallel writer")
struct FLACParallelTests {
    /// A signal that compresses like music, not like silence: a few sines under noise.
    static func signal(frames: Int, format: AudioFormat) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: frames * format.bytesPerFrame)
        var seed: UInt32 = 12_345
        let scale = format.sampleFormat == .s16 ? 12_000.0 : 3_000_000.0
        bytes.withUnsafeMutableBytes { out in
            for f in 0..<frames {
                for c in 0..<format.channels {
                    seed = seed &* 1_664_525 &+ 1_013_904_223
                    let noise = Double(Int32(bitPattern: seed) >> 20) / 2048
                    let value = Int32((sin(Double(f) * 0.01 * Double(c + 1)) * 0.8 + noise * 0.05) * scale)
                    let i = f * format.channels + c
                    switch format.sampleFormat {
                    case .s16: out.storeBytes(of: Int16(value).littleEndian, toByteOffset: i * 2, as: Int16.self)
                    default: Sample24.store(value, out.baseAddress!, index: i)
                    }
                }
            }
        }
        return bytes
    }

    static func write(_ writer: any TakeWriter, _ bytes: [UInt8], frames: Int, format: AudioFormat) throws -> Int64 {
        var offset = 0
        var chunk = 1000
        try bytes.withUnsafeBytes { raw in
            while offset < frames {
                let n = min(chunk, frames - offset)
                try writer.write(raw.baseAddress! + offset * format.bytesPerFrame, frames: n)
                offset += n
                chunk = chunk % 9000 + 3001  // chunks that straddle blocks and segments
            }
        }
        return try writer.finish()
    }

    @Test("the parallel file equals libFLAC's serial one byte for byte, and flac -t passes it",
          arguments: [(1, SampleFormat.s16), (2, .s16), (2, .s24), (6, .s24)], [1, 100, 600_001])
    func sameAsSerial(shape: (channels: Int, sampleFormat: SampleFormat), frames: Int) throws {
        let format = AudioFormat(sampleRate: 48_000, channels: shape.channels, sampleFormat: shape.sampleFormat)
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-parallel-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let metadata = TakeMetadata(takeName: "Take 1", sessionName: "Parallel", takeNumber: 1, startDate: Date(timeIntervalSince1970: 1_790_000_000))
        let bytes = Self.signal(frames: frames, format: format)
        let parallelURL = dir.appendingPathComponent("parallel.flac"), serialURL = dir.appendingPathComponent("serial.flac")
        let parallel = try FLACParallelWriter(path: parallelURL.path, format: format, metadata: metadata, level: 5, verify: true,
                                              paddingBytes: 8192, threads: 2)
        #expect(try Self.write(parallel, bytes, frames: frames, format: format) == Int64(frames))
        #expect(parallel.verification != nil)
        let serial = try FLACTakeWriter(path: serialURL.path, format: format, metadata: metadata, level: 5, verify: false, paddingBytes: 8192)
        #expect(try Self.write(serial, bytes, frames: frames, format: format) == Int64(frames))
        let a = try Data(contentsOf: parallelURL), b = try Data(contentsOf: serialURL)
        #expect(a.count == b.count, "\(a.count) vs \(b.count) bytes")
        #expect(a == b, "first difference at byte \(zip(a, b).enumerated().first { $0.element.0 != $0.element.1 }?.offset ?? min(a.count, b.count))")
        let t = Process()
        t.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        t.arguments = ["flac", "-t", "-s", parallelURL.path]
        try t.run()
        t.waitUntilExit()
        #expect(t.terminationStatus == 0)
        let summary = try FLACEncoder.verifyFile(at: parallelURL)
        #expect(summary.frames == Int64(frames))
    }

    @Test("renumbering keeps a frame's CRCs valid as the number's coded length grows")
    func renumbering() throws {
        let format = AudioFormat(sampleRate: 48_000, channels: 2, sampleFormat: .s16)
        let frame = try #require(FLACVerbatimFrame.make(samples: [Int32](repeating: 7, count: 32), frames: 16, channels: 2,
                                                        bitsPerSample: 16, sampleRate: format.sampleRate, frameNumber: 0))
        for number: UInt64 in [0, 1, 127, 128, 2047, 2048, 65_535, 65_536, 2_097_151, 2_097_152, 1 << 30] {
            let out = try #require(FLACFrameRenumbering.renumber(frame, to: number))
            let crcAt = out.count - 2
            #expect(FLACFrameRenumbering.crc16(Array(out[..<crcAt])) == UInt16(out[crcAt]) << 8 | UInt16(out[crcAt + 1]))
            #expect(FLACFrameRenumbering.crc16(Array(out[..<crcAt])) == FLACVerbatimFrame.crc16(Array(out[..<crcAt])))
        }
    }

    @Test("a frame's CRC-16 with its header replaced, from the stored one, is the CRC of the new frame (random headers and tails of every length)")
    func crcWithHeaderReplaced() {
        var rng = SystemRandomNumberGenerator()
        for _ in 0..<500 {
            let old = (0..<Int.random(in: 1...16, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            let new = (0..<Int.random(in: 1...16, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            let tail = (0..<Int.random(in: 0...5000, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            let stored = FLACFrameRenumbering.crc16(old + tail)
            let frame = old + tail + [UInt8(stored >> 8), UInt8(stored & 0xFF)]
            #expect(FLACFrameRenumbering.crc16(replacingHeader: old, of: frame, with: new) == FLACVerbatimFrame.crc16(new + tail))
        }
    }
}
