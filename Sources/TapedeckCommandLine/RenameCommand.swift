import ArgumentParser
import TapedeckApp
import TapedeckCore

struct RenameCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rename",
        abstract: "Rename a session or a take (display names only; files keep their names).",
        usage: "tapedeck rename [<options>] <reference> <new-name>")

    @Argument(help: "SESSION, SESSION/TAKE, a short id, or `last`.", completion: TakeCompletion.kind(.both))
    var reference: String

    @Argument(help: "The new name: any Unicode text.")
    var newName: String

    @OptionGroup var global: GlobalOptions

    @MainActor
    mutating func run() async throws {
        try await reportingErrors {
            let studio = try await global.makeStudio()
            let target = try studio.store.resolve(reference)
            try await studio.store.rename(target, to: newName)
            switch target {
            case .session(let s): print("Renamed session \"\(s.name)\" to \"\(newName)\".")
            case .take(let t, let s): print("Renamed take \"\(s.name)/\(t.name)\" to \"\(newName)\".")
            }
        }
    }
}
