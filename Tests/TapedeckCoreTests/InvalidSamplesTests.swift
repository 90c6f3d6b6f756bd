import Foundation
import Logging
import TapedeckCore
import TapedeckTesting
import Testing

/// NaN, infinities and absurd magnitudes in float audio (issue 37, defect 1): replaced once,
/// where frames are read or captured, so no encoder (LAME aborts on one), resampler or
/// analyser sees them.
@Suite("InvalidSamples")
struct InvalidSamplesTests {
    static func bytes(_ floats: [Float]) -> [UInt8] {
        floats.flatMap { f in withUnsafeBytes(of: f.bitPattern.littleEndian) { Array($0) } }
    }

    static func floats(_ bytes: [UInt8]) -> [Float] {
        stride(from: 0, to: bytes.count - 3, by: 4).map { i in
            Float(bitPattern: UInt32(bytes[i]) | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2]) << 16 | UInt32(bytes[i + 3]) << 24)
        }
    }

    @Test("NaN becomes silence, infinities and magnitudes past +40 dBFS full scale with their sign; the rest is untouched")
    func replace() {
        let negativeNaN = Float(bitPattern: 0xFFC0_0001), signalling = Float(bitPattern: 0x7F80_0001)
        let input: [Float] = [0.5, .nan, .infinity, -.infinity, 1e30, -3e38, 100, -100, 100.001, -0.0, negativeNaN, signalling,
                              -0.25, 1.5, .greatestFiniteMagnitude, .leastNonzeroMagnitude]
        var data = Self.bytes(input)
        let replaced = data.withUnsafeMutableBytes { InvalidSamples.replace(in: $0.baseAddress!, count: input.count) }
        let out = Self.floats(data)
        #expect(replaced == 9, "\(out)")
        let expected: [Float] = [0.5, 0, 1, -1, 1, -1, 100, -100, 1, -0.0, 0, 0, -0.25, 1.5, 1, .leastNonzeroMagnitude]
        #expect(out.map(\.bitPattern) == expected.map(\.bitPattern), "\(out)")
        #expect(out.allSatisfy { $0.isFinite && abs($0) <= InvalidSamples.limit })
    }

    @Test("a float reader's frames come out replaced and counted over every read; an integer reader's bytes pass untouched")
    func reader() throws {
        let format = AudioFormat(sampleRate: 48_000, channels: 2, sampleFormat: .f32)
        var samples = (0..<2000).map { Float($0 % 7) / 10 }
        for i in stride(from: 3, to: samples.count, by: 100) { samples[i] = .nan }
        samples[7] = .infinity
        samples[1999] = -.infinity
        let reader = SanitizedTakeReader(MemoryTakeReader(format: format, data: Self.bytes(samples)))
        #expect(reader.format == format && reader.frameCount == 1000)
        var read: [UInt8] = []
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: 333 * format.bytesPerFrame, alignment: 16)
        defer { buffer.deallocate() }
        while case let n = try reader.read(into: buffer, maxFrames: 333), n > 0 {
            read += Array(UnsafeRawBufferPointer(start: buffer, count: n * format.bytesPerFrame))
        }
        let out = Self.floats(read)
        #expect(out.count == samples.count)
        #expect(reader.replacedSamples == 22)
        #expect(out[3] == 0 && out[7] == 1 && out[1999] == -1 && out[4] == samples[4])
        #expect(out.allSatisfy { $0.isFinite })

        // The bit patterns of NaN, read as 16-bit integers, are ordinary samples.
        let pcm = AudioFormat(sampleRate: 48_000, channels: 1, sampleFormat: .s16)
        let nanBytes = Self.bytes([.nan, .infinity, 0.5, -.infinity])
        let plain = SanitizedTakeReader(MemoryTakeReader(format: pcm, data: nanBytes))
        var copy = [UInt8](repeating: 0, count: nanBytes.count)
        let n = try copy.withUnsafeMutableBytes { try plain.read(into: $0.baseAddress!, maxFrames: 8) }
        #expect(n == 8 && copy == nanBytes && plain.replacedSamples == 0)
    }

    @Test("the plain converter makes NaN silence and clips infinities: never a trap in the integer conversion",
          arguments: [SampleFormat.s16, .s24, .s32])
    func converter(_ sampleFormat: SampleFormat) {
        let input: [Float] = [.nan, .infinity, -.infinity, 0.5]
        let from = AudioFormat(sampleRate: 48_000, channels: 1, sampleFormat: .f32)
        let converter = SampleConverter(from: from, to: sampleFormat)
        var out = [UInt8](repeating: 0, count: input.count * sampleFormat.bytesPerSample)
        Self.bytes(input).withUnsafeBytes { i in out.withUnsafeMutableBytes { converter.convert(i.baseAddress!, into: $0.baseAddress!, frames: input.count) } }
        let values: [Int64] = (0..<input.count).map { k in
            out.withUnsafeBytes { raw in
                switch sampleFormat {
                case .s16: Int64(Int16(littleEndian: raw.loadUnaligned(fromByteOffset: k * 2, as: Int16.self)))
                case .s24: Int64(Sample24.load(raw.baseAddress!, index: k))
                default: Int64(Int32(littleEndian: raw.loadUnaligned(fromByteOffset: k * 4, as: Int32.self)))
                }
            }
        }
        let top = Int64(1) << (sampleFormat.bitsPerSample - 1)
        #expect(values == [0, top - 1, -top, top / 2], "\(values)")
    }

    @Test("a float device's NaN and infinities never reach the take: the writer replaces them before the encoder")
    func capture() async throws {
        let format = AudioFormat(sampleRate: 48_000, channels: 2, sampleFormat: .f32)
        let backend = ScriptedCaptureBackend(script: [.frames(1_000_000)]) { buffer, start, frames, _ in
            for i in 0..<(frames * 2) {
                let k = (start * 2 + Int64(i)) % 100
                let v: Float = k == 0 ? .nan : k == 1 ? .infinity : k == 2 ? -.infinity : k == 3 ? 1e30 : 0.25
                buffer.storeBytes(of: v.bitPattern.littleEndian, toByteOffset: i * 4, as: UInt32.self)
            }
        }
        let engine = RecordingEngine(backend: backend, settings: RecordingSettings(format: format, periodFrames: 256, bufferSeconds: 2,
                                                                                  checkpointInterval: .milliseconds(1)),
                                     frameLimit: 5000, logger: Logger(label: "test"))
        _ = try await engine.open()
        let sink = MemoryTakeSink()
        let result = try await engine.record { MemoryTakeWriter(sink: sink, format: $0) }
        #expect(result.frames == 5000)
        let out = Self.floats(sink.bytes)
        #expect(out.count == 10_000)
        #expect(out.allSatisfy { $0.isFinite && abs($0) <= 1 }, "every sample written is sound")
        #expect(out[0] == 0 && out[1] == 1 && out[2] == -1 && out[3] == 1 && out[4] == 0.25 && out[100] == 0)
    }
}
