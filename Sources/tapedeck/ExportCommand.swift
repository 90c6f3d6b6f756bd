import ArgumentParser
import Foundation
import TapedeckApp
import TapedeckAssembly
import TapedeckCore

struct ExportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Export takes as verified, tagged files (FLAC by default).",
        discussion: """
            Files are named "SESSION - TAKE.flac" in --output (default: the current folder). Each is encoded \
            to a temporary file beside the target, verified, and then moved into place; an existing file is \
            never replaced without --force. A session's takes are encoded in parallel, one per core.
            """)

    @OptionGroup var global: GlobalOptions

    @Argument(help: "Takes to export: SESSION/TAKE or short ids.")
    var takes: [String] = []

    @Option(help: "Export every take of this session (name or id).")
    var session: String?

    @Option(help: "The output format: any encoder `tapedeck backends` lists.")
    var format = EncoderChoice("flac")

    @Option(help: ArgumentHelp("Compression level: the encoder's level setting (\(ExportCommand.levels)).", valueName: "level"))
    var level: Int?

    @Option(help: "Convert samples to this integer format first (needed to export f32 takes as FLAC).")
    var sampleFormat: ConversionChoice?

    @Option(help: "The folder to write into (default: the current folder).")
    var output: String?

    @Flag(help: "Replace files that exist already.")
    var force = false

    @Flag(help: "Print one JSON report per file.")
    var json = false

    /// The encoders with a `level` setting and its range, for `--level`'s help.
    static var levels: String {
        PluginCatalog.builtIn.encoders.compactMap { e in
            e.settings.first { $0.key == "level" }.map { "\(e.name): \($0.type.summary)" }
        }.joined(separator: "; ")
    }

    @MainActor
    mutating func run() async throws {
        try await reportingErrors {
            if takes.isEmpty && session == nil {
                throw TapedeckError(.invalidArgument, "Name the takes to export (SESSION/TAKE or ids), or a whole session with --session NAME.")
            }
            let conversion = sampleFormat?.sampleFormat
            let studio = try await global.makeStudio()
            let formats = studio.catalog.encoders.map(\.name).joined(separator: ", ")
            ErrorAdvice.current?.on(.diskFull, .notWritable, say: "Or write elsewhere with --output DIR.")
            ErrorAdvice.current?.on(.unsupportedFormat, say: "Choose another --format (\(formats)), or convert the samples with --sample-format.")
            var items: [ExportItem] = []
            if let session {
                guard case .session(let s) = try studio.store.resolve(session) else {
                    throw TapedeckError(.invalidArgument, "\"\(session)\" is a take; give it without --session.")
                }
                items += s.takes.map { ExportItem(take: $0, session: s) }
                if s.takes.isEmpty { throw TapedeckError(.notFound, "Session \"\(s.name)\" has no takes to export.") }
            }
            for reference in takes {
                guard case .take(let t, let s) = try studio.store.resolve(reference) else {
                    throw TapedeckError(.invalidArgument, "\"\(reference)\" is a session. Export a whole session with --session \"\(reference)\".")
                }
                items.append(ExportItem(take: t, session: s))
            }
            let (encoder, settings) = try studio.makeEncoder(named: format.name, overrides: level.map { ["level": String($0)] } ?? [:])
            let directory = URL(fileURLWithPath: output ?? FileManager.default.currentDirectoryPath)
            let exporter = studio.makeExporter()

            let showProgress = Terminal.showsProgress && !json
            let bar = showProgress ? Task { @MainActor in
                let start = Date()
                while !Task.isCancelled {
                    Self.drawProgress(exporter.jobs, elapsed: Date().timeIntervalSince(start))
                    try? await Task.sleep(for: .milliseconds(100))
                }
            } : nil
            let results = await exporter.export(items, with: encoder, encoderSettings: settings, to: directory,
                                                force: force, sampleFormat: conversion)
            bar?.cancel()
            if showProgress { Terminal.endStatus() }

            var firstError: TapedeckError?
            var reports: [ExportResultJSON] = []
            for (item, result) in zip(items, results) {
                switch result {
                case .success(let r):
                    reports.append(ExportResultJSON(report: r, error: nil, take: "\(item.session.name)/\(item.take.name)"))
                    if !json {
                        print("Exported \(item.session.name)/\(item.take.name) → \(r.output)  \(Terminal.clock(r.seconds)), \(Terminal.bytes(r.bytes)) (\(String(format: "%.1f", r.compressionRatio * 100))% of PCM), \(String(format: "%.0f", r.seconds / max(r.wallSeconds, 0.001)))× real time; \(r.verification)")
                    }
                case .failure(let e):
                    firstError = firstError ?? e
                    reports.append(ExportResultJSON(report: nil, error: e.message, take: "\(item.session.name)/\(item.take.name)"))
                    Terminal.printError("\(item.session.name)/\(item.take.name): \(ErrorAdvice.message(for: e))")
                }
            }
            if json { try Terminal.printJSON(reports) }
            if let firstError { throw ExitCode(ExitStatus.code(for: firstError)) }
        }
    }

    struct ExportResultJSON: Encodable {
        var report: ExportReport?
        var error: String?
        var take: String

        func encode(to encoder: any Encoder) throws {
            if let report {
                try report.encode(to: encoder)
                var c = encoder.container(keyedBy: Key.self)
                try c.encode("ok", forKey: .status)
            } else {
                var c = encoder.container(keyedBy: Key.self)
                try c.encode("failed", forKey: .status)
                try c.encode(take, forKey: .take)
                try c.encode(error, forKey: .error)
            }
        }

        enum Key: String, CodingKey { case status, take, error }
    }

    @MainActor
    static func drawProgress(_ jobs: [TakeExporter.Job], elapsed: Double) {
        guard !jobs.isEmpty else { return }
        let total = jobs.reduce(0.0) { $0 + Double($1.progress.totalFrames) / Double($1.progress.sampleRate) }
        let done = jobs.reduce(0.0) { $0 + Double($1.progress.framesDone) / Double($1.progress.sampleRate) }
        let fraction = total > 0 ? min(done / total, 1) : 0
        let width = 24
        let filled = Int(fraction * Double(width))
        let rate = elapsed > 0 ? done / elapsed : 0
        let left = rate > 0 ? (total - done) / rate : 0
        let finished = jobs.filter { $0.progress.framesDone >= $0.progress.totalFrames }.count
        Terminal.status("Exporting \(finished)/\(jobs.count) [\(String(repeating: "#", count: filled))\(String(repeating: "-", count: width - filled))] \(Int(fraction * 100))%  \(Terminal.clock(done)) of \(Terminal.clock(total))  \(String(format: "%.0f", rate))× real time  \(String(format: "%.0f", left)) s left")
    }
}
