import ArgumentParser
import Foundation
import TapedeckApp
import TapedeckAssembly
import TapedeckCore
#if canImport(Glibc)
import Glibc
#endif

struct FleetCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fleet",
        abstract: "Every machine's takes on the configured remote: list them, pull them, check the remote.",
        discussion: "Only takes with a manifest count (push writes it last, after the audio is verified).",
        subcommands: [FleetListCommand.self, FleetSearchCommand.self, FleetStatusCommand.self, FleetPullCommand.self, FleetExportCommand.self, FleetDoctorCommand.self, FleetReindexCommand.self])

    /// Opens the library and the remote, runs `body`, and shuts the remote down whichever way it ends.
    @MainActor
    static func withRemote<T>(_ global: GlobalOptions, writing: Bool = false,
                              _ body: (Studio, FleetReader, PartialFiles) async throws -> T) async throws -> T {
        // The remote's settings and credentials are checked before the library is opened (or made).
        let studio = try global.makeStudioWithoutLibrary()
        let remote = try studio.makeRemote()
        let partials = PartialFiles()
        do {
            if writing { ErrorAdvice.current?.writingLibrary(studio) }
            try await studio.openLibrary(loadingSessions: true)
            let reader = studio.makeFleetReader(remote: remote, partials: partials)
            let result = try await body(studio, reader, partials)
            await remote.shutdown()
            return result
        } catch {
            await remote.shutdown()
            throw error
        }
    }
}

struct FleetListCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "List every machine's sessions and takes on the remote.",
        usage: "tapedeck fleet list [<options>]",
        discussion: "With a fleet catalog (sync.catalog) the list comes from it, at once; --remote reads every manifest on the remote instead, and checks that each take's audio is there.")

    @Option(name: .customLong("from"), help: "Only this machine's takes (its name on the remote).")
    var from: String?

    @Flag(help: "Read the remote's manifests even when a fleet catalog is configured (slower; checks the audio objects too).")
    var remote = false

    @Flag(help: "Print the takes (their manifests) as JSON.")
    var json = false

    @OptionGroup var global: GlobalOptions

    @MainActor
    mutating func run() async throws {
        let (from, json, remote) = (self.from, self.json, self.remote)
        try await reportingErrors {
            if !remote, let listed = try await Self.fromCatalog(global, machine: from) {
                try Self.show(listed.entries, json: json, from: from, location: listed.location, checked: false)
                return
            }
            try await FleetCommand.withRemote(global) { _, reader, _ in
                let (entries, problems, _) = try await reader.entries(machine: from)
                try Self.show(entries, json: json, from: from, location: reader.remote.location, checked: true)
                for p in problems { Terminal.printError("\(p.key): \(p.reason)") }
            }
        }
    }

    /// Every take the fleet catalog holds (of `machine`), in the remote listing's order; `nil`
    /// without a catalog.
    @MainActor
    static func fromCatalog(_ global: GlobalOptions, machine: String?) async throws -> (entries: [FleetReader.Entry], location: String)? {
        let studio = try global.makeStudioWithoutLibrary()
        guard studio.hasFleetCatalog else { return nil }
        do {
            return try await listCatalog(studio, machine: machine)
        } catch let error as TapedeckError where error.code == .remoteUnavailable {
            throw TapedeckError(.remoteUnavailable, error.message + " `tapedeck fleet list --remote` reads the remote instead.")
        }
    }

    @MainActor
    static func listCatalog(_ studio: Studio, machine: String?) async throws -> (entries: [FleetReader.Entry], location: String) {
        try await FleetCommand.withCatalog(studio, for: "list") { catalog in
            var manifests: [RemoteManifest] = []
            var query = FleetQuery(machine: machine, limit: 5_000)
            while true {
                let page = try await catalog.search(query)
                manifests += page.manifests
                if page.manifests.count < query.limit || manifests.count >= page.total { break }
                query.offset += page.manifests.count
            }
            let entries = manifests.map { FleetReader.Entry(manifest: $0, audioPresent: true) }.sorted { a, b in
                (a.manifest.machine, a.manifest.session.createdAt, a.manifest.session.id, a.manifest.take.number)
                    < (b.manifest.machine, b.manifest.session.createdAt, b.manifest.session.id, b.manifest.take.number)
            }
            return (entries, catalog.location)
        }
    }

    /// The takes, grouped by machine and session (or as JSON); `checked`: whether the audio
    /// objects were looked at (from the remote), else their presence is not claimed.
    static func show(_ entries: [FleetReader.Entry], json: Bool, from: String?, location: String, checked: Bool) throws {
        if json {
            try Terminal.printJSON(entries.map { FleetTakeJSON($0.manifest, audioPresent: checked ? $0.audioPresent : nil) })
            return
        }
        guard !entries.isEmpty else {
            print(from.map { "No takes from \($0) on \(location)." } ?? "No takes on \(location) yet. Run `tapedeck push` on a machine that has some.")
            return
        }
        var last = ""
        for e in entries {
            let m = e.manifest
            let group = "\(m.machine)/\(Terminal.safe(m.session.name)) [\(NameRules.shortID(of: m.session.id))]"
            if group != last {
                print(group)
                last = group
            }
            let missing = !checked || e.audioPresent ? "" : "  AUDIO MISSING (tapedeck fleet doctor)"
            print("  \(m.take.number). \(Terminal.safe(m.take.name)) [\(m.take.shortID)]  \(Terminal.clock(m.take.seconds))  \(Terminal.bytes(m.audio.size))  \(m.take.state.rawValue)\(missing)")
        }
    }
}

