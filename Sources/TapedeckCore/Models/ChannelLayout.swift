/// Which loudspeaker each channel of a stream belongs to, as a WAVE_FORMAT_EXTENSIBLE channel
/// mask: one bit per speaker position, channels in ascending bit order.
///
/// This is the representation WAV (`dwChannelMask`), FLAC (the `WAVEFORMATEXTENSIBLE_CHANNEL_MASK`
/// tag the `flac` tool writes), ffmpeg and libsndfile share, so a take's layout passes through
/// every format Tapedeck writes unchanged. A mask of 0 means the channels are discrete: no speaker
/// is assigned. A value type; every member can be used from any thread and none blocks.
public struct ChannelLayout: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The speaker positions, in the order of their bits (the order channels take in a file).
    public enum Speaker: Int, Sendable, CaseIterable {
        case frontLeft, frontRight, frontCenter, lowFrequency, backLeft, backRight,
             frontLeftOfCenter, frontRightOfCenter, backCenter, sideLeft, sideRight,
             topCenter, topFrontLeft, topFrontCenter, topFrontRight, topBackLeft, topBackCenter, topBackRight

        /// The bit of this position in a channel mask.
        public var bit: UInt32 { 1 << UInt32(rawValue) }

        /// The short name ffmpeg and the WAVE documentation use (`FL`, `LFE`, `BL`, …).
        public var abbreviation: String {
            ["FL", "FR", "FC", "LFE", "BL", "BR", "FLC", "FRC", "BC", "SL", "SR",
             "TC", "TFL", "TFC", "TFR", "TBL", "TBC", "TBR"][rawValue]
        }
    }

    /// The WAVE_FORMAT_EXTENSIBLE channel mask. Only the 18 defined positions are used.
    public let mask: UInt32

    /// All bits that name a defined speaker position.
    public static let definedBits: UInt32 = 0x3FFFF

    /// A layout from a channel mask, if it describes `channels` channels: exactly one bit per
    /// channel among the defined positions, or 0 (discrete channels). `nil` otherwise.
    public init?(mask: UInt32, channels: Int) {
        guard mask & ~Self.definedBits == 0, mask == 0 || mask.nonzeroBitCount == channels else { return nil }
        self.mask = mask
    }

    /// A layout from speaker positions in channel order, if they are distinct and in the order a
    /// mask implies (ascending bits); `nil` for an order a mask cannot express.
    public init?(speakers: [Speaker]) {
        var mask: UInt32 = 0
        for speaker in speakers {
            guard speaker.bit > mask else { return nil }  // distinct and ascending
            mask |= speaker.bit
        }
        self.mask = mask
    }

    /// Discrete channels with no speaker assigned (mask 0).
    public static let discrete = ChannelLayout(uncheckedMask: 0)

    private init(uncheckedMask: UInt32) { mask = uncheckedMask }

    /// The layout a file with `channels` channels and no stated layout has, by the convention FLAC,
    /// Vorbis and WAVE share: mono is front centre, stereo is FL FR, 3 is FL FR FC, 4 is quad
    /// (FL FR BL BR), 5 is 5.0 with back surrounds, 6 is 5.1 with back surrounds, 7 is 6.1, 8 is
    /// 7.1; more channels are discrete.
    public static func conventional(channels: Int) -> ChannelLayout {
        let masks: [Int: UInt32] = [1: 0x4, 2: 0x3, 3: 0x7, 4: 0x33, 5: 0x37, 6: 0x3F, 7: 0x70F, 8: 0x63F]
        return ChannelLayout(uncheckedMask: masks[channels] ?? 0)
    }

    /// The speaker of each channel in order (empty for discrete channels).
    public var speakers: [Speaker] { Speaker.allCases.filter { mask & $0.bit != 0 } }

    /// The name ffmpeg gives this layout (`stereo`, `2.1`, `5.1` for back surrounds, `5.1(side)`), if it has one.
    public var name: String? { Self.names[mask] }

    private static let names: [UInt32: String] = [
        0x4: "mono", 0x3: "stereo", 0xB: "2.1", 0x7: "3.0", 0x103: "3.0(back)", 0x107: "4.0", 0x33: "quad",
        0x603: "quad(side)", 0xF: "3.1", 0x37: "5.0", 0x607: "5.0(side)", 0x10F: "4.1", 0x3F: "5.1",
        0x60F: "5.1(side)", 0x707: "6.0", 0x137: "hexagonal", 0x70F: "6.1", 0x13F: "6.1(back)", 0x637: "7.0",
        0x63F: "7.1", 0xFF: "7.1(wide)", 0x2D03F: "5.1.4", 0x2D63F: "7.1.4",
    ]

    /// The name and positions, e.g. `5.1: FL FR FC LFE BL BR`, or `discrete` for mask 0.
    public var description: String {
        guard mask != 0 else { return "discrete" }
        let positions = speakers.map(\.abbreviation).joined(separator: " ")
        return name.map { "\($0): \(positions)" } ?? positions
    }
}
