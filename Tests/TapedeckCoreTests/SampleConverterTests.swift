import Foundation
@testable import TapedeckCore
import Testing

/// The float-to-16-bit loop every ring backend runs (eight samples at a time) gives what the
/// general conversion gives, sample for sample: rounding halves away from zero, clipping,
/// NaN as 0, at any count and any alignment of either buffer.
@Suite("Sample converter")
struct SampleConverterTests {
    @Test func floatTo16BitMatchesTheGeneralRule() {
        var values: [Float] = [0, -0.0, 1, -1, 2, -2, .infinity, -.infinity, .nan, 0.999_99, -0.999_99,
                               0.5 / 32_768, -0.5 / 32_768, 1.5 / 32_768, -1.5 / 32_768, 32_767.5 / 32_768, -32_768.5 / 32_768,
                               .leastNonzeroMagnitude, -.greatestFiniteMagnitude, 1e30]
        var generator = SystemRandomNumberGenerator()
        values += (0..<4_001).map { _ in Float.random(in: -1.2...1.2, using: &generator) }
        let converter = SampleConverter(from: AudioFormat(sampleRate: 48_000, channels: 1, sampleFormat: .f32), to: .s16)
        for offset in [0, 1, 2, 3] {
            for count in [values.count, 7, 8, 9, 17] {
                let input = UnsafeMutableRawPointer.allocate(byteCount: count * 4 + 4, alignment: 16)
                let output = UnsafeMutableRawPointer.allocate(byteCount: count * 2 + 4, alignment: 16)
                defer { input.deallocate(); output.deallocate() }
                for i in 0..<count { input.storeBytes(of: values[i], toByteOffset: offset + i * 4, as: Float.self) }
                converter.convert(input + offset, into: output + offset, frames: count)
                let wrong = (0..<count).first { i in
                    Int64(output.loadUnaligned(fromByteOffset: offset + i * 2, as: Int16.self)) != SampleConverter.quantize(Double(values[i]), 32_768)
                }
                #expect(wrong == nil, "offset \(offset), \(count) samples: \(wrong.map { "\(values[$0])" } ?? "")")
            }
        }
    }
}
