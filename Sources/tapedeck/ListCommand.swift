import ArgumentParser
import Foundation
import TapedeckApp
import TapedeckCore

struct ListCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "List sessions and their takes: id, name, duration, format, size, date and state.")

    @OptionGroup var global: GlobalOptions

    @Argument(help: "Only this session (name or id).")
    var session: String?

    @Flag(help: "Print JSON.")
    var json = false

    @MainActor
    mutating func run() async throws {
        try await reportingErrors {
            let studio = try await global.makeStudio()
            var sessions = studio.store.sessions
            if let session {
                guard case .session(let s) = try studio.store.resolve(session) else {
                    throw TapedeckError(.invalidArgument, "\"\(session)\" is a take, not a session. Use `tapedeck show \(session)`.")
                }
                sessions = [s]
            }
            let storage = studio.store.storage
            let model = sessions.map { s in
                SessionJSON(id: s.id, shortID: s.shortID, name: s.name, createdAt: s.createdAt,
                            takes: s.takes.map { TakeJSON($0, session: s, url: try? storage.audioURL(for: $0)) })
            }
            if json { return try Terminal.printJSON(model) }
            if model.isEmpty { print("No sessions yet. Record one with `tapedeck record`.") }
            for s in model {
                print("\(s.name)  [\(s.shortID)]  \(s.takes.count) take\(s.takes.count == 1 ? "" : "s"), created \(Terminal.date(s.createdAt))")
                for t in s.takes {
                    let format = "\(t.format.sampleRate) Hz \(t.format.channels) ch \(t.format.sampleFormat)"
                    let size = t.bytes.map(Terminal.bytes) ?? "missing"
                    let overruns = t.overruns > 0 ? "  \(Terminal.counted(t.overruns, "overrun"))" : ""
                    print("  \(t.shortID)  \(t.name)  \(Terminal.clock(t.seconds))  \(format)  \(t.encoding)  \(size)  \(Terminal.date(t.createdAt))  \(t.state)\(overruns)")
                }
            }
        }
    }
}
