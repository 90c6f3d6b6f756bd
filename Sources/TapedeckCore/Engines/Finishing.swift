/// Changing the audio on its way out (an export): a gain, another sample rate, and dither where
/// samples are quantized again. Plain values and single-owner converters; any thread; none blocks.

/// How float samples are made integers again.
public enum Dither: String, Sendable, Hashable, CaseIterable {
    /// Rounded to the nearest step: truncation distortion on quiet signals.
    case none
    /// TPDF (triangular, ±1 step) dither: the error becomes a steady noise floor, independent of
    /// the signal.
    case tpdf
    /// TPDF dither with the error fed back through a noise-shaping filter (Lipshitz's 5-tap
    /// E-weighted curve at 44.1 and 48 kHz, first-order elsewhere): the same noise moved to the
    /// high frequencies the ear hears least.
    case shaped
}

/// Float samples to integer samples (s16, s24, s32), dithered. Single owner, not `Sendable`: one
/// per stream, used on one thread; never allocates after `init`.
public final class Quantizer {
    public let sampleFormat: SampleFormat
    public let channels: Int
    public let dither: Dither
    private let scale: Float
    private var state: UInt64
    /// The last errors per channel, newest first (noise shaping).
    private var errors: [Float]
    private let taps: [Float]

    /// - Parameters:
    ///   - sampleFormat: the integer sample format written (s16, s24 or s32).
    ///   - channels: channels per frame.
    ///   - sampleRate: frames per second; chooses the noise-shaping filter.
    ///   - dither: how the samples are dithered.
    ///   - seed: the dither's random sequence (the same seed gives the same output).
    public init(sampleFormat: SampleFormat, channels: Int, sampleRate: Int, dither: Dither, seed: UInt64 = 0x9E37_79B9_7F4A_7C15) {
        self.sampleFormat = sampleFormat
        self.channels = channels
        self.dither = dither
        scale = Float(1 << (sampleFormat.bitsPerSample - 1))
        state = seed | 1
        taps = dither != .shaped ? [] : (sampleRate == 44_100 || sampleRate == 48_000) ? [2.033, -2.165, 1.959, -1.590, 0.6149] : [1]
        errors = Array(repeating: 0, count: max(1, taps.count) * channels)
    }

    /// A uniform value in [-0.5, 0.5) (xorshift64*, ``uniform(_:)``).
    @inline(__always)
    private func uniform() -> Float { Self.uniform(&state) }

    /// Writes `frames` frames of `input` (interleaved floats, full scale ±1) into `output` in
    /// ``sampleFormat``, clipping at full scale.
    public func quantize(_ input: UnsafePointer<Float>, frames: Int, into output: UnsafeMutableRawPointer) {
        let samples = frames * channels
        guard taps.isEmpty, sampleFormat != .f32 else { return quantizeShaped(input, frames: frames, into: output) }
        // Plain or TPDF dither: one pass over the samples with the generator's state in a local
        // (not the object's, which Swift checks for exclusive access at every use).
        let (dithered, scale) = (dither != .none, self.scale)
        let top = Double(scale) - 1, bottom = -Double(scale)
        var state = self.state
        // One loop per format (the store chosen once, not per sample).
        @inline(__always) func each(_ store: (Int32, Int) -> Void) {
            for i in 0..<samples {
                var v = input[i] * scale
                if !v.isFinite { v = v.isNaN ? 0 : (v > 0 ? scale : -scale) }  // a hostile float file
                let d: Float = dithered ? Self.uniform(&state) + Self.uniform(&state) : 0
                // Held within a step of the range first: a huge finite sample must not trap the conversion.
                let held = min(max(Double(v + d), bottom - 1), top + 1)
                store(Int32(min(max(Self.roundedAway(held), bottom), top)), i)
            }
        }
        switch sampleFormat {
        case .s16: each { n, i in output.storeBytes(of: Int16(clamping: n).littleEndian, toByteOffset: i * 2, as: Int16.self) }
        case .s24: each { n, i in Sample24.store(n, output, index: i) }
        default: each { n, i in output.storeBytes(of: n.littleEndian, toByteOffset: i * 4, as: Int32.self) }
        }
        self.state = state
    }

