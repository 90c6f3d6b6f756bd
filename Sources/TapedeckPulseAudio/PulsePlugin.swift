#if PulseAudio
import CPulse
public import TapedeckCore

/// The settings of a PulseAudio plugin section, `capture.pulse.*` and `playback.pulse.*`: the
/// same keys in both, with defaults and help for the direction. Plain values; safe on any thread.
enum PulseKeys {
    static let server = Setting<String>("server",
        help: "PulseAudio server: empty for the usual lookup (PULSE_SERVER, the user's runtime folder), a socket path such as /run/user/1000/pulse/native, unix:PATH or tcp:HOST:PORT.")
    static let clientName = Setting<String>("client-name", default: "Tapedeck", help: "The client name the server shows.")

    static func device(_ role: PulseSettings.Role) -> Setting<String> {
        let example = role == .capture ? "`@DEFAULT_SOURCE@`, `alsa_input.usb-…` or a monitor such as `null.monitor`" : "`@DEFAULT_SINK@` or `alsa_output.usb-…`"
        return Setting("device", help: "The \(role == .capture ? "source" : "sink") to use: empty for the server's default, or a name from `tapedeck devices`, e.g. \(example).")
    }

    static func streamName(_ role: PulseSettings.Role) -> Setting<String> {
        Setting("stream-name", default: role == .capture ? "Tapedeck recording" : "Tapedeck playback", help: "The stream name the server shows.")
    }

    /// Capture: 250 ms, four wake-ups a second, which is as often as the recording engine's
    /// writer and meter use the audio (it batches up to 500 ms); a stop comes at most one
    /// fragment late and loses nothing up to it (see ``PulseCaptureStream/drain(into:maxFrames:)``).
    /// Playback: a 20 ms target latency.
    static func fragment(_ role: PulseSettings.Role) -> Setting<Int> {
        Setting("fragment-ms", range: 1...2000, default: role == .capture ? 250 : 200, help: role == .capture
            ? "Capture fragment size in milliseconds: how often audio arrives. Smaller costs more CPU; larger lets a stop come up to one fragment late. Nothing up to the stop is lost either way."
            : "Target playback latency in milliseconds.")
    }

    static func declarations(_ role: PulseSettings.Role) -> [SettingDeclaration] {
        [server.declaration, device(role).declaration, clientName.declaration, streamName(role).declaration,
         fragment(role).declaration]
    }

    static func read(_ settings: PluginSettings, role: PulseSettings.Role) -> PulseSettings {
        PulseSettings(role: role, server: settings[server], device: settings[device(role)],
                      clientName: settings[clientName], streamName: settings[streamName(role)],
                      fragmentMilliseconds: settings[fragment(role)])
    }
}

/// `capture.pulse.*`, read. A plain value; safe on any thread.
public struct PulseCaptureSettings: SettingsGroup {
    public static let declarations = PulseKeys.declarations(.capture)
    let pulse: PulseSettings
    public init(_ settings: PluginSettings) { pulse = PulseKeys.read(settings, role: .capture) }
}

/// `playback.pulse.*`, read. A plain value; safe on any thread.
public struct PulsePlaybackSettings: SettingsGroup {
    public static let declarations = PulseKeys.declarations(.playback)
    let pulse: PulseSettings
    public init(_ settings: PluginSettings) { pulse = PulseKeys.read(settings, role: .playback) }
}

/// The PulseAudio backend's plugin descriptors (`capture.backend: pulse`, `playback.backend: pulse`).
public enum PulsePlugin {
    /// The linked libpulse, e.g. `libpulse 16.1.0`. - Thread: any; never blocks.
    public static var library: String { "libpulse " + String(cString: pa_get_library_version()) }

    /// `capture.backend: pulse`. - Thread: `make` runs on any thread and never blocks.
    public static let capture = CapturePlugin(
        name: "pulse",
        summary: "Capture from a PulseAudio (or PipeWire-Pulse) server: any source, including monitors of sinks.",
        settings: PulseCaptureSettings.self,
        make: { group, context in
            PulseCaptureBackend(settings: group.pulse.in(context), logger: context.logger)
        })

    /// `playback.backend: pulse`. - Thread: `make` runs on any thread and never blocks.
    public static let playback = PlaybackPlugin(
        name: "pulse",
        summary: "Play to a PulseAudio (or PipeWire-Pulse) server's sink.",
        settings: PulsePlaybackSettings.self,
        make: { group, context in
            PulsePlaybackBackend(settings: group.pulse.in(context), logger: context.logger)
        })
}
#endif
