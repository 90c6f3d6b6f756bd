import ArgumentParser
import Foundation
import TapedeckApp
import TapedeckCore

struct FleetExportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Export a stretch of time another machine recorded, fetching only the takes it needs.",
        usage: "tapedeck fleet export [<options>] <path> --from <time> (--to <time> | --duration <length>)",
        discussion: """
            Name the recorder as `fleet list` shows it: MACHINE, or MACHINE/SESSION when it recorded \
            into several sessions at that time. The time is read from the takes' manifests; only the \
            takes it spans are downloaded (size and SHA-256 checked, as `fleet pull` does) into a \
            session of this library, "SESSION (MACHINE)" unless --into names another, and the clip is \
            cut from them as `tapedeck export --from … --to …` cuts it. Takes pulled before are not \
            fetched again.
            """ + HelpExamples.text([
            "tapedeck fleet export studio/Logger --from \"2026-12-01 14:05\" --to 14:20 -o clip.flac": "A quarter of an hour the studio logged.",
            "tapedeck fleet export studio --from marker:news --duration 10m": "Ten minutes from the studio's latest \"news\" marker.",
        ]))

    @Argument(help: "MACHINE or MACHINE/SESSION, as `fleet list` shows them.")
    var path: String

    @Option(help: ArgumentHelp("The time to export from: YYYY-MM-DD HH:MM[:SS[.fff]], HH:MM (today), now, or marker:LABEL.", valueName: "time"))
    var from: String?

    @Option(help: ArgumentHelp("The time to export up to (same forms as --from).", valueName: "time"))
    var to: String?

    @Option(help: ArgumentHelp("With --from or --to: how long, e.g. 15m.", valueName: "length"))
    var duration: String?

    @Option(help: "Where nothing was recorded: refuse and list the gaps (default), silence, or split.")
    var gaps: GapChoice?

    @Option(help: "The local session the takes are pulled into (default: \"SESSION (MACHINE)\").")
    var into: String?

    @Option(help: "The output format: any encoder `tapedeck backends` lists (default: from -o's extension, else flac).")
    var format: EncoderChoice?

    @Option(name: [.customShort("o"), .long], help: ArgumentHelp("A folder to write into, or a file name.", valueName: "path"), completion: .file())
    var output: String?

    @Flag(help: "Replace a file that exists already.")
    var force = false

    @Flag(help: "Print the export's report as JSON.")
    var json = false

    @OptionGroup var global: GlobalOptions

    @MainActor
    mutating func run() async throws {
        var exportArguments: [String] = []
        try await reportingErrors {
            let parts = path.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
            guard (1...2).contains(parts.count), !parts.contains(where: \.isEmpty) else {
                throw TapedeckError(.invalidArgument, "\(path): name a recorder as MACHINE or MACHINE/SESSION, as `tapedeck fleet list` shows them.")
            }
            guard from != nil || to != nil else {
                throw TapedeckError(.invalidArgument, "Give the time to export: --from TIME with --to TIME or --duration LENGTH, e.g. --from 14:05 --duration 15m.")
            }
            exportArguments = try await FleetCommand.withRemote(global, writing: true) { _, reader, partials in
                let (entries, _, _) = try await reader.entries(machine: parts[0])
                let candidates = try parts.count == 2 ? FleetPullCommand.choose(parts, from: entries) : entries
                let timelines = Dictionary(grouping: candidates, by: { $0.manifest.session.id }).values.map { group in
                    let s = group[0].manifest.session
                    return (RecordingTimeline(session: Session(id: s.id, name: s.name, createdAt: s.createdAt, takes: group.map(\.manifest.take))), group)
                }
                guard !timelines.isEmpty else {
                    throw TapedeckError(.notFound, "No takes from \(parts[0]) on the remote. `tapedeck fleet list` shows the machines that pushed.")
                }
                let (timeline, group, range) = try Self.chooseTimeline(timelines, machine: parts[0], from: from, to: to, duration: duration)
                let clips = try timeline.clips(from: range.lowerBound, to: range.upperBound, gaps: gaps?.policy ?? .refuse)
                let needed = Set(clips.flatMap { $0.takes.map(\.id) })
                let fetch = group.filter { needed.contains($0.manifest.take.id) }.sorted { $0.manifest.take.number < $1.manifest.take.number }
                let name = into ?? "\(timeline.session.name) (\(parts[0]))"
                let show = Terminal.showsProgress
                let work = Task { @MainActor in
                    try await reader.pull(fetch, into: name) { bytes in
                        if show { Terminal.status("Fetching… \(Terminal.bytes(bytes))") }
                    }
                }
                let stop = try SignalTrap(signals: [SIGINT, SIGTERM, SIGHUP]) { _ in
                    partials.stop()
                    work.cancel()
                }
                defer { stop.cancel() }
                let made: [Take]
                do { (_, made) = try await work.value } catch is CancellationError {
                    if show { Terminal.endStatus() }
                    throw TapedeckError(.cancelled, "Stopped. The takes fetched before the stop are kept in \"\(name)\"; run the export again for the rest.")
                }
                if show { Terminal.endStatus() }
                Terminal.printError("\(parts[0])/\(timeline.session.name): \(Terminal.counted(fetch.count, "take")) of \(group.count) span that time; \(made.count) fetched into \"\(name)\"\(made.count < fetch.count ? ", \(fetch.count - made.count) pulled before" : "").")
                var arguments = ["--session", name, "--from", UTCTimestamp.format(range.lowerBound), "--to", UTCTimestamp.format(range.upperBound)]
                if let gaps { arguments += ["--gaps", gaps.rawValue] }
                if let output { arguments += ["-o", output] }
                if let format { arguments += ["--format", format.name] }
                if force { arguments.append("--force") }
                if json { arguments.append("--json") }
                return arguments
            }
        }
        // The clip is cut as `tapedeck export --from … --to …` cuts it, from the local copies.
        var export = try ExportCommand.parse(exportArguments)
        export.global = global
        try await export.run()
    }

    /// The session the time is cut from (the only one, or the one that recorded then) and the
    /// time as a range, markers read from the manifests.
    static func chooseTimeline(_ timelines: [(RecordingTimeline, [FleetReader.Entry])], machine: String, from: String?, to: String?,
                               duration: String?) throws -> (RecordingTimeline, [FleetReader.Entry], ClosedRange<Date>) {
        let length = try duration.map { try DurationText.seconds($0) }
        if from != nil && to != nil && length != nil {
            throw TapedeckError(.invalidArgument, "--from, --to and --duration: give two of them, not all three.")
        }
        if length == nil && (from == nil || to == nil) {
            throw TapedeckError(.invalidArgument, "\(from == nil ? "--to" : "--from") needs \(from == nil ? "--from" : "--to") or --duration.")
        }
        let now = Date()
        var found: [(RecordingTimeline, [FleetReader.Entry], ClosedRange<Date>)] = []
        var lastError: TapedeckError?
        for (timeline, group) in timelines {
            do {
                var start = try from.map { try ExportCommand.time($0, flag: "--from", timeline: timeline, now: now, after: nil) }
                var end = try to.map { try ExportCommand.time($0, flag: "--to", timeline: timeline, now: now, after: start) }
                if let length {
                    if let s = start { end = s.addingTimeInterval(length) } else if let e = end { start = e.addingTimeInterval(-length) }
                }
                guard let start, let end, end > start else {
                    throw TapedeckError(.invalidArgument, "--to is not after --from: the time to export runs from one to the other.")
                }
                if timelines.count == 1 || timeline.stretches.contains(where: { $0.end > start && $0.start < end }) {
                    found.append((timeline, group, start...end))
                }
            } catch let e as TapedeckError {
                lastError = e
            }
        }
        if found.count == 1 { return found[0] }
        if found.isEmpty { throw lastError ?? TapedeckError(.notFound, "\(machine) recorded nothing at that time. `tapedeck fleet list --from \(machine)` lists its takes.") }
        throw TapedeckError(.invalidArgument, "\(machine) recorded into several sessions then: \(found.map { "\"\($0.0.session.name)\"" }.joined(separator: ", ")). Name one: \(machine)/SESSION.")
    }
}
