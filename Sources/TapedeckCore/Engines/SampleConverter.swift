import CRingStream

/// Converts interleaved frames between sample formats (same rate and channel count).
///
/// Integer to integer shifts (rounding to nearest when narrowing); float to integer scales by
/// 2^(bits-1), rounds to nearest and clips to the integer range (NaN becomes 0); integer to float divides by
/// 2^(bits-1). No dither is applied.
public struct SampleConverter: Sendable {
    public let from: AudioFormat
    public let to: AudioFormat

    /// A converter from `from` to the same rate and channels in `sampleFormat`.
    public init(from: AudioFormat, to sampleFormat: SampleFormat) {
        self.from = from
        self.to = from.with(sampleFormat: sampleFormat)
    }

    /// Converts `frames` frames from `source` into `destination` (which holds
    /// `frames * to.bytesPerFrame` bytes).
    /// - Thread: any. Never allocates.
    public func convert(_ source: UnsafeRawPointer, into destination: UnsafeMutableRawPointer, frames: Int) {
        let samples = frames * from.channels
        if from.sampleFormat == to.sampleFormat {
            destination.copyMemory(from: source, byteCount: frames * from.bytesPerFrame)
            return
        }
        // The conversions every ring backend and the waveform tap make, as loops of their own
        // (no per-sample switch, no libm call): the same results as the general loop below.
        switch (from.sampleFormat, to.sampleFormat) {
        case (.f32, .s16):
            // In C, vectorized by the compiler: the same results as the general loop below.
            tapedeck_f32_to_s16(source, destination, samples)
        case (.s16, .f32):
            for i in 0..<samples {
                let x = Float(Int16(littleEndian: source.loadUnaligned(fromByteOffset: i * 2, as: Int16.self))) / 32_768
                destination.storeBytes(of: x.bitPattern.littleEndian, toByteOffset: i * 4, as: UInt32.self)
            }
        default:
            for i in 0..<samples {
                store(load(source, i), destination, i)
            }
        }
    }

    /// `x` scaled by `full`, rounded to nearest (halves away from zero) and clipped to
    /// `-full...full - 1`; NaN is 0. Truncation after adding ±0.5, so no libm call.
    @inline(__always)
    static func quantize(_ x: Double, _ full: Double) -> Int64 {
        if x.isNaN { return 0 }
        let clipped = min(max(x * full, -full), full - 1)
        return Int64(clipped + (clipped < 0 ? -0.5 : 0.5))
    }

    /// A sample as a Double in [-1, 1).
    @inline(__always)
    private func load(_ p: UnsafeRawPointer, _ i: Int) -> Double {
        switch from.sampleFormat {
        case .s16: Double(Int16(littleEndian: p.loadUnaligned(fromByteOffset: i * 2, as: Int16.self))) / 32_768
        case .s24: Double(Sample24.load(p, index: i)) / 8_388_608
        case .s32: Double(Int32(littleEndian: p.loadUnaligned(fromByteOffset: i * 4, as: Int32.self))) / 2_147_483_648
        case .f32: Double(Float(bitPattern: UInt32(littleEndian: p.loadUnaligned(fromByteOffset: i * 4, as: UInt32.self))))
        }
    }

    @inline(__always)
    private func store(_ x: Double, _ p: UnsafeMutableRawPointer, _ i: Int) {
        // NaN is silence here too (never a trap in the integer conversion); infinities clip.
        switch to.sampleFormat {
        case .s16: p.storeBytes(of: Int16(truncatingIfNeeded: Self.quantize(x, 32_768)).littleEndian, toByteOffset: i * 2, as: Int16.self)
        case .s24: Sample24.store(Int32(truncatingIfNeeded: Self.quantize(x, 8_388_608)), p, index: i)
        case .s32: p.storeBytes(of: Int32(truncatingIfNeeded: Self.quantize(x, 2_147_483_648)).littleEndian, toByteOffset: i * 4, as: Int32.self)
        case .f32: p.storeBytes(of: Float(x).bitPattern.littleEndian, toByteOffset: i * 4, as: UInt32.self)
        }
    }
}
