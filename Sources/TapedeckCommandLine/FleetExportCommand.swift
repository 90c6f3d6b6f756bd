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

    @OptionGroup var range: TimeRangeOptions

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
            guard range.given else {
                throw TapedeckError(.invalidArgument, "Give the time to export: --from TIME with --to TIME or --duration LENGTH, e.g. --from 14:05 --duration 15m.")
            }
            _ = try range.check(now: Date())
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
                let (timeline, group, span) = try Self.chooseTimeline(timelines, machine: parts[0], range: range)
                let clips = try timeline.clips(from: span.start, to: span.end, gaps: range.policy)
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
                var arguments = ["--session", name, "--from", UTCTimestamp.format(span.start), "--to", UTCTimestamp.format(span.end)]
                if let gaps = range.gaps { arguments += ["--gaps", gaps.rawValue] }
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
    static func chooseTimeline(_ timelines: [(RecordingTimeline, [FleetReader.Entry])], machine: String,
                               range: TimeRangeOptions) throws -> (RecordingTimeline, [FleetReader.Entry], (start: Date, end: Date)) {
        let now = Date()
        var found: [(RecordingTimeline, [FleetReader.Entry], (start: Date, end: Date))] = []
        var lastError: TapedeckError?
        for (timeline, group) in timelines {
            do {
                let span = try range.range(on: timeline, now: now)
                if timelines.count == 1 || timeline.stretches.contains(where: { $0.end > span.start && $0.start < span.end }) {
                    found.append((timeline, group, span))
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
