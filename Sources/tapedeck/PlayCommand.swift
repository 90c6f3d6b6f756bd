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

    @Argument(help: "SESSION/TAKE or a short id from `tapedeck list`.")
    var take: String

    @Option(name: [.customShort("D"), .long],
            help: "The device to play to (the playback backend's device setting; names from `tapedeck devices`).")
    var device: String?

    @MainActor
    mutating func run() async throws {
        try await reportingErrors {
            let studio = try await global.makeStudio(
                overrides: device.map { [PluginOverride(section: "playback", key: "device", value: $0, option: "-D/--device")] } ?? [], detecting: [.playback])
            guard case .take(let t, let session) = try studio.store.resolve(take) else {
                throw TapedeckError(.invalidArgument, "\"\(take)\" is a session. Name a take as SESSION/TAKE or by its id.")
            }
            let player = try studio.makePlayer()
            let signals = try SignalTrap(signals: [SIGINT, SIGTERM, SIGHUP]) { _ in Task { @MainActor in player.stop() } }
            defer { signals.cancel() }
            let progress = Terminal.showsProgress ? Task { @MainActor in
                while !Task.isCancelled {
                    Terminal.status("▶ \(session.name)/\(t.name)  \(Terminal.clock(t.format.seconds(forFrames: player.playedFrames))) / \(Terminal.clock(t.seconds))")
                    try? await Task.sleep(for: .milliseconds(100))
                }
            } : nil
            let result = try await player.play(t)
            progress?.cancel()
            if progress != nil { Terminal.endStatus() }
            if Terminal.stdoutIsTerminal {
                print("Played \(session.name)/\(t.name): \(Terminal.clock(t.format.seconds(forFrames: result.frames)))\(result.stopped ? " (stopped)" : "")")
            }
        }
    }
}
