import ArgumentParser
import Foundation
import TapedeckApp
import TapedeckCore
#if canImport(Glibc)
import Glibc
#endif

struct LoudnessCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "loudness",
        abstract: "Measure takes' EBU R128 loudness (integrated, range, true peak) and store it.",
        usage: "tapedeck loudness [<options>] [<references> ...]",
        discussion: """
            Takes recorded or imported by this version are measured as they are made; this measures \
            older ones, or measures again. The values go into the library (`show`, `list --json`) and \
            into the take's file: a WAV take's BWF bext (version 2 loudness fields), a FLAC take's \
            REPLAYGAIN and R128 tags. Only the loudness changes in a bext the file has; everything \
            else in it (another program's chunks, a cover, its audio) is kept byte for byte. A file \
            that cannot be changed safely is left as it was and named (the library keeps the loudness), \
            the other takes are still measured, and the command ends with that failure's code. A take \
            still being recorded is skipped. Ctrl-C stops between two reads; the takes measured \
            before it keep their values.
            """)

    @Argument(help: "Takes (SESSION/TAKE, a short id, `last`) or sessions to measure.", completion: TakeCompletion.kind(.both))
    var references: [String] = []

    @Flag(help: "Measure every take of the library.")
    var all = false

    @Flag(help: "Only takes that have no loudness yet.")
    var missing = false

    @Flag(help: "Print the measured takes as JSON.")
    var json = false

    @OptionGroup var global: GlobalOptions

    @MainActor
    mutating func run() async throws {
        let (references, all, missing, json) = (self.references, self.all, self.missing, self.json)
        try await reportingErrors {
            guard all || !references.isEmpty else {
                throw TapedeckError(.invalidArgument, "Name the takes or sessions to measure (e.g. `tapedeck loudness last`), or measure the whole library with --all (--missing: only takes not measured yet).")
            }
            if all && !references.isEmpty {
                throw TapedeckError(.invalidArgument, "--all measures every take: give it without takes or sessions.")
            }
            let partials = PartialFiles()
            let signals = try SignalTrap(signals: [SIGINT, SIGTERM, SIGHUP]) { _ in partials.stop() }
            defer { signals.cancel() }
            let studio = try await global.makeStudio(writing: true)
            var work: [(Take, Session)] = []
            if all {
                let storage = studio.store.storage
                try storage.forEachSession { s in work += s.takes.map { ($0, s) } }
            } else {
                for reference in references {
                    switch try studio.store.resolve(reference) {
                    case .take(let t, let s): work.append((t, s))
                    case .session(let s): work += s.takes.map { ($0, s) }
                    }
                }
            }
            var seen = Set<String>()
            work = work.filter { seen.insert($0.0.id).inserted && !(missing && $0.0.loudness != nil) }
            let scanner = studio.makeLoudnessScanner(partials: partials)
            let storage = studio.store.storage
            var measured: [(Take, Session)] = []
            var failures: [TapedeckError] = []
            for (take, session) in work where !partials.isStopped {
                if take.state == .recording && all { continue }  // being recorded, or recovered at the next open
                do {
                    let result = try await scanner.measureReporting(take, in: session)
                    let updated = result.take
                    measured.append((updated, session))
                    if result.invalidSamples > 0 {
                        Terminal.printError("warning: \(session.name)/\(take.name): measured with \(InvalidSamples.summary(result.invalidSamples)).")
                    }
                    if !json, let l = updated.loudness {
                        print("\(Terminal.safe(session.name))/\(Terminal.safe(updated.name)) [\(updated.shortID)]: \(Terminal.loudness(l, seconds: updated.seconds))")
                    }
                } catch let error as TapedeckError where error.code == .cancelled && partials.isStopped {
                    break
                } catch let error as TapedeckError {
                    failures.append(TapedeckError(error.code, "\(session.name)/\(take.name): \(error.message)", systemCode: error.systemCode))
                } catch {
                    // Every take is tried: one that fails in any way is said at the end.
                    failures.append(TapedeckError(.io, "\(session.name)/\(take.name): could not be measured: \(error.localizedDescription)"))
                }
            }
            if json {
                try Terminal.printJSON(measured.map { TakeJSON($0.0, session: $0.1, url: try? storage.audioURL(for: $0.0)) })
            } else if work.isEmpty {
                Terminal.printError(missing ? "Every take named has its loudness already; leave out --missing to measure again." : "There are no takes to measure.")
            }
            // Every failure is said, a stop too.
            for failure in failures { Terminal.printError(ErrorAdvice.message(for: failure)) }
            if partials.isStopped {
                throw TapedeckError(.cancelled, "Stopped. The takes measured before the stop keep their values.")
            }
            if let first = failures.first { throw ExitCode(ExitStatus.code(for: first)) }
        }
    }
}
