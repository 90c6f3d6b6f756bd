#if PipeWire
import CPipeWireStream
import Foundation
public import TapedeckCore

/// A PipeWire stream linked to one node, on a connection of its own: the device of a ring
/// stream. Owned by the device thread that opened it, which alone calls its members and runs
/// PipeWire's loop for the connection's events (``dispatchEvents()``). The stream's process
/// callback runs on PipeWire's data thread (real time), in C, copying between PipeWire's buffers
/// and the ring; the daemon going away, the stream failing or the node removed closes the ring.
public final class PipeWireLink: RingDevice {
    let connection: PipeWireConnection
    let node: PipeWireConnection.Node
    let format: AudioFormat
    let ring: DeviceRing
    var handle: OpaquePointer { connection.handle }
    var settings: PipeWireBackend { connection.settings }

    /// How long the session manager may take to link a new stream.
    static let linkNanos: UInt64 = 5_000_000_000

    /// Connects, finds the node, opens the stream in `format` (F32 samples at the take's rate and
    /// channel positions; PipeWire converts from and to the node's) and waits until it runs.
    /// - Thread: the device thread. Blocks for a few round trips and the linking (at most 5 s).
    /// - Throws: `.deviceUnavailable` (no daemon, no such node, not linked).
    init(settings: PipeWireBackend, format: AudioFormat, ring: DeviceRing) throws {
        let connection = try PipeWireConnection(settings: settings)
        var ready = false
        defer { if !ready { connection.close() } }
        self.connection = connection
        node = try connection.target()
        self.format = format
        self.ring = ring
        let speakers = format.layout.speakers
        let positions: [Int32]? = speakers.count == format.channels ? speakers.map { Int32($0.rawValue) } : nil
        let direction = settings.role == .capture ? Int32(TAPEDECK_PW_CAPTURE) : Int32(TAPEDECK_PW_PLAYBACK)
        let result = positions.withOptionalBuffer { positions in
            tapedeck_pw_stream_open(connection.handle, direction, settings.nodeName, node.label, node.serial.isEmpty ? node.name : node.serial, node.id,
                                    settings.role == .capture && node.isSink ? 1 : 0,
                                    UInt32(format.sampleRate), positions, ring.handle)
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
                throw TapedeckError(.deviceUnavailable, "PipeWire refused the stream for \(node.label): \(String(cString: tapedeck_pw_stream_error(connection.handle))). Try another format (-r, -c) or node (\(settings.section.deviceKey)).")
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

    public var eventFD: Int32 { tapedeck_pw_loop_fd(handle) }

    /// Runs the connection's pending events (state changes, the registry, errors) without waiting.
    public func dispatchEvents() { connection.iterate(milliseconds: 0) }

    /// Nanoseconds of one graph cycle as the stream last saw it (a 1024-frame quantum until then).
    public var cycleNanos: UInt64 {
        let seen = UInt64(tapedeck_pw_stream_quantum(handle))
        let quantum = seen == 0 ? 1024 : seen
        return quantum * 1_000_000_000 / UInt64(format.sampleRate)
    }

    /// The error for a daemon, stream or node that went away.
    public func lostError(_ doing: String) -> TapedeckError {
        let reason = connection.lostReason
        return TapedeckError(.deviceLost,
            "PipeWire's stream for \(node.label) ended while \(doing) (\(reason.isEmpty ? "the daemon went away" : reason)). Check the node and the daemon (pw-cli ls Node), then retry.")
    }

    /// The error for a graph that ran no cycle for the stream for `RingStreams.stallNanos`.
    public func stallError(_ doing: String) -> TapedeckError {
        TapedeckError(.deviceLost, "PipeWire ran no cycle for the stream on \(node.label) for \(RingStreams.stallNanos / 1_000_000_000) s while \(doing) (the node suspended, unlinked, or the daemon hung). Check it with pw-top, then retry.")
    }

    /// What a log line says about the link.
    public var summary: String {
        let layout = format.layout.speakers.count == format.channels ? format.layout.description : "discrete"
        let graph = tapedeck_pw_graph_rate(handle)
        let stream = "stream f32 \(format.sampleRate) Hz \(format.channels) ch (\(layout))\(graph > 0 ? ", graph clock \(graph) Hz" : "")"
        return "PipeWire \(settings.role.rawValue) \(settings.role == .capture ? "from" : "to") \(node.label) [\(node.mediaClass)]: \(stream)"
    }

    /// Asks PipeWire to play out what it holds, runs the loop until it reports the stream
    /// drained, then waits one more cycle for the last buffer to reach the node. Blocks for a few
    /// cycles. - Throws: `.deviceLost` when the stream went away or stalled first.
    public func finishPlaying() throws {
        tapedeck_pw_stream_drain(handle)
        let deadline = DispatchTime.now().uptimeNanoseconds + RingStreams.stallNanos
        while tapedeck_pw_stream_drained(handle) == 0 {
            if connection.isLost { throw lostError("playing") }
            if DispatchTime.now().uptimeNanoseconds > deadline { throw stallError("playing") }
            connection.iterate(milliseconds: 50)
        }
        let settle = DispatchTime.now().uptimeNanoseconds + cycleNanos
        while DispatchTime.now().uptimeNanoseconds < settle, !connection.isLost {
            connection.iterate(milliseconds: Int32(max(1, cycleNanos / 1_000_000)))
        }
    }

    public func closingReport(lostFrames: UInt64) -> String? {
        guard lostFrames > 0 else { return nil }
        return "PipeWire capture: \(lostFrames) frame(s) the graph never delivered (filled with silence)."
    }

    /// Destroys the stream (its callback has stopped when this returns) and disconnects.
    public func close() { connection.close() }
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
