public import TapedeckCore

/// The Opus backend's plugin descriptors (`encoder: opus`).
public enum OpusPlugin {
    /// `encoder: opus`: Ogg Opus through libopusenc. - Thread: `make` runs on any thread and does not block.
    public static let encoder = EncoderPlugin(
        name: "opus",
        summary: "Ogg Opus files (lossy, any rate in, 48 kHz out, mono or stereo), tagged; for sharing, not archiving.",
        settings: [
            SettingDeclaration("bitrate", .int(6_000...512_000), default: "128000", help: "Target bit rate in bits per second, all channels together."),
            SettingDeclaration("complexity", .int(0...10), default: "10", help: "Encoder complexity: 0 fastest, 10 best."),
        ],
        make: { settings, _ in OpusEncoder(bitrate: settings.int("bitrate") ?? 128_000, complexity: settings.int("complexity") ?? 10) })

    /// `decoder: opus`: reads Ogg Opus through libopusfile, at 48 kHz as 32-bit float.
    /// - Thread: `make` runs on any thread and does not block.
    public static let decoder = DecoderPlugin(
        name: "opus",
        summary: "Reads Ogg Opus files (at 48 kHz, 32-bit float).",
        settings: [],
        make: { _, _ in OpusEncoder() })
}
