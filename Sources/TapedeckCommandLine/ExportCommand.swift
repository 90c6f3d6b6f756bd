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
            never replaced without --force. A session's takes are encoded in parallel, one per core. \
            Finishing: --loudness brings each take to an integrated loudness (EBU R128), never past the \
            --true-peak ceiling (there is no limiter: when the ceiling stops the gain first, the report says \
            so and how loud the file is); --normalize-peak brings the highest sample to a level instead. \
            --rate converts the sample rate (libsoxr, very high quality). Wherever samples are made integers \
            again (a float take to s24 or s16, fewer bits, a gain, a new rate) they are dithered: TPDF by \
            default, --dither shaped to move the noise to high frequencies, --dither none to round.
            """ + HelpExamples.text([
            "tapedeck export last": "The take recorded last, as verified FLAC in this folder.",
            "tapedeck export --session Interview -o ~/Music": "Every take of Interview into ~/Music.",
            "tapedeck export e083 --format mp3 --loudness -16": "An MP3 brought to -16 LUFS, for a podcast.",
            "tapedeck export e083 --format wav --rate 44100 -f s16": "CD format: 44.1 kHz, 16-bit, dithered.",
            "tapedeck export --session Logger --from \"2026-12-01 14:05\" --to 14:20 -o clip.flac": "That stretch of time, across the split takes it spans.",
            "tapedeck export --session Logger --from marker:news --duration 10m": "Ten minutes from the latest marker labelled news.",
        ]))

    @Argument(help: "Takes to export: SESSION/TAKE, short ids, or `last`.", completion: TakeCompletion.kind(.takes))
    var takes: [String] = []

    @Option(help: "Export every take of this session (name or id; repeatable).", completion: TakeCompletion.kind(.sessions))
    var session: [String] = []

    @OptionGroup var range: TimeRangeOptions

    @Option(help: "The output format: any encoder `tapedeck backends` lists (default: from -o's extension, else flac).")
    var format: EncoderChoice?

    @Option(help: ArgumentHelp("Compression level: the encoder's level setting (\(ExportCommand.levels)).", valueName: "level"))
    var level: Int?

    @Option(help: ArgumentHelp("Bit rate of a lossy format, e.g. 96k or 128000 (opus, mp3).", valueName: "rate"))
    var bitrate: String?

    @Option(help: ArgumentHelp("Quality of a lossy format that has one: 0 smallest to 10 best (vorbis, as oggenc -q).", valueName: "0-10"))
    var quality: Int?

    @Option(help: ArgumentHelp("A tag for the exported files only, over the take's own (repeatable).", valueName: "KEY=VALUE"))
    var tag: [String] = []

    @Option(name: [.customShort("f"), .long], help: "Convert samples to this integer format first, as record's -f (f32 takes are converted with dither to s24 for FLAC by default).")
    var sampleFormat: ConversionChoice?

    @Option(name: [.customShort("o"), .long],
            help: ArgumentHelp("A folder to write into, a file name (one take), or - for stdout (one take). Default: the current folder.", valueName: "path"),
            completion: .file())
    var output: String?

    @Option(parsing: .unconditional, help: ArgumentHelp("Bring each take to this integrated loudness, e.g. -23 (EBU R128) or -16.", valueName: "LUFS"))
    var loudness: String?

    @Option(name: .customLong("true-peak"), parsing: .unconditional,
            help: ArgumentHelp("With --loudness: the true peak the gain may not push past (default -1).", valueName: "dBTP"))
    var truePeak: String?

    @Option(name: .customLong("normalize-peak"), parsing: .unconditional,
            help: ArgumentHelp("Bring each take's highest sample to this level, e.g. -1.", valueName: "dBFS"))
    var normalizePeak: String?

    @Option(help: ArgumentHelp("Convert to this sample rate, e.g. 44100 or 44.1k (libsoxr).", valueName: "Hz"))
    var rate: String?

    @Option(help: "Dither where samples become integers again: tpdf (default), shaped, or none.")
    var dither: DitherChoice?

    @Flag(help: "Replace files that exist already.")
    var force = false

    @Flag(help: "Print the reports as JSON: an array of one object per take.")
    var json = false

    @Option(name: .customLong("progress-fd"),
            help: ArgumentHelp("For a program running the export: write progress as JSON lines to this open file descriptor; when its reader closes it, the export stops as at Ctrl-C.", valueName: "fd"))
    var progressFD: Int32?

    @OptionGroup var global: GlobalOptions

    /// The encoders with a `level` setting and its range, for `--level`'s help.
    static var levels: String {
        BoundCatalog.current.encoders.compactMap { e in
            e.settings.first { $0.key == "level" }.map { "\(e.name): \($0.type.summary)" }
        }.joined(separator: "; ")
    }

    @MainActor
    mutating func run() async throws {
        try await reportingErrors {
            let byTime = range.given
            if takes.isEmpty && session.isEmpty && !byTime {
                throw TapedeckError(.invalidArgument, "Name the takes to export (SESSION/TAKE or ids), a whole session with --session NAME, or a time with --from and --to.")
            }
            var conversion = sampleFormat?.sampleFormat
            let finishing = try finishingOptions()
            let extraTags = try exportTags()
            // A stop (Ctrl-C, SIGTERM, SIGHUP) ends the exports in flight at their next block
            // (each removes its temporary file, as for any failure) and exits 130; the files
            // already in place stay.
            let partials = PartialFiles()
            let signals = try SignalTrap(signals: [SIGINT, SIGTERM, SIGHUP]) { _ in partials.stop() }
            defer { signals.cancel() }
            let progressPipe = try progressFD.map { try ProgressPipe(fd: $0, onClosed: { partials.stop() }) }
            let studio = try await global.makeStudio()
            let formats = studio.catalog.encoders.map(\.name).joined(separator: ", ")
            let toStdout = output == "-"
            if toStdout && Terminal.stdoutIsTerminal {
                throw TapedeckError(.invalidArgument, "-o - writes audio to stdout, which is a terminal. Pipe it into a program or redirect it to a file.")
            }
            // -o: an existing folder, or a name ending in / or without an extension, is a folder;
            // a name with an extension is one file, and its extension picks the format.
            var isFolder: ObjCBool = false
            let outputIsFolder = output.map { path in
                path.hasSuffix("/") || (FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) && isFolder.boolValue)
                    || URL(fileURLWithPath: path).pathExtension.isEmpty
            } ?? true
            let fileOutput = !toStdout && !outputIsFolder ? output.map { URL(fileURLWithPath: $0) } : nil
            let byExtension = fileOutput.flatMap { url in studio.encoders.first { $0.fileExtension == url.pathExtension.lowercased() }?.name }
            if let fileOutput, byExtension == nil, format == nil {
                throw TapedeckError(.invalidArgument, "-o \(fileOutput.path): no format writes .\(fileOutput.pathExtension) files. End the name in .\(studio.encoders.map(\.fileExtension).joined(separator: ", .")), or give --format.")
            }
            if let byExtension, let format, byExtension != format.name, let fileOutput {
                throw TapedeckError(.invalidArgument, "-o \(fileOutput.lastPathComponent) names a \(byExtension) file, but --format is \(format.name). Make them agree.")
            }
            if let output, outputIsFolder, !toStdout, !FileManager.default.fileExists(atPath: output) {
                throw TapedeckError(.notFound, "The output folder \(output) does not exist. Create it first, or give -o another folder.")
            }
            let formatName = format?.name ?? byExtension ?? "flac"
            ErrorAdvice.current?.on(.diskFull, .notWritable, say: "Or write elsewhere with -o DIR.")
            ErrorAdvice.current?.on(.unsupportedFormat, say: "Choose another --format (\(formats)).")
            var items = byTime ? try clipItems(in: studio.store) : try exportItems(in: studio.store)
            if (toStdout || fileOutput != nil) && items.count != 1 {
                throw TapedeckError(.invalidArgument, "-o \(output ?? ""): \(items.count) takes need a folder. Give -o a folder, e.g. -o exports.")
            }
            var overrides: [String: String] = [:]
            if let level { overrides["level"] = String(level) }
            if let bitrate { overrides["bitrate"] = try Self.bitsPerSecond(bitrate) }
            if let quality { overrides["quality"] = String(quality) }
            let (encoder, settings) = try studio.makeEncoder(named: formatName, overrides: overrides,
                                                             options: ["level": "--level", "bitrate": "--bitrate", "quality": "--quality"])
            // No --sample-format: a float take to a format that stores integers only becomes s24.
            if conversion == nil { conversion = ExportPolicy.sampleFormat(for: items.map(\.take), encoder: encoder) }
            // Advice only where it helps: a take too short or silent for --loudness is not
            // helped by another format, nor 8 channels by --sample-format.
            let advice = Self.formatAdvice(for: items.map(\.take), encoder: encoder, sampleFormat: conversion, rate: finishing.rate, formats: formats)
            ErrorAdvice.current?.on(.unsupportedFormat) { advice[$0.message] }
            let temporary = toStdout ? FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-export-\(UUID().uuidString)") : nil
            if let temporary { try FileManager.default.createDirectory(at: temporary, withIntermediateDirectories: false) }
            defer { if let temporary { try? FileManager.default.removeItem(at: temporary) } }
            let directory = temporary ?? URL(fileURLWithPath: outputIsFolder ? output ?? FileManager.default.currentDirectoryPath : ".")
            items = items.map { ExportItem(take: $0.take, session: $0.session, extraTags: extraTags, target: fileOutput, clip: $0.clip) }
            // Temporary files of exports into this folder that were killed (even by SIGKILL).
            PartialFiles.removeStale(in: fileOutput?.deletingLastPathComponent() ?? directory)
            let exporter = studio.makeExporter(partials: partials)

            let showProgress = Terminal.showsProgress && !json
            let bar = showProgress ? Task { @MainActor in
                let start = Date()
                while !Task.isCancelled {
                    Self.drawProgress(exporter.jobs, elapsed: Date().timeIntervalSince(start))
                    try? await Task.sleep(for: .milliseconds(100))
                }
            } : nil
            let feed = progressPipe.map { pipe in Task { @MainActor in
                while !Task.isCancelled {
                    pipe.send(exporter.jobs)
                    try? await Task.sleep(for: .milliseconds(200))
                }
            } }
            let results = await exporter.export(items, with: encoder, encoderSettings: settings, to: directory,
                                                force: force, sampleFormat: conversion, finishing: finishing)
            bar?.cancel()
            feed?.cancel()
            progressPipe?.send(exporter.jobs)
            if showProgress { Terminal.endStatus() }
            if partials.isStopped {
                throw try Self.reportStopped(items: items, results: results, toStdout: toStdout, json: json)
            }
            try Self.report(items: items, results: results, toStdout: toStdout, json: json)
        }
    }

    /// What to add to the encoder's refusal of each take's format as exported, by the refusal's
    /// message: another --format always; --sample-format only where the encoder takes the
    /// samples in another integer format. Refusals of anything else (a take too short or silent
    /// for --loudness) are not in it: their own messages say what to do. - Never blocks.
    static func formatAdvice(for takes: [Take], encoder: any AudioEncoder, sampleFormat: SampleFormat?, rate: Int?, formats: String) -> [String: String] {
        var advice: [String: String] = [:]
        for take in takes {
            var format = take.format.with(sampleFormat: sampleFormat ?? take.format.sampleFormat)
            if let rate { format.sampleRate = rate }
            do {
                try encoder.validate(format)
            } catch let refusal as TapedeckError {
                let converting = SampleFormat.allCases.contains { other in
                    !other.isFloat && other != format.sampleFormat && (try? encoder.validate(format.with(sampleFormat: other))) != nil
                }
                advice[refusal.message] = "Choose another --format (\(formats))" + (converting ? ", or convert the samples with --sample-format." : ".")
            } catch {}
        }
        return advice
    }

    /// `--tag KEY=VALUE` as the tags of the exported files.
    /// - Throws: `.invalidArgument` for a pair without `=` or a tag storage refuses.
    func exportTags() throws -> [String: String] {
        var extraTags: [String: String] = [:]
        for pair in tag {
            guard let eq = pair.firstIndex(of: "=") else { throw TapedeckError(.invalidArgument, "--tag \(pair): expected KEY=VALUE, e.g. --tag ARTIST=Ann.") }
            let value = String(pair[pair.index(after: eq)...])
            extraTags[try TakeAnnotations.validateTag(String(pair[..<eq]), value)] = value
        }
        return extraTags
    }

    /// The takes to export, in order: every take of `--session`, then each take named.
    /// - Thread: main actor; blocks as ``SessionStore/resolve(_:)`` does.
    @MainActor
    func exportItems(in store: SessionStore) throws -> [ExportItem] {
        var items: [ExportItem] = []
        for session in session {
            guard case .session(let s) = try store.resolve(session) else {
                throw TapedeckError(.invalidArgument, "\"\(session)\" is a take; give it without --session.")
            }
            items += s.takes.map { ExportItem(take: $0, session: s) }
            if s.takes.isEmpty { throw TapedeckError(.notFound, "Session \"\(s.name)\" has no takes to export.") }
        }
        for reference in takes {
            guard case .take(let t, let s) = try store.resolve(reference) else {
                throw TapedeckError(.invalidArgument, "\"\(reference)\" is a session. Export a whole session with --session \"\(reference)\".")
            }
            items.append(ExportItem(take: t, session: s))
        }
        // A take named twice (by name and by id, or a take and its session) is exported once.
        var seen = Set<String>()
        return items.filter { seen.insert($0.take.id).inserted }
    }

    /// After a stop: says which files were finished before it (they are kept) and returns the
    /// error the command ends with.
    @MainActor
    static func reportStopped(items: [ExportItem], results: [Result<ExportReport, TapedeckError>], toStdout: Bool,
                              json: Bool) throws -> TapedeckError {
        // What was finished before the stop is kept: say which.
        let kept = zip(items, results).compactMap { item, result -> ExportResultJSON? in
            guard case .success(let r) = result, !toStdout else { return nil }
            return ExportResultJSON(report: r, error: nil, take: "\(item.session.name)/\(item.take.name)")
        }
        if json { try Terminal.printJSON(kept) } else {
            for k in kept { if let r = k.report { print(Self.summary(r, take: k.take)) } }
        }
        let done = results.filter { if case .success = $0 { true } else { false } }.count
        return TapedeckError(.cancelled, "Stopped. \(done == 0 ? "Nothing was exported" : Terminal.counted(done, "file") + " exported before the stop " + (done == 1 ? "is" : "are") + " kept"); the unfinished ones were removed.")
    }

    /// Reports every export: the file copied to stdout (`-o -`), or a line (or JSON) per take,
    /// and each failure on stderr; throws the first failure's exit status.
    @MainActor
    static func report(items: [ExportItem], results: [Result<ExportReport, TapedeckError>], toStdout: Bool, json: Bool) throws {
        var firstError: TapedeckError?
        var reports: [ExportResultJSON] = []
        for (item, result) in zip(items, results) {
            switch result {
            case .success(let r):
                // Said with --json and -o - too (and in the report): the file is not the take's samples.
                if let invalid = r.invalidSamples {
                    Terminal.printError("warning: \(item.session.name)/\(item.take.name): exported with \(InvalidSamples.summary(invalid)). The take's own file is unchanged.")
                }
                if toStdout {
                    try Self.copyToStandardOutput(URL(fileURLWithPath: r.output))
                    continue
                }
                reports.append(ExportResultJSON(report: r, error: nil, take: "\(item.session.name)/\(item.take.name)", clip: item.clip.map(ClipJSON.init)))
                if let clip = item.clip, !clip.filledGaps.isEmpty, !json {
                    Terminal.printError("note: \(item.session.name)/\(item.take.name): \(Terminal.counted(clip.filledGaps.count, "gap")) filled with silence (\(RecordingTimeline.length(clip.filledGaps.reduce(0) { $0 + $1.seconds }))); the file's description lists them.")
                }
                if !json {
                    print(Self.summary(r, take: "\(item.session.name)/\(item.take.name)"))
                    if let note = r.note { Terminal.printError("warning: \(item.session.name)/\(item.take.name): \(note)") }
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

    /// `--loudness`, `--true-peak`, `--normalize-peak`, `--rate` and `--dither` as one value.
    /// - Throws: `.invalidArgument` for a value out of range or flags that cannot go together.
    func finishingOptions() throws -> ExportFinishing {
        let target = try decibels(loudness, flag: "--loudness", unit: "LUFS", range: -70...0)
        let ceiling = try decibels(truePeak, flag: "--true-peak", unit: "dBTP", range: -30...0)
        let peak = try decibels(normalizePeak, flag: "--normalize-peak", unit: "dBFS", range: -60...0)
        if target != nil && peak != nil {
            throw TapedeckError(.invalidArgument, "--loudness and --normalize-peak both set the gain: choose one.")
        }
        if ceiling != nil && target == nil {
            throw TapedeckError(.invalidArgument, "--true-peak is the ceiling of --loudness: give --loudness too (e.g. --loudness -23 --true-peak -1).")
        }
        var hertz: Int?
        if let rate {
            let lower = rate.lowercased().trimmingCharacters(in: .whitespaces)
            let value = lower.hasSuffix("k") ? Double(lower.dropLast()).map { $0 * 1000 } : Double(lower.hasSuffix("hz") ? String(lower.dropLast(2)) : lower)
            guard let value, value.isFinite, AudioFormat.sampleRateRange.contains(Int(value.rounded())) else {
                throw TapedeckError(.invalidArgument, "--rate \(rate): expected a sample rate from \(AudioFormat.sampleRateRange.lowerBound) to \(AudioFormat.sampleRateRange.upperBound) Hz, e.g. --rate 44100.")
            }
            hertz = Int(value.rounded())
        }
        return ExportFinishing(loudness: target, truePeakCeiling: ceiling ?? -1, peak: peak, rate: hertz, dither: dither?.dither ?? .tpdf)
    }

    struct ExportResultJSON: Encodable {
        var report: ExportReport?
        var error: String?
        var take: String
        var clip: ClipJSON?

        func encode(to encoder: any Encoder) throws {
            if let report { try report.encode(to: encoder) }
            var c = encoder.container(keyedBy: Key.self)
            try c.encode("export", forKey: .kind)
            try c.encode(JSONSchema.export, forKey: .schema)
            try c.encode(report == nil ? "failed" : "ok", forKey: .status)
            try c.encodeIfPresent(clip, forKey: .clip)
            if report == nil {
                try c.encode(take, forKey: .take)
                try c.encode(error, forKey: .error)
            }
        }

        enum Key: String, CodingKey { case kind, schema, status, take, error, clip }
    }

    /// "Exported S/T → FILE (10:00, 79.7 MB, verified)": at most 100 columns, the names cut in
    /// the middle when they are long (details are in --json).
    static func summary(_ r: ExportReport, take: String) -> String {
        let relative = r.output.hasPrefix(FileManager.default.currentDirectoryPath + "/")
            ? String(r.output.dropFirst(FileManager.default.currentDirectoryPath.count + 1)) : r.output
        let tail = " (\(Terminal.clock(r.seconds)), \(Terminal.bytes(r.bytes)), \(r.verification.hasPrefix("not verified") ? "not verified" : "verified")\(r.statement == nil ? "" : ", signed statement"))"
        let room = 100 - "Exported  → ".count - tail.count
        let takeRoom = take.count + relative.count <= room ? take.count : min(take.count, max(12, room - relative.count, room / 3))
        return "Exported \(Terminal.middleCut(take, takeRoom)) → \(Terminal.middleCut(relative, room - takeRoom))\(tail)"
    }

    /// `--bitrate 96k`, `128000`, `1.5M` as bits per second. - Throws: `.invalidArgument` naming the flag.
    static func bitsPerSecond(_ text: String) throws -> String {
        let lower = text.lowercased().trimmingCharacters(in: .whitespaces)
        let (number, factor): (Substring, Double) = lower.hasSuffix("k") ? (lower.dropLast(), 1000)
            : lower.hasSuffix("m") ? (lower.dropLast(), 1_000_000) : (Substring(lower), 1)
        guard let value = Double(number), value > 0, value.isFinite else {
            throw TapedeckError(.invalidArgument, "--bitrate \(text): not a bit rate. Write bits per second (128000) or with k (128k).")
        }
        return String(Int((value * factor).rounded()))
    }

    /// Streams a finished, verified export to stdout (`-o -`).
    static func copyToStandardOutput(_ url: URL) throws {
        let fd = open(url.path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw TapedeckError.system(errno, while: "read the export at \(url.path)") }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while !StandardOutput.isClosed {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n < 0 { throw TapedeckError.system(errno, while: "read the export at \(url.path)") }
            if n == 0 { break }
            buffer.withUnsafeBytes { StandardOutput.write(bytes: UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
        }
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
        let what = jobs.count == 1 ? "\(jobs[0].item.session.name)/\(jobs[0].item.take.name)" : "\(finished) of \(jobs.count)"
        Terminal.status("Exporting \(what) [\(String(repeating: "#", count: filled))\(String(repeating: "-", count: width - filled))] \(Int(fraction * 100))%  \(Terminal.clock(done)) of \(Terminal.clock(total))  \(String(format: "%.0f", rate))× real time  \(String(format: "%.0f", left)) s left")
    }
}
