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
        usage: "tapedeck play [<options>] <take>",
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

    @Option(name: [.customShort("s"), .long], help: ArgumentHelp("Start here: seconds (80), a clock (1:20) or units (1m20s).", valueName: "time"))
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
            let help = keys == nil ? "" : "  space pause, ←→ seek, q stop"
            let last = (to ?? t.frames) - 1
            if !Terminal.showsProgress && !Terminal.quiet.load(ordering: .relaxed) {
                // Off a terminal, one line on stderr, as aplay says what it plays.
                let part = from > 0 || to != nil ? " from \(Terminal.clock(t.format.seconds(forFrames: from))) to \(Terminal.clock(t.format.seconds(forFrames: to ?? t.frames)))" : ""
                Terminal.writeStderr(Terminal.safe("tapedeck: Playing \(name)\(part) (\(Terminal.clock(t.format.seconds(forFrames: (to ?? t.frames) - from)))): \(t.format.sampleRate) Hz, \(Terminal.counted(t.format.channels, "channel")), \(t.format.sampleFormat.rawValue).") + "\n")
            }
            var position = from
            var stopped = false
            playing: while true {
                // What the keys asked while the last part played (or since): seek, then pause.
                if let asked = control.take() {
                    position = min(max(0, position + Int64(asked.seek * rate)), last)
                    if asked.pause {
                        Terminal.status("❚❚ \(Terminal.clock(t.format.seconds(forFrames: position))) / \(Terminal.clock(t.seconds))  \(name)  paused: space resumes, q stops")
                        guard await control.waitForResume() else {
                            stopped = true
                            break playing
                        }
                        continue playing
                    }
                }
                let at = position
                let progress = Terminal.showsProgress ? Task { @MainActor in
                    while !Task.isCancelled {
                        Terminal.status("▶ \(Terminal.clock(t.format.seconds(forFrames: at + player.playedFrames))) / \(Terminal.clock(t.seconds))  \(name)\(help)")
                        try? await Task.sleep(for: .milliseconds(100))
                    }
                } : nil
                let result = try await player.play(t, from: position, to: to)
                progress?.cancel()
                position += result.frames
                // Stopped by a key that seeks or pauses: go on from the new place.
                guard result.stopped, !control.quitting else {
                    stopped = result.stopped
                    break playing
                }
            }
            if Terminal.showsProgress { Terminal.endStatus() }
            // Where playback left off, and on what: "on null (pulse)", the sink and its backend.
            let backend = studio.configuration.playback.plugin ?? ""
            let sink = player.deviceName.map { $0.hasPrefix(backend) || backend.isEmpty ? " on \($0)" : " on \($0) (\(backend))" } ?? (backend.isEmpty ? "" : " on \(backend)")
            let at = Terminal.clock(t.format.seconds(forFrames: position))
            if stopped {
                print("Played \(name)\(sink), stopped at \(at) of \(Terminal.clock(t.seconds)).")
            } else {
                print("Played \(name)\(sink) to \(at)\(position >= t.frames ? " (the end)" : "").")
            }
        }
    }
}

/// What the keys asked of a playing take: the player is stopped, then the command plays again
/// from the new place (a seek) or waits for the key that resumes (a pause). Seeks add up, so
/// every press counts however fast they come. - Thread: main actor.
@MainActor
final class PlayControl {
    enum Action { case pause, seek(Double) }
    /// Seconds to move by, and whether to pause, since the command last looked.
    private var seekBy: Double = 0
    private var pause = false
    private var asked = false
    private(set) var quitting = false
    private var resume: CheckedContinuation<Bool, Never>?

    /// Stops playback for `action`; while paused, space resumes and a seek moves and resumes.
    func ask(_ action: Action, _ player: TakePlayer) {
        switch action {
        case .seek(let seconds): seekBy += seconds
        case .pause: pause.toggle()
        }
        asked = true
        if let resume {
            self.resume = nil
            pause = false
            resume.resume(returning: true)
            return
        }
        player.stop()
    }

    /// Ctrl-C, SIGTERM, q: stops for good, paused or not.
    func quit(_ player: TakePlayer) {
        quitting = true
        player.stop()
        resume?.resume(returning: false)
        resume = nil
    }

    /// What was asked since the last look (`nil`: nothing, or a stop for good), and forgets it.
    func take() -> (seek: Double, pause: Bool)? {
        guard asked, !quitting else { return nil }
        defer { (seekBy, pause, asked) = (0, false, false) }
        return (seekBy, pause)
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
