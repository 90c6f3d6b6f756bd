#if PipeWire
import CPipeWireStream
import Foundation
import TapedeckCore

/// A connection to a PipeWire daemon on a loop that the thread which made it iterates itself:
/// the audio nodes and default nodes as they were at connection, and at most one stream. Owned
/// by one thread (the device thread for a stream); nothing of PipeWire's calls back on another.
final class PipeWireConnection {
    /// An audio node of the graph, as the registry announced it.
    struct Node {
        var id: UInt32
        var name: String
        var description: String
        var mediaClass: String
        var serial: String
        var properties: [String: String]
        /// Channel positions of its input ports (what it plays) and output ports (what it
        /// records; a sink's monitor ports), in port order: `FL`, `FR`, `AUX0`…
        var inputs: [String] = []
        var outputs: [String] = []

        /// The positions a direction sees: a sink's inputs for playback, outputs otherwise.
        func positions(_ role: DeviceRole) -> [String] { role == .playback ? inputs : outputs }

        var isSink: Bool { mediaClass.hasPrefix("Audio/Sink") }
        var isSource: Bool { mediaClass.hasPrefix("Audio/Source") }
        var isDuplex: Bool { mediaClass.hasPrefix("Audio/Duplex") }
        /// Whether a capture stream can take its audio (a sink: what it plays).
        var canCapture: Bool { isSource || isDuplex || isSink }
        var canPlay: Bool { isSink || isDuplex }
        func allows(_ role: DeviceRole) -> Bool { role == .capture ? canCapture : canPlay }
        /// How a message names it: `"alsa_output.usb…" (serial 42)`.
        var label: String { "\"\(name)\" (serial \(serial))" }
    }

    let handle: OpaquePointer
    let settings: PipeWireBackend
    let nodes: [Node]
    let defaultSource: String
    let defaultSink: String
    private var closed = false

    /// How long connecting and each later wait for the daemon may take.
    static let timeoutMilliseconds: Int32 = 3_000

    /// Connects and reads the registry's audio nodes and the default nodes.
    /// - Thread: the thread that will use the connection. Blocks for two round trips (bounded by 3 s).
    /// - Throws: `.deviceUnavailable` naming the daemon when none answers.
    init(settings: PipeWireBackend) throws {
        var error: Int32 = 0
        guard let handle = tapedeck_pw_connect(settings.remote.isEmpty ? nil : settings.remote, Self.timeoutMilliseconds, &error) else {
            throw Self.connectError(-error, settings: settings)
        }
        self.handle = handle
        self.settings = settings
        var nodes: [Node] = []
        for i in 0..<tapedeck_pw_node_count(handle) {
            func property(_ key: String) -> String? { tapedeck_pw_node_property(handle, i, key).map { String(cString: $0) } }
            var properties: [String: String] = [:]
            // The registry announces a node with a few keys only (node.name, node.description,
            // node.nick, media.class, object.serial…); its format is not among them.
            for key in ["node.nick"] {
                properties[key] = property(key)
            }
            let name = property("node.name") ?? ""
            nodes.append(Node(id: tapedeck_pw_node_id(handle, i), name: name,
                              description: property("node.description") ?? property("node.nick") ?? name,
                              mediaClass: property("media.class") ?? "", serial: property("object.serial") ?? "",
                              properties: properties))
        }
        for i in 0..<tapedeck_pw_port_count(handle) {
            func property(_ key: String) -> String? { tapedeck_pw_port_property(handle, i, key).map { String(cString: $0) } }
            guard let node = property("node.id").flatMap(UInt32.init), let index = nodes.firstIndex(where: { $0.id == node }) else { continue }
            let input = property("port.direction") == "in"
            let position = property("audio.channel") ?? "AUX\(input ? nodes[index].inputs.count : nodes[index].outputs.count)"
            if input { nodes[index].inputs.append(position) } else { nodes[index].outputs.append(position) }
        }
        self.nodes = nodes
        defaultSource = String(cString: tapedeck_pw_default_node(handle, Int32(TAPEDECK_PW_CAPTURE)))
        defaultSink = String(cString: tapedeck_pw_default_node(handle, Int32(TAPEDECK_PW_PLAYBACK)))
    }