/// One take on the remote as `fleet list --json` prints it.
struct FleetTakeJSON: Encodable {
    var kind = "fleet-take"
    var schema = JSONSchema.version
    var machine: String
    var session: String
    var sessionID: String
    var take: String
    var takeID: String
    var number: Int
    var state: String
    var seconds: Double
    var key: String
    var size: Int64
    var sha256: String
    /// Whether the audio object is there (`fleet list`); absent where it was not looked at (`fleet search`).
    var audioPresent: Bool?
    var uploaded: Date

    init(_ e: FleetReader.Entry) {
        self.init(e.manifest, audioPresent: e.audioPresent)
    }

    init(_ m: RemoteManifest, audioPresent: Bool?) {
        machine = m.machine
        session = m.session.name
        sessionID = m.session.id
        take = m.take.name
        takeID = m.take.id
        number = m.take.number
        state = m.take.state.rawValue
        seconds = m.take.seconds
        key = m.audio.key
        size = m.audio.size
        sha256 = m.audio.sha256
        self.audioPresent = audioPresent
        uploaded = m.uploaded
    }
}

struct FleetPullCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pull",
        abstract: "Bring a session (or one take) from the remote into this library, verified.",
        usage: "tapedeck fleet pull [<options>] <path>",
        discussion: """
            Name it as `fleet list` shows it: MACHINE/SESSION or MACHINE/SESSION/TAKE, where SESSION \
            and TAKE are names or ids (the short ids in brackets). Each take is downloaded into the \
            library, its size and SHA-256 checked against its manifest, then kept byte for byte \
            with its notes, tags and markers. Takes already pulled are skipped.
            """)

    @Argument(help: "MACHINE/SESSION or MACHINE/SESSION/TAKE.")
    var path: String

    @Option(help: "The local session to pull into (made when missing); default: the session's own name.")
    var session: String?

    @OptionGroup var global: GlobalOptions

    @MainActor
    mutating func run() async throws {
        let (path, sessionName) = (self.path, self.session)
        try await reportingErrors {
            let parts = path.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
            guard (2...3).contains(parts.count), !parts.contains(where: \.isEmpty) else {
                throw TapedeckError(.invalidArgument, "\(path): name a session as MACHINE/SESSION or a take as MACHINE/SESSION/TAKE, as `tapedeck fleet list` shows them.")
            }
            try await FleetCommand.withRemote(global, writing: true) { studio, reader, partials in
                let (entries, _, _) = try await reader.entries(machine: parts[0])
                let chosen = try Self.choose(parts, from: entries)
                let name = sessionName ?? chosen[0].manifest.session.name
                let show = Terminal.showsProgress
                let work = Task { @MainActor in
                    try await reader.pull(chosen, into: name) { bytes in
                        if show { Terminal.status("Pulling… \(Terminal.bytes(bytes))") }
                    }
                }
                // A stop ends the download under way; what it wrote is removed, nothing is kept of it.
                let stop = try SignalTrap(signals: [SIGINT, SIGTERM, SIGHUP]) { _ in
                    partials.stop()
                    work.cancel()
                }
                defer { stop.cancel() }
                let session: Session?, made: [Take]
                do { (session, made) = try await work.value } catch is CancellationError {
                    if show { Terminal.endStatus() }
                    throw TapedeckError(.cancelled, "Stopped. The takes pulled before the stop are kept; run the pull again for the rest.")
                } catch {
                    if show { Terminal.endStatus() }
                    throw error
                }
                if show { Terminal.endStatus() }
                let into = Terminal.safe(session?.name ?? name)
                for take in made {
                    print("\(into)/\(Terminal.safe(take.name)) [\(take.shortID)]: pulled, SHA-256 checked")
                }
                let skipped = chosen.count - made.count
                if skipped > 0 { print("\(Terminal.counted(skipped, "take")) already in \(into), skipped.") }
                _ = studio
            }
        }
    }

    /// The entries `parts` (machine, session, take) names.
    static func choose(_ parts: [String], from entries: [FleetReader.Entry]) throws -> [FleetReader.Entry] {
        let machine = parts[0]
        guard !entries.isEmpty else {
            throw TapedeckError(.notFound, "No takes from \(machine) on the remote. `tapedeck fleet list` shows the machines that pushed.")
        }
        func matches(_ text: String, id: String, name: String) -> Bool {
            name == text || id == text || (text.count >= 4 && id.lowercased().hasPrefix(text.lowercased()))
        }
        let sessions = Dictionary(grouping: entries.filter { matches(parts[1], id: $0.manifest.session.id, name: $0.manifest.session.name) },
                                  by: { $0.manifest.session.id })
        guard let only = sessions.first else {
            throw TapedeckError(.notFound, "\(machine) has no session \"\(parts[1])\" on the remote. `tapedeck fleet list --from \(machine)` lists its sessions.")
        }
        guard sessions.count == 1 else {
            throw TapedeckError(.invalidArgument, "\(machine) has \(sessions.count) sessions named \"\(parts[1])\". Name one by its id: \(sessions.keys.sorted().map { NameRules.shortID(of: $0) }.joined(separator: ", ")).")
        }
        let takes = only.value.sorted { $0.manifest.take.number < $1.manifest.take.number }
        guard parts.count == 3 else { return takes }
        let picked = takes.filter { matches(parts[2], id: $0.manifest.take.id, name: $0.manifest.take.name) || String($0.manifest.take.number) == parts[2] }
        guard !picked.isEmpty else {
            throw TapedeckError(.notFound, "\(machine)/\(parts[1]) has no take \"\(parts[2])\" on the remote. `tapedeck fleet list --from \(machine)` lists its takes.")
        }
        guard picked.count == 1 else {
            throw TapedeckError(.invalidArgument, "\"\(parts[2])\" names \(picked.count) takes of \(machine)/\(parts[1]). Name one by its id: \(picked.map(\.manifest.take.shortID).joined(separator: ", ")).")
        }
        return picked
    }
}

