public import TapedeckCore

/// The FLAC backend's plugin descriptors.
public enum FLACPlugin {
    /// `encoder: flac`: lossless FLAC through libFLAC; repairable after a crash.
    /// - Thread: `make` runs on any thread and does not block.
    public static let encoder = EncoderPlugin(
        name: "flac",
        summary: "FLAC files (lossless, 16/24/32-bit integer, up to 8 channels), tagged, repairable after a crash.",
        settings: [
            SettingDeclaration("level", .int(0...8), default: "5", help: "Compression level, as flac -0 … -8."),
            SettingDeclaration("verify", .bool, default: "false",
                               help: "Decode every frame while recording and compare it with the input (about 20% more CPU). Takes always carry the MD5 of the input, which flac -t checks; exports are always verified."),
            SettingDeclaration("padding", .int(0...1_048_576), default: "8192",
                               help: "Bytes of PADDING kept so tags can be edited without rewriting the file."),
        ],
        make: { settings, _ in
            FLACEncoder(level: settings.int("level") ?? 5, verify: settings.bool("verify") ?? false,
                        paddingBytes: settings.int("padding") ?? 8192)
        })

    /// `decoder: flac`: reads FLAC files bit-exactly.
    /// - Thread: `make` runs on any thread and does not block.
    public static let decoder = DecoderPlugin(
        name: "flac",
        summary: "Reads FLAC files bit-exactly (16/24/32-bit; other depths widened).",
        settings: [],
        make: { _, _ in FLACDecoder() })
}
