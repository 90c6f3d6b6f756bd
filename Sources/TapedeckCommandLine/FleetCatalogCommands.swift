import ArgumentParser
import Foundation
import TapedeckApp
import TapedeckAssembly
import TapedeckCore

extension FleetCommand {
    /// Runs `body` with the fleet catalog of the config (refused without one), shut down after.
    @MainActor
    static func withCatalog<T>(_ studio: Studio, for command: String, _ body: (any FleetIndex) async throws -> T) async throws -> T {
        guard let catalog = try studio.makeFleetIndex(environment: ProcessInfo.processInfo.environment) else {
            throw TapedeckError(.configuration, "fleet \(command) works on the fleet catalog, and none is configured\(studio.configPlace). Set sync.catalog.postgres in the sync: section (postgres://USER@HOST/DATABASE), or give --set sync.catalog.postgres=URL; `tapedeck config example` shows the keys.")
        }
        do {
            try await catalog.prepare()
            let result = try await body(catalog)
            await catalog.shutdown()
            return result
        } catch {
            await catalog.shutdown()
            throw error
        }
    }
}

/// `tapedeck fleet status`: each running recorder's last heartbeat in the catalog.
struct FleetStatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Every machine's running record, serve and push --watch, as their heartbeats in the fleet catalog say.",
        usage: "tapedeck fleet status [<options>]",
        discussion: "A machine not heard from for two of its heartbeat intervals (by the catalog's clock) is STALE: the command stopped, hangs, or cannot reach the catalog. A recorder whose clock is a second or more off the catalog's says so (clock 5 s ahead). Exit status 1 when one is stale.")

    @Flag(help: "Print the heartbeats as JSON.")
    var json = false

    @OptionGroup var global: GlobalOptions

    @MainActor
    mutating func run() async throws {
        let json = self.json
        try await reportingErrors {
            let studio = try global.makeStudioWithoutLibrary()
            let beats = try await FleetCommand.withCatalog(studio, for: "status") { try await $0.heartbeats() }
            let now = Date()
            if json {
                try Terminal.printJSON(beats.map { FleetStatusJSON($0, now: now) })
            } else if beats.isEmpty {
                print("No recorder has reported to the fleet catalog yet: a running `tapedeck record` or `push --watch` with sync.catalog set does.")
            } else {
                for beat in beats { print(Self.line(beat, now: now)) }
            }
            if beats.contains(where: { $0.isStale(at: now) }) { throw ExitCode(ExitStatus.problemsFound) }
        }
    }

    static func line(_ b: RecorderHeartbeat, now: Date) -> String {
        let ago = b.secondsAgo(at: now)
        var parts = ["\(b.machine) \(b.role)", b.isStale(at: now) ? "STALE" : b.state.rawValue]
        parts += b.summary.map(Terminal.safe)
        if let disk = b.diskSecondsLeft { parts.append("disk \(RetentionClock.duration(disk))") }
        parts.append("seen \(RetentionClock.duration(ago)) ago")
        return parts.joined(separator: "  ")
    }
}

/// One heartbeat as `fleet status --json` prints it.
struct FleetStatusJSON: Encodable {
    var kind = "fleet-status"
    var schema = JSONSchema.version
    var heartbeat: RecorderHeartbeat
    var stale: Bool
    var secondsAgo: Double

    init(_ beat: RecorderHeartbeat, now: Date) {
        heartbeat = beat
        stale = beat.isStale(at: now)
        secondsAgo = beat.secondsAgo(at: now)
    }
}

/// `tapedeck fleet reindex`: the catalog made again from the remote's manifests.
struct FleetReindexCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reindex",
        abstract: "Make the fleet catalog hold exactly the remote's takes again, from their manifests.",
        usage: "tapedeck fleet reindex [<options>]",
        discussion: "The catalog is derived from the remote: this reads every manifest (16 at a time), adds or updates each take's entry, and removes entries whose take the remote no longer has. Run it again after an interruption: it picks up where it was. A take id the catalog holds with other audio is reported and left as it is (exit 73).")

    @OptionGroup var global: GlobalOptions

    @MainActor
    mutating func run() async throws {
        try await reportingErrors {
            try await FleetCommand.withRemote(global) { studio, reader, _ in
                try await FleetCommand.withCatalog(studio, for: "reindex") { catalog in
                    let (entries, problems, _) = try await reader.entries()
                    var conflicts: [FleetConflict] = []
                    for start in stride(from: 0, to: entries.count, by: 500) {
                        conflicts += try await catalog.upsert(entries[start..<min(start + 500, entries.count)].map(\.manifest))
                    }
                    let present = Set(entries.map(\.manifest.take.id))
                    let gone = try await catalog.takeIDs().keys.filter { !present.contains($0) }
                    if !gone.isEmpty { try await catalog.remove(takeIDs: Array(gone)) }
                    print("The fleet catalog at \(catalog.location) holds the \(Terminal.counted(entries.count - conflicts.count, "take")) of \(reader.remote.location)"
                          + (gone.isEmpty ? "." : "; \(Terminal.counted(gone.count, "entry", "entries")) without a take there were removed."))
                    for p in problems { Terminal.printError("\(p.key): \(p.reason)") }
                    for c in conflicts {
                        Terminal.printError("take \(c.takeID): the catalog holds it from \(c.machine) with other audio (SHA-256 \(c.held.prefix(12))…, the remote's \(c.offered.prefix(12))…); left as it is.")
                    }
                    if !conflicts.isEmpty { throw ExitCode(TapedeckError.Code.alreadyExists.exitStatus) }
                }
            }
        }
    }
}
