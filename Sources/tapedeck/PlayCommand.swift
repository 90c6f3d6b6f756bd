import ArgumentParser
import Foundation
import Synchronization
import TapedeckApp
import TapedeckAssembly
import TapedeckCore

struct PlayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "play",
        abstract: "Play a take through the configured playback backend.",
        discussion: "On a terminal: space pauses and resumes, the Left and Right arrow keys seek 5 s, Up and Down a minute, and q stops." + HelpExamples.text([
            "tapedeck play last": "The take recorded last.",
            "tapedeck play \"Interview/Take 2\" -s 1:20": "From 1:20 on.",
            "tapedeck play e083 -D pulse": "Through another device (names: tapedeck devices).",
        ]))

    @Argument(help: "SESSION/TAKE, a short id from `tapedeck list`, or `last`.", completion: TakeCompletion.kind(.takes))
    var take: String

    @Option(name: [.customShort("D"), .long],
            help: "The device to play to (the playback backend's device setting; names from `tapedeck devices`).", completion: DeviceCompletion.kind(capture: false))
    var device: String?

    @Option(name: [.customShort("s"), .long], help: ArgumentHelp("Start here: 80, 1:20, 1m20s (any form -d takes).", valueName: "time"))
    var start: String?

    @Option(name: [.customShort("e"), .long], help: ArgumentHelp("Stop here (same forms).", valueName: "time"))
    var end: String?

    @OptionGroup var global: GlobalOptions

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
            let control = PlayControl()
            let signals = try SignalTrap(signals: [SIGINT, SIGTERM, SIGHUP]) { _ in Task { @MainActor in control.quit(player) } }
            defer { signals.cancel() }
            // Keys on a terminal: space pauses and resumes, the arrows seek (5 s, 1 min), q stops.
            let keys = Terminal.stdinIsTerminal && Terminal.showsProgress ? PlayControl.keys(control, player: player) : nil
            defer { keys?.restore() }
            let name = "\(session.name)/\(t.name)"
            let help = keys == nil ? "" : "  space pause, ←→ seek"
            var position = from
            var played: Int64 = 0
            var stopped = false
            while true {
                let at = position
                let progress = Terminal.showsProgress ? Task { @MainActor in
                    while !Task.isCancelled {
                        Terminal.status("▶ \(Terminal.clock(t.format.seconds(forFrames: at + player.playedFrames))) / \(Terminal.clock(t.seconds))  \(name)\(help)")
                        try? await Task.sleep(for: .milliseconds(100))
                    }
                } : nil
                let result = try await player.play(t, from: position, to: to)
                progress?.cancel()
                played += result.frames
                position += result.frames
                guard result.stopped, let action = control.take() else {
                    stopped = result.stopped
                    break
                }
                switch action {
                case .seek(let seconds):
                    position = min(max(0, position + Int64(seconds * rate)), (to ?? t.frames) - 1)
                case .pause:
                    Terminal.status("❚❚ \(Terminal.clock(t.format.seconds(forFrames: position))) / \(Terminal.clock(t.seconds))  \(name)  paused: space resumes")
                    guard await control.waitForResume() else { stopped = true; break }
                    if case .seek(let seconds) = control.take() {
                        position = min(max(0, position + Int64(seconds * rate)), (to ?? t.frames) - 1)
                    }
                }
                if stopped { break }
            }
            if Terminal.showsProgress { Terminal.endStatus() }
            let sink = player.deviceName.map { " on \($0)" } ?? ""
            let result = (frames: played, stopped: stopped)
            if Terminal.stdoutIsTerminal {
                print("Played \(session.name)/\(t.name)\(sink): \(Terminal.clock(t.format.seconds(forFrames: result.frames)))\(result.stopped ? " (stopped)" : "")")
            }
        }
    }
}

/// What the keys asked of a playing take: the player is stopped, then the command plays again
/// from the new place (a seek) or waits for the key that resumes (a pause). - Thread: main actor.
@MainActor
final class PlayControl {
    enum Action { case pause, seek(Double) }
    private var pending: Action?
    private var quitting = false
    private var resume: CheckedContinuation<Bool, Never>?

    /// Stops playback for `action` (the latest one wins).
    func ask(_ action: Action, _ player: TakePlayer) {
        if let resume {
            // Paused: space resumes, a seek moves the paused place and resumes there.
            self.resume = nil
            if case .seek = action { pending = action }
            resume.resume(returning: true)
            return
        }
        pending = action
        player.stop()
    }

    /// Ctrl-C, SIGTERM, q: stops for good, paused or not.
    func quit(_ player: TakePlayer) {
        quitting = true
        pending = nil
        player.stop()
        resume?.resume(returning: false)
        resume = nil
    }

    /// The action that stopped playback, or `nil` for a stop for good.
    func take() -> Action? {
        defer { pending = nil }
        return quitting ? nil : pending
    }

    /// Suspends until a key resumes (`true`) or a quit (`false`).
    func waitForResume() async -> Bool {
        if quitting { return false }
        return await withCheckedContinuation { resume = $0 }
    }

    /// The terminal's keys: space or p pauses, ← → seek 5 s, ↑ ↓ seek 1 min, q quits.
    static func keys(_ control: PlayControl, player: TakePlayer) -> TerminalKeys? {
        let escape = Mutex<Int>(0)
        return TerminalKeys { key in
            // Arrows arrive as ESC [ A…D.
            let step = escape.withLock { state -> Int in
                switch (state, key) {
                case (0, 0x1B): state = 1; return -1
                case (1, UInt8(ascii: "[")), (1, UInt8(ascii: "O")): state = 2; return -1
                case (2, _): state = 0; return Int(key)
                default: state = 0; return 0
                }
            }
            if step == -1 { return }
            let action: Action? = switch (step, key) {
            case (Int(UInt8(ascii: "C")), _): .seek(5)
            case (Int(UInt8(ascii: "D")), _): .seek(-5)
            case (Int(UInt8(ascii: "A")), _): .seek(60)
            case (Int(UInt8(ascii: "B")), _): .seek(-60)
            case (0, UInt8(ascii: " ")), (0, UInt8(ascii: "p")): .pause
            default: nil
            }
            let quit = step == 0 && (key == UInt8(ascii: "q") || key == UInt8(ascii: "Q"))
            Task { @MainActor in
                if quit { control.quit(player) } else if let action { control.ask(action, player) }
            }
        }
    }
}
