#if PipeWire
public import TapedeckCore

/// The settings of a PipeWire plugin section, `capture.pipewire.*` and `playback.pipewire.*`:
/// the same keys in both, with help for the direction. Plain values; safe on any thread.
enum PipeWireKeys {
    static let remote = Setting<String>("remote",
        help: "The PipeWire daemon's socket name: empty for the default ($PIPEWIRE_REMOTE, else pipewire-0 in $XDG_RUNTIME_DIR).")
    static let nodeName = Setting<String>("node-name", default: "tapedeck",
        help: "The name Tapedeck's stream has in the graph (pw-top, pw-link, qpwgraph show it).")

    static func device(_ role: PipeWireSettings.Role) -> Setting<String> {
        role == .capture
            ? Setting("device", help: "The node to record from, by node.name or object.serial as `pw-record --target` takes it (`tapedeck devices` lists them): empty for the default source. A sink records what it plays (its monitor).")
            : Setting("device", help: "The node to play to, by node.name or object.serial as `pw-play --target` takes it: empty for the default sink.")
    }

    static func declarations(_ role: PipeWireSettings.Role) -> [SettingDeclaration] {
        [remote.declaration, nodeName.declaration, device(role).declaration]
    }

    static func read(_ settings: PluginSettings, role: PipeWireSettings.Role) -> PipeWireSettings {
        PipeWireSettings(role: role, remote: settings[remote], nodeName: settings[nodeName], device: settings[device(role)])
    }
}

/// `capture.pipewire.*`, read. A plain value; safe on any thread.
public struct PipeWireCaptureSettings: SettingsGroup {
    public static let declarations = PipeWireKeys.declarations(.capture)
    let pipewire: PipeWireSettings
    public init(_ settings: PluginSettings) { pipewire = PipeWireKeys.read(settings, role: .capture) }
}

/// `playback.pipewire.*`, read. A plain value; safe on any thread.
public struct PipeWirePlaybackSettings: SettingsGroup {
    public static let declarations = PipeWireKeys.declarations(.playback)
    let pipewire: PipeWireSettings
    public init(_ settings: PluginSettings) { pipewire = PipeWireKeys.read(settings, role: .playback) }
}

/// One direction's settings, read. A plain value; safe on any thread.
struct PipeWireSettings: Sendable, Hashable {
    enum Role: Sendable { case capture, playback }
    var role: Role
    var remote: String
    var nodeName: String
    var device: String
    /// Where a message names the setting: `capture.pipewire.device` or, from a flag, `-D/--device`.
    var deviceKey = "device"
    var remoteKey = "remote"
    var nodeNameKey = "node-name"

    /// The daemon as a message names it.
    var daemonLabel: String { remote.isEmpty ? "the PipeWire daemon" : "the PipeWire daemon \"\(remote)\"" }
    /// The same at the start of a sentence.
    var daemonSubject: String { "T" + daemonLabel.dropFirst() }
    var direction: String { role == .capture ? "capture" : "playback" }

    /// The settings with the keys a message should name, from the plugin context.
    func `in`(_ context: PluginContext) -> PipeWireSettings {
        var copy = self
        copy.deviceKey = context.key(PipeWireKeys.device(role))
        copy.remoteKey = context.key(PipeWireKeys.remote)
        copy.nodeNameKey = context.key(PipeWireKeys.nodeName)
        return copy
    }
}
#endif
