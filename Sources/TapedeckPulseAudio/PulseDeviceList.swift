#if PulseAudio
import CPulse
import TapedeckCore

/// Lists a server's sources and sinks through a short-lived connection.
enum PulseDeviceList {
    /// What the introspection callbacks collect. Written and read on the caller's thread (the
    /// callbacks run inside the connection's main loop iterations there).
    private final class Collected {
        var defaultSource = ""
        var defaultSink = ""
        var sources: [AudioDevice] = []
        var sinks: [AudioDevice] = []
        var userdata: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }
        static func from(_ p: UnsafeMutableRawPointer?) -> Collected? {
            p.map { Unmanaged<Collected>.fromOpaque($0).takeUnretainedValue() }
        }
    }

    /// The server's sources (capture; monitors included, with `monitorOf`) and sinks (playback),
    /// each with `sampleSpec` in its details and the server's defaults marked.
    /// - Thread: any thread that may block. Blocks for a few round trips (at most ~5 s each).
    /// - Throws: `.deviceUnavailable` naming the server when it cannot be reached.
    static func list(settings: PulseSettings) throws -> (sources: [AudioDevice], sinks: [AudioDevice]) {
        let connection = try PulseConnection(settings: settings)
        defer { connection.close() }
        let collected = Collected()
        let context = connection.context
        let server = pa_context_get_server_info(context, { _, info, userdata in
            guard let c = Collected.from(userdata) else { return }
            if let info = info?.pointee {
                c.defaultSink = info.default_sink_name.map { String(cString: $0) } ?? ""
                c.defaultSource = info.default_source_name.map { String(cString: $0) } ?? ""
            }
        }, collected.userdata)
        let sources = pa_context_get_source_info_list(context, { _, info, eol, userdata in
            guard let c = Collected.from(userdata) else { return }
            if eol == 0, let i = info?.pointee {
                var details = ["sampleSpec": PulseFormat.describe(i.sample_spec)]
                if let m = i.monitor_of_sink_name { details["monitorOf"] = String(cString: m) }
                c.sources.append(AudioDevice(name: i.name.map { String(cString: $0) } ?? "",
                                             description: i.description.map { String(cString: $0) } ?? "",
                                             canCapture: true, canPlay: false, isDefault: false, details: details))
            }
        }, collected.userdata)
        let sinks = pa_context_get_sink_info_list(context, { _, info, eol, userdata in
            guard let c = Collected.from(userdata) else { return }
            if eol == 0, let i = info?.pointee {
                var details = ["sampleSpec": PulseFormat.describe(i.sample_spec)]
                if let m = i.monitor_source_name { details["monitorSource"] = String(cString: m) }
                c.sinks.append(AudioDevice(name: i.name.map { String(cString: $0) } ?? "",
                                           description: i.description.map { String(cString: $0) } ?? "",
                                           canCapture: false, canPlay: true, isDefault: false, details: details))
            }
        }, collected.userdata)
        let ok = [server, sources, sinks].map { connection.finish($0) }.allSatisfy { $0 }
        let good = connection.contextIsGood
        let reason = connection.errorText()
        var result = (sources: collected.sources, sinks: collected.sinks)
        let (defaultSource, defaultSink) = (collected.defaultSource, collected.defaultSink)
        guard ok, good else {
            throw TapedeckError(.deviceUnavailable,
                "The PulseAudio server at \(settings.serverLabel) did not list its devices (\(good ? "timed out" : reason.lowercased())). Is it running? \(settings.serverAdvice).")
        }
        for i in result.sources.indices { result.sources[i].isDefault = result.sources[i].name == defaultSource }
        for i in result.sinks.indices { result.sinks[i].isDefault = result.sinks[i].name == defaultSink }
        return result
    }
}
#endif