struct FleetDoctorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "doctor",
        abstract: "Check the remote: manifests without audio, audio without a manifest, unreadable manifests, stale unfinished uploads, and the fleet catalog against it.",
        usage: "tapedeck fleet doctor [<options>]",
        discussion: """
            Audio without a manifest is an upload that has not finished (or never will). With \
            --repair, such audio and unfinished multipart uploads older than a day are removed \
            (the machine that sent them still has the take and sends it again at its next push); \
            nothing else is changed. Only keys Tapedeck could have written are looked at \
            (MACHINE/SESSION-ID/TAKE-ID.EXT, EXT json or an audio format of Tapedeck's), and \
            --repair removes only audio Tapedeck sent (it carries Tapedeck's mark): other \
            programs' objects are left alone, also with an empty sync.s3.prefix, and at most \
            counted. With a fleet catalog (sync.catalog), its entries are compared with the \
            remote's takes: entries without a take and takes without an entry are reported, and \
            --repair brings the catalog to the remote (as `fleet reindex` does). Exit status 0 \
            when nothing was found, 1 when problems remain.
            """)

    @Flag(help: "Remove audio Tapedeck sent that has no manifest, and unfinished uploads, older than a day.")
    var repair = false

    @Flag(help: "Print the findings as JSON.")
    var json = false

    @OptionGroup var global: GlobalOptions

    struct Finding: Encodable {
        var kind = "fleet-finding"
        var schema = JSONSchema.version
        var key: String
        var problem: String
        var repaired: Bool
        /// Not in the JSON: `repaired` says it.
        var repair: String

        enum CodingKeys: String, CodingKey { case kind, schema, key, problem, repaired }
    }

    @MainActor
    mutating func run() async throws {
        let (repair, json) = (self.repair, self.json)
        try await reportingErrors {
            let findings: [Finding] = try await FleetCommand.withRemote(global) { studio, reader, _ in
                let checkup = try await reader.checkup(repair: repair)
                let listed = try await Self.catalogFindings(studio, checkup, repair: repair)
                let findings = (checkup.findings + listed).map { f in
                    Finding(key: f.key, problem: f.problem + (f.started.map { " begun \(Terminal.date($0))" } ?? ""), repaired: f.repaired,
                            repair: f.repair)
                }
                if !json {
                    let location = reader.remote.location
                    if findings.isEmpty { print("\(location): \(Terminal.counted(checkup.takes, "take")), no problems found.") }
                    for f in findings { print("\(Terminal.safe(f.key)): \(Terminal.safe(f.problem))\(f.repaired ? " (\(f.repair))" : "")") }
                    if checkup.foreign > 0 {
                        print("\(Terminal.counted(checkup.foreign, "other object")) on \(location) \(checkup.foreign == 1 ? "is" : "are") not Tapedeck's; left alone.")
                    }
                }
                return findings
            }
            if json { try Terminal.printJSON(findings) }
            if findings.contains(where: { !$0.repaired }) { throw ExitCode(ExitStatus.problemsFound) }
        }
    }

    /// The fleet catalog against the remote, when one is configured; one that cannot be reached
    /// is a finding of its own (the remote's check stands).
    @MainActor
    static func catalogFindings(_ studio: Studio, _ checkup: FleetReader.Checkup, repair: Bool) async throws -> [FleetReader.Finding] {
        guard studio.hasFleetCatalog else { return [] }
        do {
            return try await FleetCommand.withCatalog(studio, for: "doctor") { catalog in
                try await FleetReader.catalogFindings(checkup.manifests, catalog: catalog, repair: repair)
            }
        } catch let error as TapedeckError where error.code == .remoteUnavailable {
            return [FleetReader.Finding(key: "catalog", problem: error.message, repaired: false)]
        }
    }
}
