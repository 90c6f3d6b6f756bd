/// How one sample is stored: packed little-endian integers or 32-bit IEEE floats.
///
/// Every buffer that crosses a Tapedeck port holds interleaved frames in exactly this layout
/// (the layout ALSA calls `S16_LE`, `S24_3LE`, `S32_LE`, `FLOAT_LE`), so capture, encoders and
/// storage agree on bytes without conversion.
public enum SampleFormat: String, Sendable, Hashable, Codable, CaseIterable, CustomStringConvertible {
    /// Signed 16-bit integer, 2 bytes.
    case s16
    /// Signed 24-bit integer packed into 3 bytes.
    case s24
    /// Signed 32-bit integer, 4 bytes.
    case s32
    /// 32-bit IEEE float in [-1, 1], 4 bytes.
    case f32

    /// Bytes one sample of this format occupies.
    public var bytesPerSample: Int {
        switch self {
        case .s16: 2
        case .s24: 3
        case .s32, .f32: 4
        }
    }

    /// Significant bits of one sample.
    public var bitsPerSample: Int { bytesPerSample * 8 }

    /// Whether samples are floating point.
    public var isFloat: Bool { self == .f32 }

    public var description: String { rawValue }
}

/// A stream's shape: sample rate, channel count, sample format and channel layout.
///
/// The layout is part of the format: two takes with the same samples but different speakers are
/// different audio. Where nothing says otherwise (a plain WAV, a FLAC without a channel-mask tag,
/// a device without a channel map) it is ``ChannelLayout/conventional(channels:)``. A value type;
/// every member can be used from any thread and none blocks.
public struct AudioFormat: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The sample rates Tapedeck accepts, in hertz.
    public static let sampleRateRange = 8_000...192_000
    /// The channel counts Tapedeck accepts.
    public static let channelRange = 1...32

    /// Frames per second.
    public var sampleRate: Int
    /// Interleaved channels per frame.
    public var channels: Int
    /// How each sample is stored.
    public var sampleFormat: SampleFormat
    /// Which speaker each channel feeds. Keep it consistent with ``channels`` (``validate()`` checks).
    public var layout: ChannelLayout

    /// Creates a format. Call ``validate()`` before using values that came from a user.
    /// - Parameters:
    ///   - sampleRate: frames per second.
    ///   - channels: interleaved channels per frame.
    ///   - sampleFormat: how each sample is stored.
    ///   - layout: the speakers; `nil` for the conventional layout of `channels`.
    public init(sampleRate: Int, channels: Int, sampleFormat: SampleFormat, layout: ChannelLayout? = nil) {
        self.sampleRate = sampleRate
        self.channels = channels
        self.sampleFormat = sampleFormat
        self.layout = layout ?? .conventional(channels: channels)
    }

    /// This format with another sample format (the layout and everything else kept).
    public func with(sampleFormat: SampleFormat) -> AudioFormat {
        var copy = self
        copy.sampleFormat = sampleFormat
        return copy
    }

    /// Whether `other` has the same rate, channel count and sample format, whatever its layout.
    public func hasSameSamples(as other: AudioFormat) -> Bool {
        sampleRate == other.sampleRate && channels == other.channels && sampleFormat == other.sampleFormat
    }

    private enum CodingKeys: String, CodingKey { case sampleRate, channels, sampleFormat, channelMask }

    /// Decodes a format; a missing `channelMask` (formats saved before layouts were kept), or one
    /// that does not fit the channel count, means the conventional layout.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let channels = try c.decode(Int.self, forKey: .channels)
        let mask = try c.decodeIfPresent(UInt32.self, forKey: .channelMask)
        self.init(sampleRate: try c.decode(Int.self, forKey: .sampleRate), channels: channels,
                  sampleFormat: try c.decode(SampleFormat.self, forKey: .sampleFormat),
                  layout: mask.flatMap { ChannelLayout(mask: $0, channels: channels) })
    }

    /// Encodes the rate, channels, sample format and the layout as `channelMask`.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(sampleRate, forKey: .sampleRate)
        try c.encode(channels, forKey: .channels)
        try c.encode(sampleFormat, forKey: .sampleFormat)
        try c.encode(layout.mask, forKey: .channelMask)
    }

    /// CD-quality stereo, 16-bit: the built-in default.
    public static let cdStereo = AudioFormat(sampleRate: 44_100, channels: 2, sampleFormat: .s16)

    /// Bytes one interleaved frame occupies.
    public var bytesPerFrame: Int { channels * sampleFormat.bytesPerSample }

    /// Bytes per second of audio.
    public var bytesPerSecond: Int { bytesPerFrame * sampleRate }

    /// Seconds that `frames` frames last.
    public func seconds(forFrames frames: Int64) -> Double { Double(frames) / Double(sampleRate) }

    /// Checks the format against the ranges Tapedeck supports.
    /// - Throws: ``TapedeckError`` with code `.invalidArgument` naming the bad value.
    public func validate() throws {
        guard Self.sampleRateRange.contains(sampleRate) else {
            throw TapedeckError(.invalidArgument,
                "Sample rate \(sampleRate) Hz is out of range. Use a rate from 8000 to 192000 Hz, such as 44100 or 48000.")
        }
        guard Self.channelRange.contains(channels) else {
            throw TapedeckError(.invalidArgument,
                "Channel count \(channels) is out of range. Use 1 to 32 channels.")
        }
        guard ChannelLayout(mask: layout.mask, channels: channels) != nil else {
            throw TapedeckError(.invalidArgument,
                "The channel layout \(layout) does not fit \(channels) channels. Give one speaker per channel, or none.")
        }
    }

    public var description: String { "\(sampleRate) Hz, \(channels) ch, \(sampleFormat)" }
}
