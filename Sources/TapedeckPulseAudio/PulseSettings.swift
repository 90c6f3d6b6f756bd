#if PulseAudio
import TapedeckCore

/// One Pulse plugin section, validated: where the server is, which device, names, fragment size.
struct PulseSettings: Sendable, Hashable {
    /// Which direction these settings are for; it names the config keys in messages.
    enum Role: String, Sendable, Hashable {
        case capture, playback
    }

    var role: Role
    /// `""` (the usual lookup), a socket path, `unix:PATH` or `tcp:HOST:PORT`.
    var server: String
    /// `""` (the server's default), a source or sink name, `@DEFAULT_SOURCE@`, `null.monitor`, …
    var device: String
    var clientName: String
    var streamName: String
    /// Capture fragment size / playback target latency, in milliseconds.
    var fragmentMilliseconds: Int

    /// The default `fragment-ms` for each role. Capture: 250 ms, four wake-ups a second, which is
    /// as often as the recording engine's writer and meter use the audio (it batches up to
    /// 500 ms); a stop comes at most one fragment late and loses nothing up to it (see
    /// ``PulseCaptureStream/drain(into:maxFrames:)``). Playback: a 20 ms target latency.
    static func defaultFragmentMilliseconds(_ role: Role) -> Int { role == .capture ? 250 : 20 }

    init(role: Role, settings: PluginSettings) {
        self.role = role
        server = settings.string("server") ?? ""
        device = settings.string("device") ?? ""
        clientName = settings.string("client-name") ?? "Tapedeck"
        streamName = settings.string("stream-name") ?? (role == .capture ? "Tapedeck recording" : "Tapedeck playback")
        fragmentMilliseconds = settings.int("fragment-ms") ?? Self.defaultFragmentMilliseconds(role)
    }

    /// The address handed to `pa_context_connect`: `nil` for the usual lookup (`PULSE_SERVER`,
    /// X11 property, the user's runtime folder), a bare path turned into `unix:PATH`.
    var serverAddress: String? {
        if server.isEmpty { return nil }
        if server.hasPrefix("/") { return "unix:" + server }
        return server
    }

    /// The server as messages name it.
    var serverLabel: String {
        server.isEmpty ? "the default address (PULSE_SERVER or the user's runtime folder)" : server
    }

    /// The device as messages name it.
    var deviceLabel: String {
        if !device.isEmpty { return device }
        return role == .capture ? "the default source" : "the default sink"
    }

    /// The key prefix of this section, e.g. `capture.pulse`.
    var keyPrefix: String { "\(role.rawValue).pulse" }

    /// `source` or `sink`.
    var deviceKind: String { role == .capture ? "source" : "sink" }
}
#endif
