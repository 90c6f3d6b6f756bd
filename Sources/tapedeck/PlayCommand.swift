import ArgumentParser
import Foundation
import TapedeckApp
import TapedeckAssembly
import TapedeckCore

struct PlayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "play",
        abstract: "Play a take through the configured playback backend.")

    @OptionGroup var global: GlobalOptions

    @Argument(help: "SESSION/TAKE, a short id from `tapedeck list`, or `last`.", completion: TakeCompletion.kind(.takes))
    var take: String

    @Option(name: [.customShort("D"), .long],
            help: "The device to play to (the playback backend's device setting; names from `tapedeck devices`).", completion: DeviceCompletion.kind(capture: false))
    var device: String?

    @Option(name: [.customShort("s"), .long], help: ArgumentHelp("Start here: 80, 1:20, 1m20s (any form -d takes).", valueName: "time"))
    var start: String?

    @Option(name: [.customShort("e"), .long], help: ArgumentHelp("Stop here (same forms).", valueName: "time"))
    var end: String?

    @MainActor
    mutating func run() async throws {
        try await reportingErrors {
            let studio = try await global.makeStudio(
                overrides: device.map { [PluginOverride(section: "playback", key: "device", value: $0, option: "-D/--device")] } ?? [], detecting: [.playback])
            guard case .take(let t, let session) = try studio.store.resolve(take) else {
                throw TapedeckError(.invalidArgument, "\"\(take)\" is a session. Name a take as SESSION/TAKE or by its id.")
            }
            let rate = Double(t.format.sampleRate)
            let from = try start.map { Int64((try DurationText.seconds($0, flag: "-s/--start", allowingZero: true) * rate).rounded()) } ?? 0
            let to = try end.map { Int64((try DurationText.seconds($0, flag: "-e/--end") * rate).rounded()) }
            if t.frames == 0 {
                throw TapedeckError(.notFound, "Take \"\(session.name)/\(t.name)\" has no audio to play (0:00.000).")
            }
            if let start, from >= t.frames {
                throw TapedeckError(.invalidArgument, "-s/--start \(start): the take is only \(Terminal.clock(t.seconds)) long.")
            }
            if let to, to <= from {
                throw TapedeckError(.invalidArgument, "-e/--end \(end ?? ""): the end must come after the start (\(Terminal.clock(Double(from) / rate))).")
            }
            let player = try studio.makePlayer()
            let signals = try SignalTrap(signals: [SIGINT, SIGTERM, SIGHUP]) { _ in Task { @MainActor in player.stop() } }
            defer { signals.cancel() }
            let progress = Terminal.showsProgress ? Task { @MainActor in
                while !Task.isCancelled {
                    Terminal.status("▶ \(Terminal.clock(t.format.seconds(forFrames: from + player.playedFrames))) / \(Terminal.clock(t.seconds))  \(session.name)/\(t.name)")
                    try? await Task.sleep(for: .milliseconds(100))
                }
            } : nil
            let result = try await player.play(t, from: from, to: to)
            progress?.cancel()
            if progress != nil { Terminal.endStatus() }
            if Terminal.stdoutIsTerminal {
                print("Played \(session.name)/\(t.name): \(Terminal.clock(t.format.seconds(forFrames: result.frames)))\(result.stopped ? " (stopped)" : "")")
            }
        }
    }
}
