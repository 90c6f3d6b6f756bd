#if PipeWire
import TapedeckCore

/// `tapedeck devices` for PipeWire: the audio nodes a direction can use, named by node.name
/// (what `device` takes, as `pw-record --target` does) with their object.serial, media class,
/// channels and positions; the session manager's default source or sink is the default. A sink
/// is listed for capture too: recording it records what it plays. Runs on the calling thread;
/// two round trips.
enum PipeWireDeviceList {
    static func list(settings: PipeWireBackend) throws -> [AudioDevice] {
        let connection = try PipeWireConnection(settings: settings)
        defer { connection.close() }
        let defaultName = settings.role == .capture ? connection.defaultSource : connection.defaultSink
        return connection.nodes.filter { $0.allows(settings.role) }.map { node in
            var details = ["serial": node.serial, "mediaClass": node.mediaClass]
            let positions = node.positions(settings.role)
            if !positions.isEmpty {
                details["channels"] = "\(positions.count)"
                details["positions"] = positions.joined(separator: " ")
            }
            if let nick = node.properties["node.nick"], nick != node.name, nick != node.description { details["nick"] = nick }
            let monitor = settings.role == .capture && node.isSink
            if monitor { details["records"] = "what the sink plays (its monitor)" }
            return AudioDevice(name: node.name, description: node.description + (monitor ? " (what it plays)" : ""),
                               canCapture: settings.role == .capture, canPlay: settings.role == .playback,
                               isDefault: node.name == defaultName, details: details)
        }
    }
}
#endif
