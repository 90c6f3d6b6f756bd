#if PulseAudio
import CPulse
import TapedeckCore

/// Conversions between Tapedeck's ``AudioFormat`` and PulseAudio's `pa_sample_spec`.
enum PulseFormat {
    /// The exact little-endian spec for `format` (the `…NE` alias macros are not importable, and
    /// Tapedeck's buffers are little-endian by definition).
    /// - Thread: any. Never blocks.
    static func sampleSpec(_ format: AudioFormat) -> pa_sample_spec {
        let sample: pa_sample_format_t = switch format.sampleFormat {
        case .s16: PA_SAMPLE_S16LE
        case .s24: PA_SAMPLE_S24LE
        case .s32: PA_SAMPLE_S32LE
        case .f32: PA_SAMPLE_FLOAT32LE
        }
        return pa_sample_spec(format: sample, rate: UInt32(format.sampleRate), channels: UInt8(clamping: format.channels))
    }

    /// Whether two specs are the same format, rate and channel count.
    static func equal(_ a: pa_sample_spec, _ b: pa_sample_spec) -> Bool {
        a.format == b.format && a.rate == b.rate && a.channels == b.channels
    }

    /// `pa_sample_spec_snprint` into a stack buffer, e.g. `s16le 2ch 48000Hz`.
    /// - Thread: any. Never blocks.
    static func describe(_ spec: pa_sample_spec) -> String {
        var spec = spec
        return withUnsafeTemporaryAllocation(of: CChar.self, capacity: Int(PA_SAMPLE_SPEC_SNPRINT_MAX)) { buffer in
            guard let base = buffer.baseAddress else { return "?" }
            pa_sample_spec_snprint(base, buffer.count, &spec)
            return String(cString: base)
        }
    }

    /// Bytes of `milliseconds` of audio in `format`, whole frames, at least one frame.
    static func bytes(milliseconds: Int, _ format: AudioFormat) -> UInt32 {
        let frames = max(1, format.sampleRate * milliseconds / 1000)
        return UInt32(clamping: frames * format.bytesPerFrame)
    }
}
#endif
