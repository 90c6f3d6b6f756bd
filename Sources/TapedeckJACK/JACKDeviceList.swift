#if JACK
import CJACK
import CJACKStream
import TapedeckCore

/// `tapedeck devices` for JACK: one entry per client with audio ports (`system`, another
/// program), with its capture ports (outputs: what it records from) and playback ports (inputs),
/// the server's rate and buffer size; the client with physical ports is the default. The same
/// entry for both directions, since the same name is what `device` takes for either. Runs on the
/// calling thread; a few round trips.
enum JACKDeviceList {
    static func list(settings: JACKBackend) throws -> [AudioDevice] {
        var status: Int32 = 0
        guard let raw = tapedeck_jack_client_open(settings.server.isEmpty ? nil : settings.server, "tapedeck-devices", &status) else {
            throw JACKPorts.openError(status, settings: settings)
        }
        let client = OpaquePointer(raw)
        defer { jack_client_close(client) }
        let own = String(cString: jack_get_client_name(client))
        let physical = Set(JACKPorts.names(client, pattern: nil, flags: UInt(JackPortIsPhysical.rawValue)))
        var order: [String] = []
        var ports: [String: (capture: [String], playback: [String])] = [:]
        for role in [DeviceRole.capture, .playback] {
            for port in JACKPorts.names(client, pattern: nil, flags: JACKPorts.flags(role)) {
                guard let colon = port.firstIndex(of: ":"), String(port[..<colon]) != own else { continue }
                let owner = String(port[..<colon])
                if ports[owner] == nil { order.append(owner) }
                if role == .capture { ports[owner, default: ([], [])].capture.append(port) } else { ports[owner, default: ([], [])].playback.append(port) }
            }
        }
        let facts = ["sampleRate": "\(jack_get_sample_rate(client))", "bufferFrames": "\(jack_get_buffer_size(client))"]
        return order.map { owner in
            let (capture, playback) = ports[owner]!
            let isPhysical = (capture + playback).contains { physical.contains($0) }
            let counts = [capture.isEmpty ? nil : "\(capture.count) capture", playback.isEmpty ? nil : "\(playback.count) playback"]
                .compactMap { $0 }.joined(separator: ", ")
            var details = facts
            if !capture.isEmpty { details["capturePorts"] = capture.joined(separator: ", ") }
            if !playback.isEmpty { details["playbackPorts"] = playback.joined(separator: ", ") }
            return AudioDevice(name: owner, description: "\(owner): \(counts) port(s)\(isPhysical ? ", physical" : "")",
                               canCapture: !capture.isEmpty, canPlay: !playback.isEmpty, isDefault: isPhysical, details: details)
        }
    }
}
#endif
