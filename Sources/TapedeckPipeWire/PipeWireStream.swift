#if PipeWire
import CPipeWireStream
import Foundation
import TapedeckCore

/// A PipeWire stream linked to one node, on a connection of its own: what a capture or a
/// playback stream drives. Owned by the device thread that opened it, which also runs PipeWire's
/// loop (``PipeWireConnection/iterate(milliseconds:)``): the stream's process callback runs
/// there, in C, copying between PipeWire's buffers and a ring allocated here.
final class PipeWireLink {
    let connection: PipeWireConnection
    let node: PipeWireConnection.Node
    let format: AudioFormat
    let ringFrames: Int
    var handle: OpaquePointer { connection.handle }
    var settings: PipeWireSettings { connection.settings }

    /// How long the graph may run no cycle for the stream before it counts as lost.
    static let stallNanos: UInt64 = 5_000_000_000
    /// How long the session manager may take to link a new stream.
    static let linkNanos: UInt64 = 5_000_000_000

    /// Connects, finds the node, opens the stream in `format` (F32 samples at the take's rate and
    /// channel positions; PipeWire converts from and to the node's) and waits until it runs.
    /// - Thread: the device thread. Blocks for a few round trips and the linking (at most 5 s).
    /// - Throws: `.deviceUnavailable` (no daemon, no such node, not linked).
    init(settings: PipeWireSettings, format: AudioFormat, ringFrames: Int) throws {
        let connection = try PipeWireConnection(settings: settings)
        var ready = false
        defer { if !ready { connection.close() } }
        self.connection = connection
        node = try connection.target()
        self.format = format
        self.ringFrames = ringFrames
        let speakers = format.layout.speakers
        let positions: [Int32]? = speakers.count == format.channels ? speakers.map { Int32($0.rawValue) } : nil
        let direction = settings.role == .capture ? Int32(TAPEDECK_PW_CAPTURE) : Int32(TAPEDECK_PW_PLAYBACK)
        let result = positions.withOptionalBuffer { positions in
            tapedeck_pw_stream_open(connection.handle, direction, settings.nodeName, node.label, node.serial.isEmpty ? node.name : node.serial, node.id,
                                    settings.role == .capture && node.isSink ? 1 : 0,
                                    UInt32(format.sampleRate), UInt32(format.channels), positions, UInt32(ringFrames))
        }
        guard result == 0 else {
            throw TapedeckError(.deviceUnavailable, "Could not open a PipeWire stream for \(node.label): \(String(cString: strerror(-result))). Check the daemon's log (journalctl --user -u pipewire).")
        }
        let deadline = DispatchTime.now().uptimeNanoseconds + Self.linkNanos
        while true {
            let state = tapedeck_pw_stream_state(connection.handle)
            // Streaming and linked: an unlinked stream runs too (on a fallback driver, its audio
            // going nowhere) until the session manager links it.
            if state == 3 && tapedeck_pw_stream_links(connection.handle) > 0 { break }  // PW_STREAM_STATE_STREAMING
            if connection.isLost {
                throw TapedeckError(.deviceUnavailable, "PipeWire's stream for \(node.label) ended while opening (\(connection.lostReason)). Check the node and the daemon (pw-cli ls Node), then retry.")
            }
            if state == -1 {
                throw TapedeckError(.deviceUnavailable, "PipeWire refused the stream for \(node.label): \(String(cString: tapedeck_pw_stream_error(connection.handle))). Try another format (-r, -c) or node (\(settings.deviceKey)).")
            }
            if DispatchTime.now().uptimeNanoseconds > deadline, tapedeck_pw_stream_links(connection.handle) > 0 {
                throw TapedeckError(.deviceUnavailable, "PipeWire linked Tapedeck's stream to \(node.label), but the graph did not start it within \(Self.linkNanos / 1_000_000_000) s. Check the node with pw-top (suspended, or driven by a stalled device), then retry.")
            }
            if DispatchTime.now().uptimeNanoseconds > deadline {
                throw TapedeckError(.deviceUnavailable, "PipeWire did not link Tapedeck's stream to \(node.label) within \(Self.linkNanos / 1_000_000_000) s. A session manager links streams: check that WirePlumber runs (systemctl --user status wireplumber), and that the node is not busy in exclusive use.")
            }
            connection.iterate(milliseconds: 50)
        }
        ready = true
    }

    var isLost: Bool { connection.isLost }
    var cycles: UInt64 { tapedeck_pw_stream_cycles(handle) }
    var available: Int { Int(tapedeck_pw_stream_available(handle)) }
    /// Nanoseconds of one graph cycle as the stream last saw it (a 1024-frame quantum until then).
    var cycleNanos: UInt64 {
        let seen = UInt64(tapedeck_pw_stream_quantum(handle))
        let quantum = seen == 0 ? 1024 : seen
        return quantum * 1_000_000_000 / UInt64(format.sampleRate)
    }

    /// The error for a daemon, stream or node that went away.
    func lostError(_ doing: String) -> TapedeckError {
        let reason = connection.lostReason
        return TapedeckError(.deviceLost,
            "PipeWire's stream for \(node.label) ended while \(doing) (\(reason.isEmpty ? "the daemon went away" : reason)). Check the node and the daemon (pw-cli ls Node), then retry.")
    }

    /// The error for a graph that ran no cycle for the stream for ``stallNanos``.
    func stallError(_ doing: String) -> TapedeckError {
        TapedeckError(.deviceLost, "PipeWire ran no cycle for the stream on \(node.label) for \(Self.stallNanos / 1_000_000_000) s while \(doing) (the node suspended, unlinked, or the daemon hung). Check it with pw-top, then retry.")
    }

    /// What a log line says about the link.
    var summary: String {
        let layout = format.layout.speakers.count == format.channels ? format.layout.description : "discrete"
        let graph = tapedeck_pw_graph_rate(handle)
        return "\(node.label) [\(node.mediaClass)]: stream f32 \(format.sampleRate) Hz \(format.channels) ch (\(layout))\(graph > 0 ? ", graph clock \(graph) Hz" : "")"
    }

    func close() { connection.close() }
}

extension Optional where Wrapped == [Int32] {
    func withOptionalBuffer<R>(_ body: (UnsafePointer<Int32>?) -> R) -> R {
        switch self {
        case .none: return body(nil)
        case .some(let array): return array.withUnsafeBufferPointer { body($0.baseAddress) }
        }
    }
}
#endif