    /// Where the daemon's socket is, as a message names it.
    static func socketPath(_ settings: PipeWireBackend) -> String {
        let environment = ProcessInfo.processInfo.environment
        let name = settings.remote.isEmpty ? (environment["PIPEWIRE_REMOTE"].flatMap { $0.isEmpty ? nil : $0 } ?? "pipewire-0") : settings.remote
        if name.hasPrefix("/") { return name }
        // Where libpipewire looks: $PIPEWIRE_RUNTIME_DIR, else $XDG_RUNTIME_DIR.
        for key in ["PIPEWIRE_RUNTIME_DIR", "XDG_RUNTIME_DIR"] {
            if let folder = environment[key], !folder.isEmpty { return folder + "/" + name }
        }
        return "$XDG_RUNTIME_DIR/\(name) (XDG_RUNTIME_DIR is not set: log in through a session, or set it)"
    }

    static func connectError(_ errno: Int32, settings: PipeWireBackend) -> TapedeckError {
        let other = "choose another \(settings.role.rawValue) backend (`tapedeck backends` lists them)"
        if errno == ETIMEDOUT {
            return TapedeckError(.deviceUnavailable, "\(settings.daemonSubject) at \(socketPath(settings)) did not answer within \(timeoutMilliseconds / 1000) s. Check that it is not stopped or hung (pw-cli info 0), or \(other).")
        }
        let why = switch errno {
        case ENOENT, EHOSTDOWN: "no socket there"
        case EPIPE: "it closed the connection at once"
        case ECONNREFUSED: "nothing listens on the socket"
        case EACCES, EPERM: "this user may not open the socket: it belongs to another user's session"
        default: String(cString: strerror(errno))
        }
        return TapedeckError(.deviceUnavailable,
            "No PipeWire daemon answers at \(socketPath(settings)) (\(why)). Start it (systemctl --user start pipewire wireplumber), name another with \(settings.section.key(PipeWireBackend.remote)), or \(other).")
    }

    /// The node `settings.device` names: by object.serial (digits) or node.name; the default
    /// source or sink when empty.
    /// - Throws: `.deviceUnavailable` naming the nodes there are.
    func target() throws -> Node {
        let role = settings.role
        var wanted = settings.section.device.trimmingCharacters(in: .whitespaces)
        if wanted.isEmpty {
            wanted = role == .capture ? defaultSource : defaultSink
            guard !wanted.isEmpty else {
                throw TapedeckError(.deviceUnavailable, "\(settings.daemonSubject) names no default \(role == .capture ? "source" : "sink") (a session manager such as WirePlumber sets one). Name a node with \(settings.section.deviceKey)\(alternatives(role)).")
            }
        }
        let found = wanted.allSatisfy(\.isNumber) ? nodes.first { $0.serial == wanted } ?? nodes.first { $0.name == wanted }
                                                  : nodes.first { $0.name == wanted }
        guard let node = found else {
            throw TapedeckError(.deviceUnavailable, "No PipeWire node \"\(wanted)\" (\(settings.section.deviceKey)) on \(settings.daemonLabel)\(alternatives(role)).")
        }
        guard node.allows(role) else {
            throw TapedeckError(.deviceUnavailable, "The PipeWire node \(node.label) is a node of class \(node.mediaClass): nothing to \(role == .capture ? "record from" : "play to"). Name another with \(settings.section.deviceKey)\(alternatives(role)).")
        }
        return node
    }

    private func alternatives(_ role: DeviceRole) -> String {
        let names = nodes.filter { $0.allows(role) }.map(\.name)
        return names.isEmpty ? "; it has no audio \(role == .capture ? "source" : "sink") at all" : ". Nodes there are: \(names.joined(separator: ", ")) (`tapedeck devices` lists them)"
    }

    var isLost: Bool { tapedeck_pw_is_lost(handle) != 0 }
    var lostReason: String { String(cString: tapedeck_pw_lost_reason(handle)) }

    /// Runs the loop once, waiting up to `milliseconds` for an event (the stream's process
    /// callback runs here). - Thread: the connection's.
    func iterate(milliseconds: Int32) {
        _ = tapedeck_pw_iterate(handle, milliseconds)
    }

    /// Disconnects. - Thread: the connection's. Never blocks for long.
    func close() {
        guard !closed else { return }
        closed = true
        tapedeck_pw_disconnect(handle)
    }

    deinit { close() }
}
#endif
