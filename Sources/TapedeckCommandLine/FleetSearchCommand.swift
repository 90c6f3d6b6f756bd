import ArgumentParser
import Foundation
import TapedeckApp
import TapedeckAssembly
import TapedeckCore

/// `tapedeck fleet search`: every machine's takes from the fleet catalog (`sync.catalog`), by
/// machine, session, time, words, tags, markers, state, length and loudness, a page at a time.
struct FleetSearchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "search",
        abstract: "Search every machine's takes in the fleet catalog (sync.catalog).",
        usage: "tapedeck fleet search [<words> ...] [<options>]",
        discussion: """
            Reads the fleet catalog, which push keeps (a take is added once it is verified on the \
            remote). Every option given must match. Words are looked for in the take's and the \
            session's names, the notes, marker labels and tag values, whole and case-insensitive. \
            Times are local: 2026-06-01, 2026-06-01T06:00.
            """)

    @Argument(help: "Words every take found holds (its names, notes, markers or tags).")
    var words: [String] = []

    @Option(name: .customLong("from"), help: "Only this machine's takes (its name on the remote).")
    var from: String?

    @Option(help: "Only this session's takes (its name or id).")
    var session: String?

    @Option(help: ArgumentHelp("Recorded at or after this time.", valueName: "time"))
    var after: String?

    @Option(help: ArgumentHelp("Recorded before this time.", valueName: "time"))
    var before: String?

    @Option(help: ArgumentHelp("A tag the take has, with its value (repeatable).", valueName: "NAME=VALUE"))
    var tag: [String] = []

    @Flag(help: "Only takes with markers.")
    var marked = false

    @Option(help: ArgumentHelp("Only takes in this state: complete, interrupted, truncated (repeatable).", valueName: "state"))
    var state: [String] = []

    @Option(help: ArgumentHelp("Only takes at least this long (30s, 5m, 1h).", valueName: "duration"))
    var longerThan: String?

    @Option(help: ArgumentHelp("Only takes whose integrated loudness is within MIN:MAX LUFS (-24:-16).", valueName: "range"))
    var lufs: String?

    @Option(help: "At most this many takes (default 50).")
    var limit = 50

    @Option(help: "Skip this many takes first (the next page).")
    var offset = 0

    @Flag(help: "Print the takes (their manifests) as JSON.")
    var json = false

    @OptionGroup var global: GlobalOptions

    /// The options as a query. - Throws: `.invalidArgument` naming the option and what to write.
    func query() throws -> FleetQuery {
        guard (1...10_000).contains(limit), offset >= 0 else {
            throw TapedeckError(.invalidArgument, "--limit \(limit) --offset \(offset): give a limit from 1 to 10000 and an offset of 0 or more.")
        }
        var q = FleetQuery(machine: from, session: session, text: words.isEmpty ? nil : words.joined(separator: " "), limit: limit, offset: offset)
        q.from = try after.map { try ClockTime.parse($0, flag: "--after") }
        q.to = try before.map { try ClockTime.parse($0, flag: "--before") }
        for pair in tag {
            let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, !parts[0].isEmpty else {
                throw TapedeckError(.invalidArgument, "--tag \(pair): write NAME=VALUE, e.g. --tag SITE=north.")
            }
            q.tags[parts[0].uppercased()] = parts[1]
        }
        if marked { q.hasMarkers = true }
        q.states = Set(try state.map { text in
            guard let s = TakeState(rawValue: text.lowercased()), s != .recording else {
                throw TapedeckError(.invalidArgument, "--state \(text): give complete, interrupted or truncated.")
            }
            return s
        })
        if let longerThan { q.seconds = try DurationText.seconds(longerThan, flag: "--longer-than") ... Double.greatestFiniteMagnitude }
        if let lufs {
            let parts = lufs.split(separator: ":").map { Double($0.trimmingCharacters(in: .whitespaces)) }
            guard parts.count == 2, let low = parts[0], let high = parts[1], low <= high else {
                throw TapedeckError(.invalidArgument, "--lufs \(lufs): write MIN:MAX in LUFS, e.g. --lufs -24:-16.")
            }
            q.loudness = low ... high
        }
        return q
    }

    @MainActor
    mutating func run() async throws {
        let (json, query) = (self.json, try query())
        try await reportingErrors {
            let studio = try global.makeStudioWithoutLibrary()
            let (page, location) = try await FleetCommand.withCatalog(studio, for: "search") { (try await $0.search(query), $0.location) }
            Self.show(page, query: query, json: json, location: location)
        }
    }

    static func show(_ page: FleetPage, query: FleetQuery, json: Bool, location: String) {
        if json {
            try? Terminal.printJSON(page.manifests.map { FleetTakeJSON($0, audioPresent: nil) })
            return
        }
        guard !page.manifests.isEmpty else {
            print(page.total == 0 ? "No take in the fleet catalog at \(location) matches." : "No takes past --offset \(query.offset) (\(page.total) match).")
            return
        }
        for m in page.manifests {
            let when = Terminal.date(m.recordedAt)
            print("\(m.machine)/\(Terminal.safe(m.session.name))/\(Terminal.safe(m.take.name)) [\(m.take.shortID)]  \(when)  \(Terminal.clock(m.seconds))  \(m.take.state.rawValue)")
        }
        let shown = page.manifests.count
        if shown < page.total {
            print("\(query.offset + 1)–\(query.offset + shown) of \(page.total); the next page: --offset \(query.offset + shown)")
        }
    }
}
