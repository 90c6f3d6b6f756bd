#if PipeWire
import CPipeWireStream
public import TapedeckCore

/// The PipeWire backend for one role (`capture.backend: pipewire` or `playback.backend:
/// pipewire`): its settings, declared once for both sections (`capture.pipewire.*`,
/// `playback.pipewire.*`) and read, and what is PipeWire's own (the daemon, nodes, opening a
/// stream); the ring stream does the rest. A value holding settings only; safe on any thread.
public struct PipeWireBackend: RingBackend {
    /// The linked libpipewire, e.g. `libpipewire 0.3.65`. - Thread: any; never blocks.
    public static var library: String { "libpipewire " + String(cString: tapedeck_pw_library_version()) }
    public static let name = "pipewire"
    public static let summaries = (capture: "Capture from a PipeWire node (a source, or what a sink plays), natively: any rate and layout, converted by PipeWire.",
                                   playback: "Play to a PipeWire sink natively: any rate and layout, converted by PipeWire.")

    /// What `device` names by role; the daemon's socket and the stream's name in the graph.
    public static let deviceHelp = (
        capture: "The node to record from, by node.name or object.serial as `pw-record --target` takes it (`tapedeck devices` lists them): empty for the default source. A sink records what it plays (its monitor).",
        playback: "The node to play to, by node.name or object.serial as `pw-play --target` takes it: empty for the default sink.")
    static let remote = Setting<String>("remote",
        help: "The PipeWire daemon's socket name: empty for the default ($PIPEWIRE_REMOTE, else pipewire-0 in $XDG_RUNTIME_DIR).")
    static let nodeName = Setting<String>("node-name", default: "tapedeck",
        help: "The name Tapedeck's stream has in the graph (pw-top, pw-link, qpwgraph show it).")
    public static let settings = [remote.declaration, nodeName.declaration]

    /// The section, and PipeWire's own two values.
    public let section: DeviceSection
    let remote: String
    let nodeName: String

    /// - Thread: any. Never blocks.
    public init(_ section: DeviceSection) {
        (self.section, remote, nodeName) = (section, section[Self.remote], section[Self.nodeName])
    }

    var role: DeviceRole { section.role }
    /// The daemon as a message names it, and the same at the start of a sentence.
    var daemonLabel: String { remote.isEmpty ? "the PipeWire daemon" : "the PipeWire daemon \"\(remote)\"" }
    var daemonSubject: String { "T" + daemonLabel.dropFirst() }

    /// Opens a stream linked to the node `device` names, in `format` exactly: PipeWire converts
    /// the node's rate, sample format and channel positions to the stream's.
    /// - Thread: the device thread. Blocks for a few round trips and the linking (at most 5 s).
    /// - Throws: `.deviceUnavailable` (no daemon, no such node, not linked).
    public func open(format: AudioFormat, ring: DeviceRing) throws -> PipeWireLink {
        try PipeWireLink(settings: self, format: format, ring: ring)
    }

    /// The daemon's nodes for this role (capture: sources, duplex nodes and sinks, whose
    /// recording is what they play; playback: sinks and duplex nodes), the default marked.
    /// - Thread: any that may block. Blocks for two round trips to the daemon.
    /// - Throws: `.deviceUnavailable` naming the socket when no daemon answers.
    public func devices() throws -> [AudioDevice] { try PipeWireDeviceList.list(settings: self) }
}
#endif
