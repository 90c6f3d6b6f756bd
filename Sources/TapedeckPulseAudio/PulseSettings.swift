#if PulseAudio
import TapedeckCore
#if canImport(Glibc)
import Glibc
#endif

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

    /// The config section these came from, e.g. `capture.pulse`, which messages name keys
    /// under (see ``key(_:)``); empty outside a configuration.
    var section = ""

    /// A copy that names its keys under `context`'s section.
    func `in`(_ context: PluginContext) -> PulseSettings {
        var copy = self
        copy.section = context.section
        return copy
    }

    /// A setting's full key for messages, e.g. `capture.pulse.server`.
    func key(_ setting: Setting<String>) -> String { section.isEmpty ? setting.key : section + "." + setting.key }

    /// The address handed to `pa_context_connect`: `nil` for the usual lookup (`PULSE_SERVER`,
    /// X11 property, the user's runtime folder), a bare path turned into `unix:PATH`.
    var serverAddress: String? {
        if server.isEmpty { return nil }
        if server.hasPrefix("/") { return "unix:" + server }
        return server
    }

    /// The server as messages name it.
    /// With no server set, what libpulse will try: `PULSE_SERVER` when it is set, else the
    /// socket in the user's runtime folder.
    var serverLabel: String {
        guard server.isEmpty else { return server }
        if let env = getenv("PULSE_SERVER"), env.pointee != 0 { return "PULSE_SERVER=\(String(cString: env))" }
        if let runtime = getenv("XDG_RUNTIME_DIR"), runtime.pointee != 0 { return "\(String(cString: runtime))/pulse/native" }
        return "the default address (the user's runtime folder; XDG_RUNTIME_DIR is not set)"
    }

    /// What to check when the server does not answer: `PULSE_SERVER` when it chose the server,
    /// else the setting.
    var serverAdvice: String {
        if server.isEmpty, let env = getenv("PULSE_SERVER"), env.pointee != 0 {
            return "Check PULSE_SERVER, or set \(key(PulseKeys.server))"
        }
        return "Check \(key(PulseKeys.server))"
    }

    /// The device as messages name it.
    var deviceLabel: String {
        if !device.isEmpty { return device }
        return role == .capture ? "the default source" : "the default sink"
    }

    /// `source` or `sink`.
    var deviceKind: String { role == .capture ? "source" : "sink" }
}
#endif
