import ArgumentParser
import Dispatch
import Foundation
import Observation
import TapedeckApp
import TapedeckAssembly
import TapedeckCore

struct RecordCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "record",
        abstract: "Record a take from the configured capture backend.",
        discussion: """
            Without --session, records into the most recently used session (creating "Session 1" if there is none). \
            Stops at --duration (exact to the frame), or on Ctrl-C, SIGTERM or SIGHUP; in every case the captured audio \
            is drained and the file finalized.
            """)

    @OptionGroup var global: GlobalOptions

    @Option(help: "The session to record into (created if it does not exist).")
    var session: String?

    @Option(help: "The take's name (default: Take N).")
    var name: String?

    @Option(name: [.customShort("d"), .long],
            help: "How long to record: seconds (5, 2.5), units (2m, 1h30m, 1h30) or a clock (00:05, 01:02:03.5); default: until Ctrl-C.")
    var duration: String?

    @Option(name: [.customShort("D"), .long],
            help: "The device to record from (the capture backend's device setting; names from `tapedeck devices`).")
    var device: String?

    @Option(name: [.customShort("r"), .long], help: "Sample rate in hertz (format.sample-rate).")
    var rate: Int?

    @Option(name: [.customShort("c"), .long], help: "Number of channels (format.channels).")
    var channels: Int?

    @Option(name: [.customShort("f"), .customLong("format")], help: "Sample format (format.sample-format; arecord's S16_LE, S24_3LE, S32_LE, FLOAT_LE too).")
    var sampleFormat: SampleFormatChoice?

    @Flag(help: "Print the final report as JSON.")
    var json = false

    /// `-r`, `-c` and `-f` as the settings they stand for (flags: they beat the environment and
    /// the file, and `--set` for the same key).
    func formatFlags() throws -> [String: String] {
        var flags: [String: String] = [:]
        for (option, value, setting) in [("-r/--rate", rate, FormatSettings.sampleRate), ("-c/--channels", channels, FormatSettings.channels)] {
            guard let value else { continue }
            if case .failure(let problem) = setting.declaration.parse(String(value)) {
                throw TapedeckError(.invalidArgument, "\(option) \(value): \(problem.reason).")
            }
            flags["format." + setting.key] = String(value)
        }
        if let sampleFormat { flags["format." + FormatSettings.sampleFormat.key] = sampleFormat.rawValue }
        return flags
    }

    @MainActor
    mutating func run() async throws {
        try await reportingErrors {
            let seconds = try duration.map { try DurationText.seconds($0, flag: "-d/--duration") }
            // The trap is armed before the config is read and the library opened, so a stop
            // that arrives while the command starts is a stop request too, not the default
            // action in the middle of opening the catalog.
            let stops = StopRelay()
            let signals = try SignalTrap(signals: [SIGINT, SIGTERM, SIGHUP]) { _ in
                Task { @MainActor in stops.request() }
            }
            defer { signals.cancel() }
            // Recording reads only the session it records into, never the whole library, so it
            // starts as quickly in a library of thousands of takes as in an empty one.
            let studio = try await global.makeStudio(loadingSessions: false, writing: true, flags: try formatFlags(),
                                                     overrides: device.map { [PluginOverride(section: "capture", key: "device", value: $0, option: "-D/--device")] } ?? [], detecting: [.capture])
            ErrorAdvice.current?.on(.alreadyExists, say: "Choose another name with --name.")
            ErrorAdvice.current?.on(.unsupportedFormat,
                say: "Record another format with -r RATE, -c CHANNELS or -f FORMAT, or choose another encoder with --set encoder.name=NAME (\(studio.catalog.encoders.map(\.name).joined(separator: ", "))).")
            let recorder = try studio.makeRecorder()
            if stops.attach(recorder) {
                throw TapedeckError(.cancelled, "Stopped before recording began; no take was made.")
            }
            let showMeter = Terminal.showsProgress && !json
            // Without a meter on screen nothing watches the progress: it is not refreshed while
            // recording and no levels are measured (less CPU, fewer wake-ups).
            if !showMeter {
                recorder.settings.progressInterval = nil
                recorder.settings.measuresLevels = false
            }
            let meter = showMeter ? Task { await Self.showMeter(recorder) } : nil
            let report: RecordingReport
            do {
                report = try await recorder.record(sessionName: session, takeName: name, duration: seconds.map(RecordingLength.seconds))
            } catch {
                meter?.cancel()
                if meter != nil { Terminal.endStatus() }
                throw error
            }
            meter?.cancel()
            if meter != nil { Terminal.endStatus() }
            let status = Self.exitStatus(report)
            if json {
                try Terminal.printJSON(RecordReportJSON(
                    take: TakeJSON(report.take, session: report.session, url: report.fileURL),
                    end: Self.endName(report.end), message: report.summary, wallSeconds: report.wallSeconds, exitStatus: status))
            } else {
                let t = report.take
                print("\(t.state == .complete ? "Recorded" : "Saved") \(report.session.name)/\(t.name) [\(t.shortID)]: \(Terminal.clock(t.seconds)), \(t.frames) frames, \(t.format), \(t.encoding), \(t.state.rawValue)")
                print("  \(report.fileURL.path)")
                if !t.overruns.isEmpty {
                    print("  \(Terminal.counted(t.overruns.count, "overrun")): \(Terminal.counted(Int(t.overruns.reduce(0) { $0 + $1.frames }), "frame")) filled with silence.")
                }
            }
            if status != ExitStatus.ok {
                Terminal.printError(report.summary + (report.take.overruns.isEmpty ? "" : " The take has \(Terminal.counted(report.take.overruns.count, "overrun"))."))
                throw ExitCode(status)
            }
        }
    }

    static func exitStatus(_ report: RecordingReport) -> Int32 {
        switch report.end {
        case .deviceLost: ExitStatus.savedInterrupted
        case .writeFailed: ExitStatus.savedTruncated
        case .reachedDuration, .stopped: report.take.overruns.isEmpty ? ExitStatus.ok : ExitStatus.savedWithOverruns
        }
    }

    static func endName(_ end: RecordingEnd) -> String {
        switch end {
        case .reachedDuration: "duration"
        case .stopped: "stopped"
        case .deviceLost: "device-lost"
        case .writeFailed: "write-failed"
        }
    }

    /// Redraws the meter line whenever the recorder's observable state changes.
    @MainActor
    static func showMeter(_ recorder: TakeRecorder) async {
        let states = Observations { (recorder.phase, recorder.seconds, recorder.peaks, recorder.overrunCount) }
        for await (phase, seconds, peaks, overruns) in states {
            if Task.isCancelled { break }
            guard phase == .recording else { continue }
            let bars = peaks.enumerated().map { "\($0.offset + 1) \(Terminal.meter($0.element, width: peaks.count > 2 ? 8 : 20))" }
            Terminal.status("● \(Terminal.clock(seconds))  \(bars.joined(separator: "  "))  overruns \(overruns)")
        }
    }
}

/// Carries a stop request from the signal trap to the recorder, which may not exist yet when the
/// signal arrives.
/// - Thread: main actor only; never blocks.
@MainActor
final class StopRelay {
    private var recorder: TakeRecorder?
    private var requested = false

    /// Stops the recorder, or remembers the request until ``attach(_:)``.
    func request() {
        requested = true
        recorder?.stop()
    }

    /// Hands later stop requests to `recorder`; returns whether one has already arrived.
    func attach(_ recorder: TakeRecorder) -> Bool {
        self.recorder = recorder
        return requested
    }
}
