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

    /// The channel map for `format`'s layout, so the server maps the device's channels to the
    /// take's speakers (its default map for 6 channels, AIFF's, has another order than the WAVE
    /// order a take's file states). Mono is PulseAudio's `mono`; discrete channels are `aux0…`.
    /// - Thread: any. Never blocks.
    static func channelMap(_ format: AudioFormat) -> pa_channel_map {
        var map = pa_channel_map()
        let speakers = format.layout.speakers
        guard speakers.count == format.channels, format.layout != .conventional(channels: 1) else {
            if format.channels == 1 {
                pa_channel_map_init_mono(&map)
            } else {
                pa_channel_map_init_auto(&map, UInt32(format.channels), PA_CHANNEL_MAP_AUX)
            }
            return map
        }
        map.channels = UInt8(clamping: format.channels)
        withUnsafeMutableBytes(of: &map.map) { raw in
            let positions = raw.bindMemory(to: pa_channel_position_t.self)
            for (i, speaker) in speakers.enumerated() { positions[i] = position(speaker) }
        }
        return map
    }

    /// PulseAudio's position for a WAVE speaker.
    private static func position(_ speaker: ChannelLayout.Speaker) -> pa_channel_position_t {
        switch speaker {
        case .frontLeft: PA_CHANNEL_POSITION_FRONT_LEFT
        case .frontRight: PA_CHANNEL_POSITION_FRONT_RIGHT
        case .frontCenter: PA_CHANNEL_POSITION_FRONT_CENTER
        case .lowFrequency: PA_CHANNEL_POSITION_LFE
        case .backLeft: PA_CHANNEL_POSITION_REAR_LEFT
        case .backRight: PA_CHANNEL_POSITION_REAR_RIGHT
        case .frontLeftOfCenter: PA_CHANNEL_POSITION_FRONT_LEFT_OF_CENTER
        case .frontRightOfCenter: PA_CHANNEL_POSITION_FRONT_RIGHT_OF_CENTER
        case .backCenter: PA_CHANNEL_POSITION_REAR_CENTER
        case .sideLeft: PA_CHANNEL_POSITION_SIDE_LEFT
        case .sideRight: PA_CHANNEL_POSITION_SIDE_RIGHT
        case .topCenter: PA_CHANNEL_POSITION_TOP_CENTER
        case .topFrontLeft: PA_CHANNEL_POSITION_TOP_FRONT_LEFT
        case .topFrontCenter: PA_CHANNEL_POSITION_TOP_FRONT_CENTER
        case .topFrontRight: PA_CHANNEL_POSITION_TOP_FRONT_RIGHT
        case .topBackLeft: PA_CHANNEL_POSITION_TOP_REAR_LEFT
        case .topBackCenter: PA_CHANNEL_POSITION_TOP_REAR_CENTER
        case .topBackRight: PA_CHANNEL_POSITION_TOP_REAR_RIGHT
        }
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
