#if JACK
import CJACK
import CJACKStream
import Foundation
import Logging
public import TapedeckCore

/// One JACK client with one port per channel, activated and connected: the device of a ring
/// stream. Owned by the device thread that opened it, which alone calls its members.
///
/// JACK's process thread (real time) only copies between the ports and the ring (`CJACKStream`
/// over `CRingStream`): it declares the cycles the server skipped as lost, sets the ring's clock
/// and counts the cycle. A server shutting the client down closes the ring.
public final class JACKClient: RingDevice {
    let handle: OpaquePointer
    let settings: JACKBackend
    let sampleRate: Int
    let bufferFrames: Int
    let channels: Int
    let ring: DeviceRing
    private var closed = false
    /// The ports connected to each channel, in order.
    let connections: [[String]]
    let name: String

    /// Opens the client, checks the rate, activates it and connects the ports.
    /// - Thread: the device thread. Blocks for a few round trips to the server.
    /// - Throws: `.deviceUnavailable` (no server, no such port) or `.unsupportedFormat` (another
    ///   rate than the server's; JACK does not convert rates).
    init(settings: JACKBackend, format: AudioFormat, ring: DeviceRing) throws {
        // jackd2 names a client's socket after the client, in the server's folder: a client named
        // like its server takes the server's socket away when it closes, and the server can no
        // longer be reached (measured with jackd2 1.9.21).
        let serverName = settings.server.isEmpty ? (ProcessInfo.processInfo.environment["JACK_DEFAULT_SERVER"].flatMap { $0.isEmpty ? nil : $0 } ?? "default") : settings.server
        guard settings.clientName != serverName else {
            throw TapedeckError(.configuration, "\(settings.section.key(JACKBackend.clientName)) is \"\(settings.clientName)\", the name of the JACK server itself; a client of that name would cut the server off when it closes. Choose another name (the default is tapedeck).")
        }
        var status: Int32 = 0
        guard let handle = tapedeck_jack_stream_open(settings.server.isEmpty ? nil : settings.server, settings.clientName,
                                                     settings.role == .capture ? 1 : 0, ring.handle, &status) else {
            if status == 0 {
                throw TapedeckError(.deviceUnavailable, "Could not register \(format.channels) JACK ports with \(settings.serverLabel). Check the server's port limit (jackd -p) and try again.")
            }
            throw JACKPorts.openError(status, settings: settings)
        }
        var ready = false
        defer { if !ready { tapedeck_jack_stream_close(handle) } }
        self.handle = handle
        self.settings = settings
        self.sampleRate = Int(tapedeck_jack_stream_sample_rate(handle))
        self.bufferFrames = Int(tapedeck_jack_stream_buffer_size(handle))
        self.channels = format.channels
        self.ring = ring
        self.name = String(cString: tapedeck_jack_stream_client_name(handle))
        guard sampleRate == format.sampleRate else {
            let fix = settings.role == .capture
                ? "Record at its rate: -r \(sampleRate) (or format.sample-rate: \(sampleRate))."
                : "Export the take at its rate (tapedeck export --rate \(sampleRate)) and play that, or play through a backend that converts rates (`tapedeck backends` lists them)."
            throw TapedeckError(.unsupportedFormat, "\(settings.serverLabel.capitalizedFirst) runs at \(sampleRate) Hz and JACK does not convert rates; this is \(format.sampleRate) Hz. \(fix)")
        }
        guard tapedeck_jack_stream_activate(handle) == 0 else {
            throw TapedeckError(.deviceUnavailable, "\(settings.serverLabel.capitalizedFirst) refused to activate the client \(name). Check the server's log, and that it runs.")
        }
        let client = OpaquePointer(tapedeck_jack_stream_client(handle))!
        let ports = try JACKPorts.resolve(settings, client: client, ownClient: name)
        let assigned = try JACKPorts.assign(ports, channels: format.channels, settings: settings)
        for (channel, others) in assigned.enumerated() {
            for other in others {
                let result = tapedeck_jack_stream_connect(handle, Int32(channel), other)
                guard result == 0 || result == EEXIST else {
                    throw TapedeckError(.deviceUnavailable, "Could not connect \(other) with \(String(cString: tapedeck_jack_stream_port_name(handle, Int32(channel)))) (JACK error \(result)). Check that the port still exists (jack_lsp).")
                }
            }
        }
        connections = assigned
        ready = true
    }

    func portName(_ channel: Int) -> String {
        String(cString: tapedeck_jack_stream_port_name(handle, Int32(channel)))
    }

    /// Nanoseconds of one JACK cycle.
    public var cycleNanos: UInt64 { UInt64(bufferFrames) * 1_000_000_000 / UInt64(sampleRate) }

    var xruns: Int { Int(tapedeck_jack_stream_xruns(handle)) }

    /// The error for a server that shut the client down.
    public func lostError(_ doing: String) -> TapedeckError {
        let reason = String(cString: tapedeck_jack_stream_shutdown_reason(handle))
        return TapedeckError(.deviceLost,
            "\(settings.serverLabel.capitalizedFirst) went away while \(doing) (\(reason.isEmpty ? "it stopped, or dropped the client" : reason)). Start it again and retry.")
    }

    public func stallError(_ doing: String) -> TapedeckError {
        TapedeckError(.deviceLost, "\(settings.serverLabel.capitalizedFirst) ran no cycle for \(RingStreams.stallNanos / 1_000_000_000) s while \(doing) (stopped in a debugger, or hung). Restart it and retry.")
    }

    /// The ports connected, in channel order ("system:capture_1, system:capture_2"); `nil` when
    /// none are (the user connects them).
    public var deviceName: String? {
        let all = connections.flatMap { $0 }
        guard !all.isEmpty else { return nil }
        var seen = Set<String>()
        return all.filter { seen.insert($0).inserted }.joined(separator: ", ")
    }

    /// How the connections read in a log line.
    var connectionSummary: String {
        if connections.allSatisfy(\.isEmpty) { return "no ports (connect \(portName(0))… yourself)" }
        return connections.enumerated().map { "\($0.element.joined(separator: "+"))→\(portName($0.offset))" }.joined(separator: ", ")
    }

    public var summary: String {
        let ports = settings.role == .capture ? "port(s) from" : "port(s) to"
        return "JACK \(settings.role.rawValue) on \(settings.serverLabel) as \(name): \(sampleRate) Hz, buffer \(bufferFrames) frames (\(String(format: "%.1f", Double(cycleNanos) / 1e6)) ms), \(channels) \(ports) \(connectionSummary)"
    }

    /// Waits for two more cycles: the last one's audio handed to the ports and on to the server's outputs.
    public func finishPlaying() throws {
        guard ring.waitCycles(2, cycleNanos: cycleNanos) else { throw lostError("playing") }
    }

    public func closingReport(lostFrames: UInt64) -> String? {
        let xruns = self.xruns
        guard xruns > 0 || lostFrames > 0 else { return nil }
        if settings.role == .playback { return "JACK playback: \(xruns) xrun(s) reported by the server." }
        return "JACK capture: \(xruns) xrun(s) reported by the server; \(lostFrames) frame(s) not delivered (filled with silence)."
    }

    /// Deactivates and closes the client. Never blocks for long.
    public func close() {
        guard !closed else { return }
        closed = true
        tapedeck_jack_stream_close(handle)
    }

    deinit { close() }
}
#endif
