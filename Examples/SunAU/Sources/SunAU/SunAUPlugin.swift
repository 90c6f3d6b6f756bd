public import TapedeckCore

/// The settings of the `au` encoder, read from `encoder.au.*` in a config file, `TAPEDECK_ENCODER_AU_*`
/// or `--set encoder.au.KEY=VALUE`. Tapedeck validates them against these declarations before the
/// encoder is made, lists them in `tapedeck backends`, `config show` and `config example`, and
/// completes them in the shell: the plugin declares them once, here.
public struct SunAUSettings: SettingsGroup, Hashable {
    public static let annotation = Setting<String>("annotation", default: "",
        help: "Text kept in each file's annotation field (sox's comment). Empty: the session and take name.")
    public static let declarations = [annotation.declaration]

    public var annotation: String

    /// Settings with the given values. - Thread: any; does not block.
    public init(annotation: String = Self.annotation.defaultValue) {
        self.annotation = annotation
    }

    /// The validated values. - Thread: any; does not block.
    public init(_ settings: PluginSettings) {
        annotation = settings[Self.annotation]
    }
}

/// The `au` plugin descriptors: what a program lists in its ``PluginCatalog`` to record to,
/// export as and import Sun/NeXT audio files. Every member is safe on any thread; `make` does
/// not block.
public enum SunAUPlugin {
    /// `encoder: au` (`--set encoder.name=au`, `export --format au`).
    public static let encoder = EncoderPlugin(
        name: "au", summary: "Sun/NeXT audio (.au): big-endian PCM behind a 24-byte header, read by sox, ffmpeg and most players.",
        settings: SunAUSettings.self,
        make: { settings, _ in SunAUCodec(settings: settings) })

    /// The decoder of `.au` files with linear PCM or float samples (what the encoder writes, and
    /// what sox and ffmpeg write at those sample formats).
    public static let decoder = DecoderPlugin(
        name: "au", summary: "Reads Sun/NeXT audio files (linear PCM 8, 16, 24 and 32 bits, 32-bit float).",
        make: { _ in SunAUCodec() })
}
