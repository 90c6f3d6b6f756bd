import ArgumentParser
import Foundation
import Synchronization
import TapedeckApp
import TapedeckCore
#if canImport(Glibc)
import Glibc
#endif

struct ImportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Import audio files (WAV, FLAC, MP3, Ogg, AIFF, anything libsndfile reads) as takes, or a NAME.tapedeck bundle as a session.",
        usage: "tapedeck import [<options>] <files> ...",
        discussion: """
            WAV, FLAC, MP3, Ogg Opus and Ogg Vorbis files are copied byte for byte after being decoded from \
            end to end (a WAV whose header does not match its audio, or one of 8-bit, A-law, µ-law or \
            64-bit float samples, is converted); other formats, such as AIFF, are decoded and stored with \
            the configured encoder in their own rate, channels and sample format. Takes are named after the files: `song`, then `song (2)`, … when \
            the session has that name already; --name names a single file's take. Only regular files are \
            read (a FIFO or device is refused before it is opened). A file that cannot be decoded is refused \
            with the reader's reason and nothing of it is kept; the others are still imported.
            """ + HelpExamples.text([
            "tapedeck import ~/Recordings/*.wav --session Archive": "Every WAV of a folder, as takes of Archive.",
            "tapedeck import interview.mp3 --name \"Interview, raw\"": "One file, kept as it is, under a name of your own.",
            "tapedeck import Concert.tapedeck": "A bundle copied from another machine, as a session.",
        ]))

    @Argument(help: "Audio files, or one NAME.tapedeck bundle.", completion: .file())
    var files: [String]

    @Option(help: "The session to import into (created if needed; default: the most recently used). For a bundle: the new session's name.")
    var session: String?

    @Option(help: "The take's name, for a single file (default: the file's name without its extension; `song (2)` when taken).")
    var name: String?

    @Flag(help: "Print the imported takes as JSON.")
    var json = false

    @OptionGroup var global: GlobalOptions

    @MainActor
    mutating func run() async throws {
        let files = self.files
        let sessionName = session
        let json = self.json
        let takeName = name
        try await reportingErrors {
            guard !files.isEmpty else { throw TapedeckError(.invalidArgument, "Name at least one file to import.") }
            if takeName != nil && files.count > 1 {
                throw TapedeckError(.invalidArgument, "--name names one take: give one file with it, or leave it out (takes are named after their files).")
            }
            // A stop (Ctrl-C, SIGTERM, SIGHUP) ends the file being imported at its next block:
            // its temporary file and take row are removed as for any failed file, a session this
            // import made and filled with nothing too, and the command exits 130; the takes
            // imported before it stay.
            let partials = PartialFiles()
            let signals = try SignalTrap(signals: [SIGINT, SIGTERM, SIGHUP]) { _ in partials.stop() }
            defer { signals.cancel() }
            let studio = try await global.makeStudio(writing: true)
            ErrorAdvice.current?.on(.unsupportedFormat,
                say: "If the file is audio in another format, convert it first (sox, ffmpeg); if it is the library's encoder that cannot store it, choose another with --set encoder.name=NAME (\(studio.catalog.encoders.map(\.name).joined(separator: ", "))).")
            let importer = studio.makeImporter(partials: partials)
            let urls = files.map { URL(fileURLWithPath: $0).standardizedFileURL }
            var imported: [(Session, Take)] = []
            var conversions: [String: String] = [:]
            var failures: [TapedeckError] = []

            if urls.count == 1, urls[0].pathExtension == "tapedeck" {
                ErrorAdvice.current?.on(.alreadyExists, say: "Give the new session another name with --session NAME.")
                let source = try studio.openBundle(at: urls[0])
                guard let original = try source.sessions().first else {
                    throw TapedeckError(.notFound, "\(urls[0].path) holds no session.")
                }
                let (session, takes) = try await importer.run(session: original.id, from: source, named: sessionName)
                imported = takes.map { (session, $0) }
            } else {
                let existed = try studio.store.storage.findSessionForRecording(named: sessionName) != nil
                let session = try await studio.store.sessionForRecording(named: sessionName)
                for url in urls where !partials.isStopped {
                    do {
                        let result = try await importer.run(file: url, into: session, named: takeName)
                        imported.append((session, result.take))
                        if let from = result.convertedFrom { conversions[result.take.id] = from }
                        if result.invalidSamples > 0 {
                            Terminal.printError("warning: \(url.lastPathComponent): holds \(InvalidSamples.summary(result.invalidSamples)) when exported, measured or played.")
                        }
                    } catch let error as TapedeckError where error.code == .cancelled && partials.isStopped {
                        break
                    } catch let error as TapedeckError {
                        // Each message names its file, once.
                        let named = error.message.hasPrefix(url.lastPathComponent + " ") ? error.message : "\(url.lastPathComponent): \(error.message)"
                        failures.append(TapedeckError(error.code, named, systemCode: error.systemCode))
                    } catch {
                        // Whatever one file does, the others are still imported and reported.
                        failures.append(TapedeckError(.io, "\(url.lastPathComponent): could not be imported: \(error.localizedDescription)"))
                    }
                }
                // A session made for files that were all refused is not left behind, empty.
                if !existed && imported.isEmpty {
                    try? await studio.store.delete(.session(session))
                }
            }
            if partials.isStopped {
                for (s, t) in imported { print("Imported \(s.name)/\(t.name)  [\(t.shortID)]") }
                throw TapedeckError(.cancelled, "Stopped. The files imported before the stop are kept; the one being imported was removed.")
            }
            try await studio.store.refresh()
            let storage = studio.store.storage
            if json {
                try Terminal.printJSON(imported.map { TakeJSON($0.1, session: $0.0, url: try? storage.audioURL(for: $0.1)) })
            } else {
                for (s, t) in imported {
                    let converted = conversions[t.id].map { "  (converted from \($0) to \(t.format.sampleFormat))" } ?? ""
                    print("Imported \(s.name)/\(t.name)  [\(t.shortID)]  \(Terminal.clock(Double(t.frames) / Double(t.format.sampleRate)))  \(t.encoding)\(converted)")
                }
            }
            for failure in failures {
                Terminal.printError(ErrorAdvice.message(for: failure))
            }
            if let first = failures.first { throw ExitCode(ExitStatus.code(for: first)) }
        }
    }
}
