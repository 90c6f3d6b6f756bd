#if PulseAudio
public import TapedeckCore

/// The PulseAudio backend's plugin descriptors (`capture.backend: pulse`, `playback.backend: pulse`).
public enum PulsePlugin {
    static func settings(role: PulseSettings.Role) -> [SettingDeclaration] {
        let kind = role == .capture ? "source" : "sink"
        let example = role == .capture ? "`@DEFAULT_SOURCE@`, `alsa_input.usb-…` or a monitor such as `null.monitor`" : "`@DEFAULT_SINK@` or `alsa_output.usb-…`"
        return [
            SettingDeclaration("server", .string, default: "",
                               help: "PulseAudio server: empty for the usual lookup (PULSE_SERVER, the user's runtime folder), a socket path such as /run/user/1000/pulse/native, unix:PATH or tcp:HOST:PORT."),
            SettingDeclaration("device", .string, default: "",
                               help: "The \(kind) to use: empty for the server's default, or a name from `tapedeck devices --backend pulse`, e.g. \(example)."),
            SettingDeclaration("client-name", .string, default: "Tapedeck", help: "The client name the server shows."),
            SettingDeclaration("stream-name", .string, default: role == .capture ? "Tapedeck recording" : "Tapedeck playback",
                               help: "The stream name the server shows."),
            SettingDeclaration("fragment-ms", .int(1...2000), default: String(PulseSettings.defaultFragmentMilliseconds(role)),
                               help: role == .capture
                                   ? "Capture fragment size in milliseconds: how often audio arrives. Smaller costs more CPU; larger lets a stop come up to one fragment late. Nothing up to the stop is lost either way."
                                   : "Target playback latency in milliseconds."),
        ]
    }

    /// `capture.backend: pulse`. - Thread: `make` runs on any thread and never blocks.
    public static let capture = CapturePlugin(
        name: "pulse",
        summary: "Capture from a PulseAudio (or PipeWire-Pulse) server: any source, including monitors of sinks.",
        settings: settings(role: .capture),
        make: { settings, context in PulseCaptureBackend(settings: settings, logger: context.logger) })

    /// `playback.backend: pulse`. - Thread: `make` runs on any thread and never blocks.
    public static let playback = PlaybackPlugin(
        name: "pulse",
        summary: "Play to a PulseAudio (or PipeWire-Pulse) server's sink.",
        settings: settings(role: .playback),
        make: { settings, context in PulsePlaybackBackend(settings: settings, logger: context.logger) })
}
#endif
