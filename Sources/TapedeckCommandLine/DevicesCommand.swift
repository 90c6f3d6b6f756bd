import ArgumentParser
import TapedeckAssembly
import TapedeckApp
import TapedeckCore

struct DevicesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "devices",
        abstract: "List the capture and playback devices each audio backend can see.",
        usage: "tapedeck devices [<options>]",
        discussion: """
            The names shown are what capture.BACKEND.device / playback.BACKEND.device accept in the config. \
            Endpoints only: cards, sound servers, their sources and sinks. ALSA's converter and effect plugins \
            (rate converters, speex, up- and downmixers) are listed with --all, as `arecord -L` lists them. \
            A sound server that is not running gets one line; `tapedeck devices --backend NAME` says why. \
            Network streams announced on the local network (RTP, by SAP) are listed only with --backend rtp, \
            which listens for two seconds.
            """ + HelpExamples.text([
            "tapedeck devices": "Every backend's devices; the default marked *.",
            "tapedeck devices --backend pulse": "One backend, with why it cannot answer if it cannot.",
            "tapedeck devices --backend rtp": "The RTP (AES67) streams announced on the local network.",
            "tapedeck record -D NAME 10s": "Then record from one of them.",
        ]))

    @Option(help: "Only this backend (e.g. alsa, pulse, null).")
    var backend: String?

    @Flag(help: "Also list ALSA's converter and effect plugins, which are not endpoints (as arecord -L).")
    var all = false

    @Flag(help: "Print JSON.")
    var json = false

    @OptionGroup var global: GlobalOptions

    struct DeviceJSON: Encodable {
        var kind = "device"
        var schema = JSONSchema.version
        var backend: String
        var name: String
        var description: String
        var capture: Bool
        var playback: Bool
        var isDefault: Bool
        var details: [String: String]
        var isProcessingStage: Bool
    }

    @MainActor
    mutating func run() async throws {
        try await reportingErrors {
            let studio = try global.makeStudioWithoutLibrary()
            let names = Set(studio.catalog.capture.map(\.name) + studio.catalog.playback.map(\.name)).sorted()
            if let backend, !names.contains(backend) {
                throw TapedeckError(.invalidArgument, "Unknown backend \"\(backend)\". Backends in this build: \(names.joined(separator: ", ")).")
            }
            var devices: [DeviceJSON] = []
            var failures: [TapedeckError] = []
            var absent: [String] = []
            var hidden = 0
            // A backend whose listing waits on the network (SAP discovery) is listed only when named.
            let onRequest = Set(studio.catalog.capture.filter(\.listsOnlyWhenNamed).map(\.name))
            for name in names where backend == name || (backend == nil && !onRequest.contains(name)) {
                do {
                    var merged: [String: AudioDevice] = [:]
                    for d in try studio.devices(ofBackend: name) {
                        if var existing = merged[d.name] {
                            existing.canCapture = existing.canCapture || d.canCapture
                            existing.canPlay = existing.canPlay || d.canPlay
                            existing.isDefault = existing.isDefault || d.isDefault
                            merged[d.name] = existing
                        } else {
                            merged[d.name] = d
                        }
                    }
                    let shown = merged.values.filter { all || !$0.isProcessingStage }
                    hidden += merged.count - shown.count
                    devices += shown.sorted { $0.name < $1.name }.map {
                        DeviceJSON(backend: name, name: $0.name, description: $0.description, capture: $0.canCapture,
                                   playback: $0.canPlay, isDefault: $0.isDefault, details: $0.details, isProcessingStage: $0.isProcessingStage)
                    }
                } catch let e as TapedeckError {
                    // One backend's audio system being down must not hide the others.
                    // Asked for all of them, a server that is not running is one line; the whole
                    // message comes with --backend NAME.
                    failures.append(e)
                    if backend != nil { throw e }
                    absent.append(e.code == .deviceUnavailable ? "\(name): not running (`tapedeck devices --backend \(name)` says why)"
                                                               : "\(name): \(e.message)")
                }
            }
            if json {
                for line in absent { Terminal.printError(line) }
                return try Terminal.printJSON(devices)
            }
            for name in names where backend == nil || backend == name {
                let mine = devices.filter { $0.backend == name }
                guard !mine.isEmpty else { continue }
                print("\(name):")
                for d in mine {
                    let roles = [d.capture ? "capture" : nil, d.playback ? "playback" : nil].compactMap { $0 }.joined(separator: "+")
                    let extra = d.details.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: ", ")
                    print("  \(d.isDefault ? "*" : " ") \(d.name)  [\(roles)]  \(d.description)\(extra.isEmpty ? "" : "  (\(extra))")")
                }
            }
            for line in absent { print(line) }
            if hidden > 0 { print("(\(Terminal.counted(hidden, "ALSA plugin")) not shown: converters and effects; `tapedeck devices --all` lists them.)") }
        }
    }
}
