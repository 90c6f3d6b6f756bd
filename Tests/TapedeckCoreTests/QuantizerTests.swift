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

    /// The quantizer as it was first written (per sample, `Double.rounded()`), for the faster
    /// one to be compared with: the same seed must give the same bytes.
    static func reference(_ input: [Float], format: SampleFormat, dither: Dither, seed: UInt64 = 0x9E37_79B9_7F4A_7C15) -> [Int64] {
        var state = seed | 1
        func uniform() -> Float {
            state ^= state >> 12
            state ^= state << 25
            state ^= state >> 27
            return Float((state &* 0x2545_F491_4F6C_DD1D) >> 40) / 16_777_216 - 0.5
        }
        let scale = Float(1 << (format.bitsPerSample - 1))
        let top = Double(scale) - 1, bottom = -Double(scale)
        return input.map { x in
            var v = x * scale
            if !v.isFinite { v = v.isNaN ? 0 : (v > 0 ? scale : -scale) }
            let d: Float = dither == .none ? 0 : uniform() + uniform()
            return Int64(min(max(Double(v + d).rounded(), bottom), top))
        }
    }

    @Test("the one-pass quantizer gives, byte for byte, what the sample-by-sample one gives: halves, extremes and random samples, with and without dither", arguments: [SampleFormat.s16, .s24, .s32], [Dither.none, .tpdf])
    func sameAsReference(format: SampleFormat, dither: Dither) {
        var rng = SystemRandomNumberGenerator()
        let step = 1 / Float(1 << (format.bitsPerSample - 1))
        var input: [Float] = [0.5 * step, -0.5 * step, 1.5 * step, -2.5 * step, 1, -1, 2, -2, .infinity, -.infinity, .nan, 0, 1e30, -1e30, .greatestFiniteMagnitude, 0.499_999_97 * step]
        input += (0..<20_000).map { _ in Float.random(in: -1.2...1.2, using: &rng) }
        input += (0..<2_000).map { _ in Float(Int.random(in: -400...400, using: &rng)) * step / 2 }
        let q = Quantizer(sampleFormat: format, channels: 2, sampleRate: 48_000, dither: dither)
        var out = [UInt8](repeating: 0, count: input.count * format.bytesPerSample)
        // In two calls: the dither's sequence goes on across them.
        input.withUnsafeBufferPointer { i in
            out.withUnsafeMutableBytes { o in
                q.quantize(i.baseAddress!, frames: 5_000, into: o.baseAddress!)
                q.quantize(i.baseAddress! + 10_000, frames: (input.count - 10_000) / 2, into: o.baseAddress! + 10_000 * format.bytesPerSample)
            }
        }
        let values: [Int64] = (0..<input.count).map { k in
            out.withUnsafeBytes { raw in
                switch format {
                case .s16: Int64(raw.loadUnaligned(fromByteOffset: k * 2, as: Int16.self))
                case .s24: Int64(Sample24.load(raw.baseAddress!, index: k))
                default: Int64(raw.loadUnaligned(fromByteOffset: k * 4, as: Int32.self))
                }
            }
        }
        #expect(values == Self.reference(input, format: format, dither: dither))
    }
}
