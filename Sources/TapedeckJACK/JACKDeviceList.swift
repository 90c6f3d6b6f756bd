#if JACK
import CJACK
import CJACKStream
import TapedeckCore

/// `tapedeck devices` for JACK: one entry per client that has audio ports of the direction
/// (`system`, another program), with its ports, the server's rate and buffer size; the client
/// with physical ports is the default. Runs on the calling thread; a few round trips.
enum JACKDeviceList {
    static func list(settings: JACKSettings) throws -> [AudioDevice] {
        var status: Int32 = 0
        guard let raw = tapedeck_jack_client_open(settings.server.isEmpty ? nil : settings.server, "tapedeck-devices", &status) else {
            throw JACKPorts.openError(status, settings: settings)
        }
        let client = OpaquePointer(raw)
        defer { jack_client_close(client) }
        let own = String(cString: jack_get_client_name(client))
        let rate = jack_get_sample_rate(client)
        let buffer = jack_get_buffer_size(client)
        let wanted = JACKPorts.flags(settings.role)
        let physical = Set(JACKPorts.names(client, pattern: nil, flags: wanted | UInt(JackPortIsPhysical.rawValue)))
        var order: [String] = []
        var ports: [String: [String]] = [:]
        for port in JACKPorts.names(client, pattern: nil, flags: wanted) {
            guard let colon = port.firstIndex(of: ":") else { continue }
            let owner = String(port[..<colon])
            guard owner != own else { continue }
            if ports[owner] == nil { order.append(owner) }
            ports[owner, default: []].append(port)
        }
        let capture = settings.role == .capture
        return order.map { owner in
            let list = ports[owner]!
            let isPhysical = list.contains { physical.contains($0) }
            return AudioDevice(
                name: owner,
                description: "\(owner): \(list.count) \(capture ? "capture" : "playback") port\(list.count == 1 ? "" : "s")\(isPhysical ? " (physical)" : "")",
                canCapture: capture, canPlay: !capture, isDefault: isPhysical,
                details: ["ports": list.joined(separator: ", "), "sample-rate": "\(rate)", "buffer-frames": "\(buffer)"])
        }
    }
}
#endif
