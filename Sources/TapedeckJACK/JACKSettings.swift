#if JACK
public import TapedeckCore

/// The settings of a JACK plugin section, `capture.jack.*` and `playback.jack.*`: the same keys in
/// both, with help for the direction. Plain values; safe on any thread.
enum JACKKeys {
    static let server = Setting<String>("server",
        help: "The JACK server's name: empty for the default ($JACK_DEFAULT_SERVER, else `default`), or the name `jackd -n NAME` was started with.")
    static let clientName = Setting<String>("client-name", default: "tapedeck",
        help: "The client name other JACK programs show (JACK appends -01, -02… while it is taken).")

    static func device(_ role: JACKSettings.Role) -> Setting<String> {
        role == .capture
            ? Setting("device", help: "The ports to record from, one per channel in order: empty for the physical capture ports (system:capture_1…); a client's name (`system`); port names separated by commas; or a regular expression, as `jack_capture --port` takes them (`system:capture_[12]`). One port feeds every channel. `none` connects nothing: connect the ports (tapedeck:in_1…) with qjackctl, jack_connect or pw-link.")
            : Setting("device", help: "The ports to play to, one per channel in order: empty for the physical playback ports (system:playback_1…); a client's name; port names separated by commas; or a regular expression. One port takes every channel. `none` connects nothing (tapedeck:out_1… wait for a connection).")
    }

    static func declarations(_ role: JACKSettings.Role) -> [SettingDeclaration] {
        [server.declaration, clientName.declaration, device(role).declaration]
    }

    static func read(_ settings: PluginSettings, role: JACKSettings.Role) -> JACKSettings {
        JACKSettings(role: role, server: settings[server], clientName: settings[clientName], device: settings[device(role)])
    }
}

/// `capture.jack.*`, read. A plain value; safe on any thread.
public struct JACKCaptureSettings: SettingsGroup {
    public static let declarations = JACKKeys.declarations(.capture)
    let jack: JACKSettings
    public init(_ settings: PluginSettings) { jack = JACKKeys.read(settings, role: .capture) }
}

/// `playback.jack.*`, read. A plain value; safe on any thread.
public struct JACKPlaybackSettings: SettingsGroup {
    public static let declarations = JACKKeys.declarations(.playback)
    let jack: JACKSettings
    public init(_ settings: PluginSettings) { jack = JACKKeys.read(settings, role: .playback) }
}

/// One direction's settings, read. A plain value; safe on any thread.
struct JACKSettings: Sendable, Hashable {
    enum Role: Sendable { case capture, playback }
    var role: Role
    var server: String
    var clientName: String
    var device: String
    /// Where a message names the setting: `capture.jack.device` or, from a flag, `-D/--device`.
    var deviceKey = "device"
    var serverKey = "server"
    var clientNameKey = "client-name"

    /// The server as a message names it.
    var serverLabel: String { server.isEmpty ? "the default JACK server" : "the JACK server \"\(server)\"" }

    /// The settings with the keys a message should name, from the plugin context.
    func `in`(_ context: PluginContext) -> JACKSettings {
        var copy = self
        copy.deviceKey = context.key(JACKKeys.device(role))
        copy.serverKey = context.key(JACKKeys.server)
        copy.clientNameKey = context.key(JACKKeys.clientName)
        return copy
    }
}
#endif
