public import TapedeckCore

/// The FLAC encoder's settings (`encoder.flac.*`). A plain value; safe on any thread.
public struct FLACSettings: SettingsGroup, Hashable {
    public static let level = Setting<Int>("level", range: 0...8, default: 5, help: "Compression level, as flac -0 … -8.")
    public static let verify = Setting<Bool>("verify", default: false,
        help: "Decode every frame while recording and compare it with the input (about 20% more CPU). Takes always carry the MD5 of the input, which flac -t checks; exports are always verified.")
    public static let padding = Setting<Int>("padding", range: 0...1_048_576, default: 8192,
        help: "Bytes of PADDING kept so tags can be edited without rewriting the file.")
    public static let declarations = [level.declaration, verify.declaration, padding.declaration]

    public var level: Int
    public var verify: Bool
    public var padding: Int

    /// Settings with the given values, the declared defaults for the rest.
    public init(level: Int = Self.level.defaultValue, verify: Bool = Self.verify.defaultValue,
                padding: Int = Self.padding.defaultValue) {
        self.level = level
        self.verify = verify
        self.padding = padding
    }

    public init(_ settings: PluginSettings) {
        level = settings[Self.level]
        verify = settings[Self.verify]
        padding = settings[Self.padding]
    }
}

/// The FLAC backend's plugin descriptors.
public enum FLACPlugin {
    /// The linked libFLAC, e.g. `libFLAC 1.4.2`. - Thread: any; never blocks.
    public static var library: String { "libFLAC " + FLACTags.libFLACVersion }

    /// `encoder: flac`: lossless FLAC through libFLAC; repairable after a crash.
    /// - Thread: `make` runs on any thread and does not block.
    public static let encoder = EncoderPlugin(
        name: "flac",
        summary: "FLAC files (lossless, 16/24/32-bit integer, up to 8 channels), tagged, repairable after a crash.",
        settings: FLACSettings.self,
        make: { settings, _ in FLACEncoder(settings: settings) })

    /// `decoder: flac`: reads FLAC files bit-exactly.
    /// - Thread: `make` runs on any thread and does not block.
    public static let decoder = DecoderPlugin(
        name: "flac",
        summary: "Reads FLAC files bit-exactly (16/24/32-bit; other depths widened).",
        make: { _ in FLACDecoder() })
}
