import ArgumentParser
import Foundation
import TapedeckApp
import TapedeckCore

struct DeleteCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete",
        abstract: "Delete a session (with all its takes) or a take, audio included.",
        usage: "tapedeck delete [<options>] <reference>",
        discussion: "Asks for confirmation on a terminal; elsewhere --yes is required.")

    @Argument(help: "SESSION, SESSION/TAKE, a short id, or `last`.", completion: TakeCompletion.kind(.both))
    var reference: String

    @Flag(name: .shortAndLong, help: "Delete without asking.")
    var yes = false

    @OptionGroup var global: GlobalOptions

    @MainActor
    mutating func run() async throws {
        try await reportingErrors {
            let studio = try await global.makeStudio()
            let target = try studio.store.resolve(reference)
            let takes: [Take] = switch target {
            case .session(let s): s.takes
            case .take(let t, _): [t]
            }
            let storage = studio.store.storage
            let bytes = takes.reduce(Int64(0)) { sum, t in
                var info = stat()
                guard let url = try? storage.audioURL(for: t), stat(url.path, &info) == 0 else { return sum }
                return sum + Int64(info.st_size)
            }
            let amount = "\(Terminal.clock(takes.reduce(0) { $0 + $1.seconds })), \(Terminal.bytes(bytes))"
            let what: String = switch target {
            case .session(let s): "session \"\(s.name)\" and its \(Terminal.counted(s.takes.count, "take")) (\(amount))"
            case .take(let t, let s): "take \"\(s.name)/\(t.name)\" (\(amount))"
            }
            if !yes {
                guard Terminal.stdinIsTerminal else {
                    throw TapedeckError(.confirmationRequired, "Refusing to delete \(what) without confirmation. Add --yes to delete it.")
                }
                Terminal.writeStderr(Terminal.safe("Delete \(what), audio included? [y/N] "))
                guard let answer = readLine(), ["y", "yes"].contains(answer.lowercased()) else {
                    print("Nothing was deleted.")
                    return
                }
            }
            try await studio.store.delete(target)
            let waveforms = studio.makeWaveforms()
            for t in takes { waveforms.forget(t.id) }
            print("Deleted \(what).")
        }
    }
}