    /// `x.rounded()` (halves away from zero) without a call into libm or a branch the dither
    /// would make unpredictable: add just under a half, away from zero, and truncate (by
    /// conversion to an integer). Exact for |x| < 2⁵²: the addition rounds to the integer above
    /// only when `x` is a half or more past it.
    @inline(__always)
    static func roundedAway(_ x: Double) -> Double {
        Double(Int64(x + Double(signOf: x, magnitudeOf: 0.499_999_999_999_999_94)))
    }

    /// A uniform value in [-0.5, 0.5) from `state` (xorshift64*), as ``uniform()``.
    @inline(__always)
    static func uniform(_ state: inout UInt64) -> Float {
        state ^= state >> 12
        state ^= state << 25
        state ^= state >> 27
        let bits = (state &* 0x2545_F491_4F6C_DD1D) >> 40  // 24 bits
        return Float(bits) / 16_777_216 - 0.5
    }

    /// ``quantize(_:frames:into:)`` with noise shaping (and for f32, which is copied).
    private func quantizeShaped(_ input: UnsafePointer<Float>, frames: Int, into output: UnsafeMutableRawPointer) {
        // In Double: 2^31 - 1 is not a Float (it rounds up to 2^31, which Int32 cannot hold).
        let top = Double(scale) - 1, bottom = -Double(scale)
        let depth = taps.count
        for f in 0..<frames {
            for c in 0..<channels {
                let i = f * channels + c
                var v = input[i] * scale
                if !v.isFinite { v = v.isNaN ? 0 : (v > 0 ? scale : -scale) }  // a hostile float file
                if depth > 0 {
                    for k in 0..<depth { v -= taps[k] * errors[c * depth + k] }
                }
                let d: Float = dither == .none ? 0 : uniform() + uniform()
                let q = min(max(Double(v + d).rounded(), bottom), top)
                if depth > 0 {
                    for k in stride(from: depth - 1, to: 0, by: -1) { errors[c * depth + k] = errors[c * depth + k - 1] }
                    // The error the shaping filter feeds back, bounded so a clipped run cannot grow it.
                    errors[c * depth] = min(max(Float(q) - v, -4), 4)
                }
                let n = Int32(q)
                switch sampleFormat {
                case .s16: output.storeBytes(of: Int16(clamping: n).littleEndian, toByteOffset: i * 2, as: Int16.self)
                case .s24: Sample24.store(n, output, index: i)
                case .s32: output.storeBytes(of: n.littleEndian, toByteOffset: i * 4, as: Int32.self)
                case .f32: output.storeBytes(of: (input[i]).bitPattern.littleEndian, toByteOffset: i * 4, as: UInt32.self)
                }
            }
        }
    }
}

/// Converts interleaved float frames from one sample rate to another, as a stream. Single owner,
/// not `Sendable`: one per stream, used on one thread; never blocks.
public protocol SampleRateConverter: AnyObject {
    /// Takes `frames` frames of `input` (all of them) and writes up to `capacity` frames into
    /// `output`; with `input` nil, gives out what it still holds (the end of the stream).
    /// - Returns: frames written into `output`.
    /// - Throws: ``TapedeckError`` `.internalError` when the resampler fails.
    func process(_ input: UnsafePointer<Float>?, frames: Int, into output: UnsafeMutablePointer<Float>, capacity: Int) throws -> Int
}

/// Makes sample-rate converters (the libsoxr plugin is one). Any thread; never blocks.
public protocol SampleRateConversion: Sendable {
    /// The library and quality, for reports, e.g. `libsoxr 0.1.3, very high quality`.
    var name: String { get }
    /// - Throws: `.unsupportedFormat` for rates or channel counts it cannot convert.
    func makeConverter(from inputRate: Int, to outputRate: Int, channels: Int) throws -> any SampleRateConverter
}
