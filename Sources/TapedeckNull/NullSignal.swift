public import TapedeckCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A deterministic test signal, a pure function of frame position, channel and settings.
///
/// Because every sample depends only on its position, a test (or a script in another language)
/// can recompute what any stretch of a take must contain.
public enum NullSignal: Sendable, Hashable {
    /// All zeros.
    case silence
    /// A sine at `frequency` Hz with peak `level` (0...1), the same on every channel.
    case sine(frequency: Double, level: Double)
    /// White noise with peak `level`, from a counter-based generator seeded by `seed`.
    case noise(seed: UInt64, level: Double)
    /// The frame counter: sample number `k = frame * channels + channel`, wrapped to the sample
    /// width (`Int16(truncatingIfNeeded: k)` for s16, the low 24 bits for s24, `Int32` for s32,
    /// `(k mod 2^24) / 2^24` for f32). Proves no sample was lost, duplicated or reordered.
    case frameCounter
    /// `signal` switched off and on: `stretches` are frame counts, the first off, then on, then
    /// off…, repeating from the start after the last (VOX and silence-alarm tests).
    indirect case gated(NullSignal, stretches: [Int64])

    /// Whether a gated signal is on at `frame` (always, for the others). - Thread: any; never blocks.
    public func isOn(at frame: Int64) -> Bool {
        guard case .gated(_, let stretches) = self else { return true }
        let total = stretches.reduce(0, +)
        guard total > 0 else { return true }
        var t = frame % total
        for (i, n) in stretches.enumerated() {
            if t < n { return i % 2 == 1 }
            t -= n
        }
        return true
    }

    /// The signal in words, e.g. `440 Hz sine at -6.0 dBFS`. - Thread: any; never blocks.
    public var summary: String {
        func dB(_ level: Double) -> String { level > 0 ? String(format: "%.1f dBFS", 20 * log10(level)) : "silence" }
        switch self {
        case .silence: return "silence"
        case .sine(let f, let level): return "\(f.formatted()) Hz sine at \(dB(level))"
        case .noise(_, let level): return "white noise peaking at \(dB(level))"
        case .frameCounter: return "frame-counter test pattern"
        case .gated(let signal, _): return "\(signal.summary), switched off and on"
        }
    }

    /// The sample at `frame`, `channel` as an integer of the format's width, or as a float
    /// bit-for-bit equal to what ``render(into:startFrame:frames:format:)`` writes for f32.
    /// - Thread: any. Never blocks or allocates.
    public func sample(frame: Int64, channel: Int, format: AudioFormat) -> Double {
        switch self {
        case .silence:
            return 0
        case .gated(let signal, _):
            return isOn(at: frame) ? signal.sample(frame: frame, channel: channel, format: format) : 0
        case .sine(let f, let level):
            let phase = 2 * Double.pi * f * Double(frame) / Double(format.sampleRate)
            return quantize(level * sin(phase), format)
        case .noise(let seed, let level):
            let k = UInt64(bitPattern: frame) &* UInt64(format.channels) &+ UInt64(channel)
            let r = Self.mix(k ^ (seed &* 0x9E37_79B9_7F4A_7C15))
            let unit = Double(r >> 11) / Double(1 << 53) * 2 - 1
            return quantize(level * unit, format)
        case .frameCounter:
            let k = frame &* Int64(format.channels) &+ Int64(channel)
            switch format.sampleFormat {
            case .s16: return Double(Int16(truncatingIfNeeded: k))
            case .s24: return Double(Int32(truncatingIfNeeded: k << 8) >> 8)
            case .s32: return Double(Int32(truncatingIfNeeded: k))
            case .f32: return Double(Float(k & 0xFF_FFFF) / Float(1 << 24))
            }
        }
    }

    /// Writes `frames` interleaved frames starting at `startFrame` into `buffer`.
    /// - Thread: any. Never allocates or blocks (safe on a device thread).
    public func render(into buffer: UnsafeMutableRawPointer, startFrame: Int64, frames: Int, format: AudioFormat) {
        let channels = format.channels
        if case .silence = self {
            buffer.initializeMemory(as: UInt8.self, repeating: 0, count: frames * format.bytesPerFrame)
            return
        }
        for i in 0..<frames {
            let frame = startFrame + Int64(i)
            for c in 0..<channels {
                let v = sample(frame: frame, channel: c, format: format)
                let index = i * channels + c
                switch format.sampleFormat {
                case .s16: buffer.storeBytes(of: Int16(v).littleEndian, toByteOffset: index * 2, as: Int16.self)
                case .s24: Sample24.store(Int32(v), buffer, index: index)
                case .s32: buffer.storeBytes(of: Int32(v).littleEndian, toByteOffset: index * 4, as: Int32.self)
                case .f32: buffer.storeBytes(of: Float(v).bitPattern.littleEndian, toByteOffset: index * 4, as: UInt32.self)
                }
            }
        }
    }

    private func quantize(_ x: Double, _ format: AudioFormat) -> Double {
        switch format.sampleFormat {
        case .s16: (x * 32767).rounded()
        case .s24: (x * 8_388_607).rounded()
        case .s32: (x * 2_147_483_647).rounded()
        case .f32: Double(Float(x))
        }
    }

    /// SplitMix64's finalizer: a good 64-bit mix of a counter.
    static func mix(_ z0: UInt64) -> UInt64 {
        var z = z0 &+ 0x9E37_79B9_7F4A_7C15
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
