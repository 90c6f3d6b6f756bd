#if PipeWire
public import Logging
public import TapedeckCore

/// The PipeWire backend for one role (`capture.backend: pipewire` or `playback.backend:
/// pipewire`): its settings, declared once for both sections (`capture.pipewire.*`,
/// `playback.pipewire.*`), and what is PipeWire's own (the daemon, nodes, opening a stream); the
/// ring stream does the rest. A value holding settings only; safe on any thread.
public struct PipeWireBackend: RingBackend {
    public let name = "pipewire"
    public let role: DeviceRole
    public let logger: Logger
    let settings: PipeWireSettings

    static let remote = Setting<String>("remote",
        help: "The PipeWire daemon's socket name: empty for the default ($PIPEWIRE_REMOTE, else pipewire-0 in $XDG_RUNTIME_DIR).")
    static let nodeName = Setting<String>("node-name", default: "tapedeck",
        help: "The name Tapedeck's stream has in the graph (pw-top, pw-link, qpwgraph show it).")

    static func device(_ role: DeviceRole) -> Setting<String> {
        role == .capture
            ? Setting("device", help: "The node to record from, by node.name or object.serial as `pw-record --target` takes it (`tapedeck devices` lists them): empty for the default source. A sink records what it plays (its monitor).")
            : Setting("device", help: "The node to play to, by node.name or object.serial as `pw-play --target` takes it: empty for the default sink.")
    }

    /// - Thread: any. Never blocks.
    public static func declarations(_ role: DeviceRole) -> [SettingDeclaration] {
        [remote.declaration, nodeName.declaration, device(role).declaration]
    }

    /// - Thread: any. Never blocks.
    public init(_ values: PluginSettings, role: DeviceRole, context: PluginContext) {
        self.role = role
        logger = context.logger
        settings = PipeWireSettings(role: role, remote: values[Self.remote], nodeName: values[Self.nodeName], device: values[Self.device(role)],
                                    deviceKey: context.key(Self.device(role)), remoteKey: context.key(Self.remote),
                                    nodeNameKey: context.key(Self.nodeName))
    }

    /// The daemon's nodes for this role (capture: sources, duplex nodes and sinks, whose
    /// recording is what they play; playback: sinks and duplex nodes), the default marked.
    /// - Thread: any that may block. Blocks for two round trips to the daemon.
    /// - Throws: `.deviceUnavailable` naming the socket when no daemon answers.
    public func devices() throws -> [AudioDevice] {
        try PipeWireDeviceList.list(settings: settings)
    }

    /// Opens a stream linked to the node `device` names, in `format` exactly: PipeWire converts
    /// the node's rate, sample format and channel positions to the stream's.
    /// - Thread: the device thread. Blocks for a few round trips and the linking (at most 5 s).
    /// - Throws: `.deviceUnavailable` (no daemon, no such node, not linked).
    public func open(format: AudioFormat, ring: DeviceRing) throws -> PipeWireLink {
        try PipeWireLink(settings: settings, format: format, ring: ring)
    }
}

/// One role's settings, read, with the keys a message names (`capture.pipewire.device` or, from
/// a flag, `-D/--device`). A plain value; safe on any thread.
struct PipeWireSettings: Sendable, Hashable {
    var role: DeviceRole
    var remote: String
    var nodeName: String
    var device: String
    var deviceKey = "device"
    var remoteKey = "remote"
    var nodeNameKey = "node-name"

    /// The daemon as a message names it.
    var daemonLabel: String { remote.isEmpty ? "the PipeWire daemon" : "the PipeWire daemon \"\(remote)\"" }
    /// The same at the start of a sentence.
    var daemonSubject: String { "T" + daemonLabel.dropFirst() }
    var direction: String { role.rawValue }
}
#endif
