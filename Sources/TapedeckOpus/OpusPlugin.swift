import COpus
public import TapedeckCore

/// The Opus encoder's settings (`encoder.opus.*`). A plain value; safe on any thread.
public struct OpusSettings: SettingsGroup, Hashable {
    public static let bitrate = Setting<Int>("bitrate", range: 6_000...512_000, default: 128_000,
        help: "Target bit rate in bits per second, all channels together.")
    public static let complexity = Setting<Int>("complexity", range: 0...10, default: 10, help: "Encoder complexity: 0 fastest, 10 best.")
    public static let declarations = [bitrate.declaration, complexity.declaration]

    public var bitrate: Int
    public var complexity: Int

    /// Settings with the given values, the declared defaults for the rest.
    public init(bitrate: Int = Self.bitrate.defaultValue, complexity: Int = Self.complexity.defaultValue) {
        self.bitrate = bitrate
        self.complexity = complexity
    }

    public init(_ settings: PluginSettings) {
        self.init(bitrate: settings[Self.bitrate], complexity: settings[Self.complexity])
    }
}

/// The Opus backend's plugin descriptors (`encoder: opus`).
public enum OpusPlugin {
    /// The linked libopus, e.g. `libopus 1.3.1`. - Thread: any; never blocks.
    public static var library: String { String(cString: opus_get_version_string()).replacingOccurrences(of: "libopus ", with: "libopus ") }

    /// `encoder: opus`: Ogg Opus through libopusenc. - Thread: `make` runs on any thread and does not block.
    public static let encoder = EncoderPlugin(
        name: "opus",
        summary: "Ogg Opus files (lossy, any rate in, 48 kHz out, mono or stereo), tagged; for sharing, not archiving.",
        settings: OpusSettings.self,
        make: { settings, _ in OpusEncoder(settings: settings) })

    /// `decoder: opus`: reads Ogg Opus through libopusfile, at 48 kHz as 32-bit float.
    /// - Thread: `make` runs on any thread and does not block.
    public static let decoder = DecoderPlugin(
        name: "opus",
        summary: "Reads Ogg Opus files (at 48 kHz, 32-bit float).",
        make: { _ in OpusEncoder() })
}
