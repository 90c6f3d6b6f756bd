import Foundation
import TapedeckCore
import Testing

@Suite("Quantizer")
struct QuantizerTests {
    @Test("full scale, past it, infinities and NaN become the integer range's ends (or 0), never a trap", arguments: [SampleFormat.s16, .s24, .s32], [Dither.none, .tpdf, .shaped])
    func extremes(format: SampleFormat, dither: Dither) {
        let input: [Float] = [1, -1, 1.5, -3, .infinity, -.infinity, .nan, 0.999_999_9]
        let q = Quantizer(sampleFormat: format, channels: 1, sampleRate: 48_000, dither: dither)
        var out = [UInt8](repeating: 0, count: input.count * format.bytesPerSample)
        input.withUnsafeBufferPointer { i in out.withUnsafeMutableBytes { q.quantize(i.baseAddress!, frames: input.count, into: $0.baseAddress!) } }
        let values: [Int64] = (0..<input.count).map { k in
            out.withUnsafeBytes { raw in
                switch format {
                case .s16: Int64(raw.loadUnaligned(fromByteOffset: k * 2, as: Int16.self))
                case .s24: Int64(Sample24.load(raw.baseAddress!, index: k))
                default: Int64(raw.loadUnaligned(fromByteOffset: k * 4, as: Int32.self))
                }
            }
        }
        let top = Int64(1) << (format.bitsPerSample - 1)
        // Noise shaping feeds earlier errors back (each at most 4 steps, through taps summing to
        // about 8): the ends and silence are reached within that.
        let slack: Int64 = dither == .shaped ? 40 : 3
        #expect(values.allSatisfy { $0 >= -top && $0 <= top - 1 }, "\(values)")
        #expect(values[0] >= top - 1 - slack, "\(values)")
        #expect(values[2] >= top - 1 - slack && values[3] <= -top + slack && values[4] >= top - 1 - slack && values[5] <= -top + slack, "\(values)")
        #expect(abs(values[6]) <= slack + 2, "NaN is silence: \(values)")
    }

    @Test("without dither, in-range samples round to the nearest step, as the plain converter does")
    func rounding() {
        let input: [Float] = [0.5 / 32_768, 1.6 / 32_768, -2.4 / 32_768, 0.25]
        let q = Quantizer(sampleFormat: .s16, channels: 2, sampleRate: 44_100, dither: .none)
        var out = [Int16](repeating: 0, count: 4)
        input.withUnsafeBufferPointer { i in out.withUnsafeMutableBytes { q.quantize(i.baseAddress!, frames: 2, into: $0.baseAddress!) } }
        #expect(out == [1, 2, -2, 8192], "halves away from zero, as SampleConverter rounds")
    }
}
