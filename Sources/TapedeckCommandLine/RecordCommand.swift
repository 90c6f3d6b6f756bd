import ArgumentParser
import Dispatch
import Foundation
import Observation
import TapedeckApp
import TapedeckAssembly
import TapedeckCore
import TapedeckProvenance

struct RecordCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "record",
        abstract: "Record a take from the configured capture backend.",
        discussion: """
            Without --session, records into the most recently used session (creating "Session 1" if there is none). \
            Stops at --duration (exact to the frame), or on Ctrl-C, SIGTERM or SIGHUP; in every case the captured audio \
            is drained and the file finalized.
            """ + HelpExamples.text([
            "tapedeck record 10s": "Ten seconds into the session recorded into last.",
            "tapedeck record --session Interview": "Into the session Interview, until Ctrl-C; press m to set a marker.",
            "tapedeck record --split 1h --split-align --name \"%Y-%m-%d %H.00\"": "A logger: a take on every hour, named by the hour it begins.",
            "tapedeck record -D hw:1 -r 96000 -f s24 -c 2": "From an ALSA card at 96 kHz, 24-bit stereo (names: tapedeck devices).",
            "tapedeck record -o memo.flac -d 2m": "Two minutes into a file outside the library.",
        ]))

    @Option(help: "The session to record into (created if it does not exist).")
    var session: String?

    @Option(help: ArgumentHelp("The take's name (default: Take N); strftime's %Y %m %d %H %M %S … make it from the time each take begins, e.g. --name \"%Y-%m-%d %H.%M\" (as arecord --use-strftime).", valueName: "name"))
    var name: String?

    @Option(name: [.customShort("d"), .long], parsing: .unconditional,
            help: "How long to record: seconds (5, 2.5), units (2m, 1h30m, 1h30) or a clock (00:05, 01:02:03.5); default: until Ctrl-C.")
    var duration: String?

    @Option(name: [.customShort("D"), .long],
            help: "The device to record from (the capture backend's device setting; names from `tapedeck devices`).", completion: DeviceCompletion.kind(capture: true))
    var device: String?

    @Option(name: [.customShort("r"), .long], help: "Sample rate in hertz (format.sample-rate).")
    var rate: Int?

    @Option(name: [.customShort("c"), .long], help: "Number of channels (format.channels).")
    var channels: Int?

    @Option(name: [.customShort("f"), .customLong("format")], help: "Sample format (format.sample-format; arecord's S16_LE, S24_3LE, S32_LE, FLOAT_LE too).")
    var sampleFormat: SampleFormatChoice?

    @Option(name: [.customShort("o"), .long],
            help: ArgumentHelp("Record to this file outside the library (its extension picks wav, flac or opus), or - for a WAV or FLAC stream on stdout.", valueName: "file"),
            completion: .file())
    var output: String?

    @Option(help: ArgumentHelp("Start a new take after every DURATION of audio (30m, 1h, 600); the takes of the run join sample-exactly to what was captured.", valueName: "duration"))
    var split: String?

    @Flag(help: "With --split, put the takes' boundaries on the clock: --split 1h starts a take on every hour.")
    var splitAlign = false

    @Option(help: ArgumentHelp("Start a new take before a file grows past SIZE (2G or 2GiB: powers of 1024; 1900MB: powers of 1000).", valueName: "size"))
    var splitSize: String?

    @Option(help: ArgumentHelp("Also keep a programme as a take of its own, cut from the same audio: \"NAME START-END [pad DURATION] [DAYS]\", e.g. \"News 09:00-09:10 pad 2m mon-fri\" (repeatable; programs: in the config too).", valueName: "programme"))
    var program: [String] = []

    @Option(help: ArgumentHelp("Stop at this local time (18:00, 18:00:30, or \"2026-12-01 18:00\"); with -d, whichever comes first.", valueName: "time"))
    var until: String?

    @Option(parsing: .unconditional, help: ArgumentHelp("Sound-activated: a take begins when the input reaches LEVEL (dBFS, e.g. -40dB) and ends after --vox-hold of quiet.", valueName: "level"))
    var vox: String?

    @Option(help: ArgumentHelp("With --vox, how long the input stays below the level before the take ends (default 3s).", valueName: "duration"))
    var voxHold: String?

    @Flag(help: "Wait for a trigger before the take begins: Enter on the terminal, or SIGUSR2 (kill -USR2 PID).")
    var armed = false

    @Flag(help: "A marker (m on the terminal, SIGUSR1) ends the take and begins the next at its frame.")
    var splitOnMarker = false

    @Flag(help: "When the device is lost (unplugged, the server gone), end the take, wait for the device and go on in a new take (capture.resume).")
    var resume = false

    @Flag(help: "Record the stretches of the config's schedule: (`tapedeck schedule` lists them), waiting between them, until stopped.")
    var schedule = false

    @Option(help: ArgumentHelp("With --vox or --armed, start each take with up to DURATION of the audio before its trigger (at most 30s).", valueName: "duration"))
    var preRoll: String?

    @Option(help: ArgumentHelp("Warn when the input stays below --silence-threshold for DURATION while a take records (a dead microphone); exit status 6.", valueName: "duration"))
    var silenceAlarm: String?

    @Option(parsing: .unconditional, help: ArgumentHelp("The level under which --silence-alarm counts the input as silent (default -70dB).", valueName: "level"))
    var silenceThreshold: String?

    @Option(help: ArgumentHelp("Serve /metrics for Prometheus at ADDRESS:PORT while recording into the library (127.0.0.1:9470; 0 for any free port).", valueName: "address"))
    var metrics: String?

    @Flag(help: "Print the final report as JSON (on a terminal the meter still shows, on stderr).")
    var json = false

    @Argument(help: ArgumentHelp("How long to record, as -d takes it (`tapedeck record 5s`).", valueName: "duration"))
    var positionalDuration: String?

    @OptionGroup var global: GlobalOptions

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

    /// A level as `--vox` and `--silence-threshold` take it: dBFS, `-40`, `-40dB`, `-40 dBFS`.
    static func decibels(_ text: String, flag: String) throws -> Double {
        var t = text.trimmingSpaces.lowercased()
        for suffix in ["dbfs", "db"] where t.hasSuffix(suffix) { t = String(t.dropLast(suffix.count)).trimmingSpaces.description; break }
        guard let db = Double(t), db.isFinite, (-120...0).contains(db) else {
            throw TapedeckError(.invalidArgument, "\(flag) \(text): not a level. Give dBFS from -120 to 0, e.g. \(flag) -40dB.")
        }
        return db
    }

    /// `--until`: seconds from `now` to the next such local time (today, or tomorrow when it has
    /// passed), or to a date and time.
    static func secondsUntil(_ text: String, now: Date = Date()) throws -> Double {
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        for pattern in ["yyyy-MM-dd HH:mm:ss", "yyyy-MM-dd HH:mm", "yyyy-MM-dd'T'HH:mm:ss", "yyyy-MM-dd'T'HH:mm"] {
            f.dateFormat = pattern
            if let d = f.date(from: text.trimmingSpaces.description) {
                guard d > now else {
                    throw TapedeckError(.invalidArgument, "--until \(text): that time has passed. Give a time to come, e.g. --until 18:00.")
                }
                return d.timeIntervalSince(now)
            }
        }
        let parts = text.trimmingSpaces.split(separator: ":").map { Int($0) }
        guard (2...3).contains(parts.count), let h = parts[0], let m = parts[1], (0..<24).contains(h), (0..<60).contains(m),
              parts.count == 2 || (parts[2].map { (0..<60).contains($0) } ?? false) else {
            throw TapedeckError(.invalidArgument, "--until \(text): not a time. Give a local time (18:00, 18:00:30) or a date and time (\"2026-12-01 18:00\").")
        }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = .current
        let target = DateComponents(hour: h, minute: m, second: parts.count == 3 ? parts[2]! : 0)
        guard let next = calendar.nextDate(after: now, matching: target, matchingPolicy: .nextTime) else {
            throw TapedeckError(.invalidArgument, "--until \(text): that time does not come.")
        }
        return next.timeIntervalSince(now)
    }

    /// The run's plan from the flags: splits, VOX, armed, pre-roll, the silence alarm.
    func runPlan() throws -> RunPlan {
        var plan = RunPlan(split: try splitRule() ?? SplitRule())
        if vox != nil && armed {
            throw TapedeckError(.invalidArgument, "--vox and --armed both decide when the take begins. Choose one.")
        }
        if let vox {
            let hold = try voxHold.map { try DurationText.seconds($0, flag: "--vox-hold") } ?? 3
            plan.vox = VoxRule(thresholdDB: try Self.decibels(vox, flag: "--vox"), holdSeconds: hold)
        } else if voxHold != nil {
            throw TapedeckError(.invalidArgument, "--vox-hold is how long --vox waits in quiet; give --vox LEVEL too, e.g. --vox -40dB --vox-hold 3s.")
        }
        plan.armed = armed
        plan.splitOnMarker = splitOnMarker
        plan.resume = resume
        plan.programs = try program.map { try ProgramRule.parse($0) }
        if let preRoll {
            guard plan.startsIdle else {
                throw TapedeckError(.invalidArgument, "--pre-roll keeps the audio from before a take's trigger; give --vox LEVEL or --armed too.")
            }
            let seconds = try DurationText.seconds(preRoll, flag: "--pre-roll", allowingZero: true)
            guard seconds <= RunPlan.longestPreRoll else {
                throw TapedeckError(.invalidArgument, "--pre-roll \(preRoll): at most 30s of audio is kept before a trigger. Give 30s or less.")
            }
            plan.preRollSeconds = seconds
        }
        if silenceAlarm != nil && vox != nil {
            throw TapedeckError(.invalidArgument, "--silence-alarm watches a take that records on and on; with --vox a quiet input ends the take instead. Leave out one of them.")
        }
        if let silenceAlarm {
            plan.silenceAlarm = SilenceAlarm(seconds: try DurationText.seconds(silenceAlarm, flag: "--silence-alarm"),
                                             thresholdDB: try silenceThreshold.map { try Self.decibels($0, flag: "--silence-threshold") } ?? -70)
        } else if silenceThreshold != nil {
            throw TapedeckError(.invalidArgument, "--silence-threshold sets the level for --silence-alarm; give --silence-alarm DURATION too, e.g. --silence-alarm 30s.")
        }
        if schedule && (output != nil || duration != nil || positionalDuration != nil || until != nil || plan.startsIdle) {
            throw TapedeckError(.invalidArgument, "--schedule decides when takes begin and end; leave out -o, -d/DURATION, --until, --vox and --armed.")
        }
        if output != nil && (plan.startsIdle || plan.silenceAlarm != nil || plan.splitOnMarker || plan.resume || metrics != nil || !plan.programs.isEmpty) {
            throw TapedeckError(.invalidArgument, "-o records one file outside the library as it comes; --vox, --armed, --pre-roll, --split-on-marker, --resume, --silence-alarm, --program and --metrics work on takes in the library. Leave out -o.")
        }
        return plan
    }

    /// `--split`, `--split-align` and `--split-size` as a rule; `nil` without them.
    func splitRule() throws -> SplitRule? {
        if splitAlign && split == nil {
            throw TapedeckError(.invalidArgument, "--split-align puts the --split boundaries on the clock; give --split too, e.g. --split 1h --split-align.")
        }
        guard split != nil || splitSize != nil else { return nil }
        let every = try split.map { try DurationText.seconds($0, flag: "--split") }
        if let every, every < SplitRule.shortestSeconds {
            throw TapedeckError(.invalidArgument, "--split \(split ?? ""): a take lasts at least 1 s. Give a longer time, e.g. --split 10m.")
        }
        let bytes = try splitSize.map { try ByteCountText.bytes($0, flag: "--split-size") }
        if let bytes, bytes < SplitRule.smallestBytes {
            throw TapedeckError(.invalidArgument, "--split-size \(splitSize ?? ""): a take's file holds at least 1 MiB. Give a larger size, e.g. --split-size 2G.")
        }
        if output != nil {
            throw TapedeckError(.invalidArgument, "-o records one file outside the library, so it cannot be split. Leave out -o to record takes into the library, or leave out --split/--split-size.")
        }
        return SplitRule(everySeconds: every, alignedToClock: splitAlign, maxBytes: bytes)
    }

    @MainActor
    mutating func run() async throws {
        try await reportingErrors {
            let seconds = try recordingSeconds()
            // When it stops by itself, on the wall clock; said when that is on another day.
            let stopsAt = seconds.map { Date().addingTimeInterval($0) }
            if let stopsAt, !Calendar.current.isDateInToday(stopsAt) { Terminal.printError(Self.stopLine(stopsAt)) }
            var plan = try runPlan()
            // The trap is armed before the config is read and the library opened, so a stop
            // that arrives while the command starts is a stop request too, not the default
            // action in the middle of opening the catalog. SIGUSR2 triggers an armed run.
            let stops = StopRelay()
            // Under systemd (Type=notify): readiness, status and the watchdog (RecordCommand+Service).
            let notifier = ServiceNotifier(environment: ProcessInfo.processInfo.environment)
            let stopping = ServiceStopping(notifier)
            // Markers come counted: a flood of SIGUSR1 is one task on the main actor at a time.
            let (markers, triggers) = (SignalTally(), SignalTally())
            let signals = try SignalTrap(signals: [SIGINT, SIGTERM, SIGHUP, SIGUSR1] + (plan.armed ? [SIGUSR2] : []),
                                         requests: [SIGUSR1, SIGUSR2],
                                         onRequest: { signal, count in
                                             if signal == SIGUSR1 {
                                                 markers.add(count) { n in stops.mark(signals: n) }
                                             } else {
                                                 triggers.add(count) { _ in stops.trigger() }
                                             }
                                         }) { _ in
                stopping.say("Stopping: finishing the take")
                Task { @MainActor in stops.request() }
            }
            defer { signals.cancel() }
            let extending = Self.extendingStart(notifier)
            defer { extending?.cancel() }
            // Recording reads only the session it records into, never the whole library, so it
            // starts as quickly in a library of thousands of takes as in an empty one.
            let studio = try await global.makeStudio(loadingSessions: false, writing: true, flags: try formatFlags(),
                                                     overrides: device.map { [PluginOverride(section: "capture", key: "device", value: $0, option: "-D/--device")] } ?? [], detecting: [.capture])
            if output == nil { ErrorAdvice.current?.on(.alreadyExists, say: "Choose another name with --name.") }
            ErrorAdvice.current?.on(.unsupportedFormat,
                say: "Record another format with -r RATE, -c CHANNELS or -f FORMAT, or choose another encoder with --set encoder.name=NAME (\(studio.catalog.encoders.map(\.name).joined(separator: ", "))).")
            let toStdout = output == "-"
            let (fileURL, chosen) = try checkedOutput(seconds: seconds, studio: studio)
            let recorder = try studio.makeRecorder(encoder: chosen)
            // Signed takes' time stamps (provenance.tsa) are sent as they are asked for, and queued ones too.
            let stamper = studio.timeStamper?.started()
            extending?.cancel()
            // capture.resume in the config does what --resume does (not for -o: one file).
            if output == nil && recorder.settings.resume { plan.resume = true }
            // programs: in the config too, beside --program (not for -o: one file).
            if output == nil { plan.programs += studio.configuration.programs }
            // A run splits on request too (the page's Split, `tapedeck` control socket).
            if plan.makesRun { plan.splitOnRequest = true }
            if stops.attach(recorder) {
                throw TapedeckError(.cancelled, "Stopped before recording began; no take was made.")
            }
            let showMeter = Terminal.showsProgress && !schedule
            // Without a meter on screen nothing watches the progress: it is not refreshed while
            // recording (fewer wake-ups). Levels are still measured, for the clip count.
            if !showMeter { recorder.settings.progressInterval = nil }
            let source = Self.source(of: studio.configuration)
            let meter = showMeter ? Task { await Self.showMeter(recorder, source: source, stops: stops, toStdout: toStdout, plan: plan, stopsAt: stopsAt, total: seconds) } : nil
            // Off a terminal (a journal, a pipe) the banner is one line, as arecord's, unless --quiet.
            let banner = !showMeter && !Terminal.quiet.load(ordering: .relaxed)
                ? Task { await Self.showMeter(recorder, source: source, stops: stops, toStdout: toStdout, plan: plan, stopsAt: stopsAt, total: seconds, bannerOnly: true) } : nil
            defer { banner?.cancel() }
            let waiting = ScheduleWaiting()
            let service = Self.serviceWatch(recorder, notifier: notifier, waiting: waiting)
            defer {
                service?.cancel()
                stopping.say("Stopped")
            }
            let clock = Self.wallClockStop(recorder: recorder, until: until == nil ? nil : stopsAt, duration: seconds, resume: plan.resume)
            defer { clock?.cancel() }
            // Keys on a terminal: `m` sets a marker, Enter triggers an armed run. The terminal's
            // mode is restored when the command ends.
            let keys = Terminal.stdinIsTerminal && !toStdout ? Self.terminalKeys(recorder: recorder, stops: stops) : nil
            defer { keys?.restore() }
            let length = seconds.map(RecordingLength.seconds)
            if output != nil {
                let name = self.name ?? fileURL?.deletingPathExtension().lastPathComponent ?? "Take"
                let alerts = RecordAlerts.start(studio, recorder: recorder, folder: fileURL?.deletingLastPathComponent().path ?? FileManager.default.currentDirectoryPath)
                let report = try await RecordAlerts.around(alerts) {
                    try await Self.endingMeter(meter) {
                        try await recorder.record(to: fileURL.map(RecordingOutput.file) ?? .stream(STDOUT_FILENO), name: name, duration: length)
                    }
                }
                let unsent = await Self.settle(stamper)
                defer { if let unsent { Terminal.printError(unsent) } }
                return try Self.finish(report, json: json)
            }
            let (session, name) = (self.session, self.name)
            let storage = studio.store.storage
            // `tapedeck mark`, `status`, the page of a `serve` on this library and --metrics see it;
            // the config's retention is applied meanwhile (RecordCommand+Control, +Retention).
            let companions = try await RecordCompanions.start(self, recorder: recorder, stops: stops, studio: studio, seconds: seconds, plan: plan)
            defer { companions.close() }
            let report: RecordingReport
            // The config's alerts: rules hear of silence, a lost device, a low disk (RecordCommand+Alerts).
            let alerts = RecordAlerts.start(studio, recorder: recorder, folder: storage.rootURL.path)
            if schedule {
                return try await recordOnSchedule(studio.configuration.schedule, recorder: recorder, stops: stops, waiting: waiting, alerts: alerts, plan: plan, storage: storage)
            }
            do {
                report = try await RecordAlerts.around(alerts) {
                    try await Self.endingMeter(meter) {
                        try await recorder.record(sessionName: session, takeName: name, duration: length, plan: plan)
                    }
                }
            } catch let nothing as NothingRecorded {
                // A run that waited and ended before its trigger: no take, not a failure.
                try Self.reportNothingRecorded(nothing, json: json)
                return
            } catch let unfinished as UnfinishedRecording {
                // The audio is safe but the take is not finished: the report still goes out.
                try Self.reportUnfinished(unfinished, json: json, storage: storage)
                throw unfinished.error
            }
            let unsent = await Self.settle(stamper)
            defer { if let unsent { Terminal.printError(unsent) } }
            try Self.finish(report, json: json, storage: storage)
        }
    }

    /// How long to record in seconds, from `-d`, the positional duration and `--until`
    /// (whichever comes first); `nil` to record until stopped.
    func recordingSeconds() throws -> Double? {
        if duration != nil && positionalDuration != nil {
            throw TapedeckError(.invalidArgument, "Give the duration once: -d \(duration ?? "") or \(positionalDuration ?? ""), not both.")
        }
        var seconds = try duration.map { try DurationText.seconds($0, flag: "-d/--duration") }
            ?? positionalDuration.map { text in
                do { return try DurationText.seconds(text, flag: "DURATION") } catch {
                    throw TapedeckError(.invalidArgument, "\"\(text)\" is not a duration. Record for a time with -d, e.g. `tapedeck record -d 5s`; name the take with --name.")
                }
            }
        if let until {
            // --until and -d: whichever comes first.
            let left = try Self.secondsUntil(until)
            seconds = min(seconds ?? left, left)
        }
        return seconds
    }

    /// The length and `-o` checked against the other flags and the configured format: the file
    /// `-o` names (`nil` for stdout or without `-o`) and the encoder its extension picks.
    @MainActor
    func checkedOutput(seconds: Double?, studio: Studio) throws -> (fileURL: URL?, encoder: (any AudioEncoder)?) {
        if let seconds, (seconds * Double(studio.configuration.format.sampleRate)).rounded() < 1 {
            throw TapedeckError(.invalidArgument, "-d/--duration \(duration ?? positionalDuration ?? ""): shorter than one frame at \(studio.configuration.format.sampleRate) Hz. Record for longer.")
        }
        let toStdout = output == "-"
        if toStdout && json {
            throw TapedeckError(.invalidArgument, "-o - writes the audio to stdout, so --json has nowhere to go. Leave out one of them.")
        }
        if toStdout && Terminal.stdoutIsTerminal {
            throw TapedeckError(.invalidArgument, "-o - writes audio to stdout, which is a terminal. Pipe it into a program or redirect it to a file.")
        }
        if output != nil && session != nil {
            throw TapedeckError(.invalidArgument, "-o records outside the library, so --session does not apply. Leave out one of them.")
        }
        // -o "%Y%m%d-%H%M%S.wav": the time the recording starts (arecord --use-strftime).
        let fileURL = output.flatMap { $0 == "-" ? nil : URL(fileURLWithPath: NameTemplate.expand($0, at: Date())) }
        let chosen = fileURL.flatMap { url in studio.encoders.first { $0.fileExtension == url.pathExtension.lowercased() } }
        if let fileURL, chosen == nil {
            throw TapedeckError(.invalidArgument, "-o \(fileURL.path): no encoder writes .\(fileURL.pathExtension) files. End the name in .\(studio.encoders.map(\.fileExtension).joined(separator: ", .")).")
        }
        return (fileURL, chosen)
    }

    /// The capture device as the banner names it, e.g. "hw:1 (alsa, detected)".
    static func source(of c: TapedeckConfiguration) -> String {
        let device = Credentials.hidden(in: c.capture.settings.values["device"]?.description ?? "")
        return "\(device.isEmpty ? "the default device" : device) (\(c.capture.plugin ?? "?")\(c.isDetected("capture") ? ", detected" : ""))"
    }

    /// The banner's source with the device the backend opened, when it names one the config did
    /// not: "null.monitor, the default device (pulse, detected)".
    static func source(_ configured: String, device: String?) -> String {
        guard let device, !configured.hasPrefix(device + " ") else { return configured }
        return "\(device), \(configured)"
    }

    /// The terminal's keys while recording: `m` sets a marker, Enter triggers an armed run;
    /// `nil` when the terminal cannot be read key by key.
    @MainActor
    static func terminalKeys(recorder: TakeRecorder, stops: StopRelay) -> TerminalKeys? {
        TerminalKeys { key in
            Task { @MainActor in
                switch key {
                case UInt8(ascii: "m"), UInt8(ascii: "M"): recorder.mark()
                case UInt8(ascii: "\n"), UInt8(ascii: "\r"): stops.trigger()
                default: break
                }
            }
        }
    }

    /// The report of a run that waited and ended before its trigger: no take. At its length
    /// (`-d`, `--until`) that is how the run went (exit 0); stopped by Ctrl-C or a signal, it
    /// is a stop before anything was recorded (exit 130, as the exit codes say).
    @MainActor
    static func reportNothingRecorded(_ nothing: NothingRecorded, json: Bool) throws {
        let status = nothing.end == .stopped ? TapedeckError.Code.cancelled.exitStatus : ExitStatus.ok
        if json {
            try Terminal.printJSON(RecordReportJSON(take: nil, run: nil, takes: [], end: Self.endName(nothing.end),
                                                    message: nothing.summary, wallSeconds: nothing.wallSeconds,
                                                    exitStatus: status))
        } else {
            print(nothing.summary)
        }
        if status != ExitStatus.ok { throw ExitCode(status) }
    }

    /// The JSON report of a recording whose audio is safe but whose take is not finished (with
    /// `--json`; the caller then throws its error).
    @MainActor
    static func reportUnfinished(_ unfinished: UnfinishedRecording, json: Bool, storage: any TakeStorage) throws {
        if json {
            let r = unfinished.report
            let last = TakeJSON(r.take, session: r.session, url: r.fileURL)
            try Terminal.printJSON(RecordReportJSON(
                take: last, run: r.runID, takes: Self.runTakes(r, last: last, storage: storage), end: "unfinished", message: r.summary,
                wallSeconds: r.wallSeconds, exitStatus: ExitStatus.code(for: unfinished.error), markersNotKept: r.markersNotKept))
        }
    }

    /// The report of a recording into the library: every take of the run, as JSON or in lines;
    /// throws the exit status when it is not 0.
    @MainActor
    static func finish(_ report: RecordingReport, json: Bool, storage: any TakeStorage) throws {
        let status = Self.exitStatus(report)
        if json {
            let last = TakeJSON(report.take, session: report.session, url: report.fileURL)
            try Terminal.printJSON(RecordReportJSON(
                take: last, run: report.runID, takes: Self.runTakes(report, last: last, storage: storage),
                end: Self.endName(report.end), message: report.summary, wallSeconds: report.wallSeconds, exitStatus: status,
                silences: report.silences.map { SilenceJSON($0, format: report.take.format) },
                events: report.events.map { RunEventJSON($0, format: report.take.format) }, markersNotKept: report.markersNotKept,
                programTakes: report.programTakes.map { TakeJSON($0, session: report.session, url: try? storage.audioURL(for: $0)) }))
        } else {
            for t in report.earlierTakes + [report.take] {
                let path = t.id == report.take.id ? report.fileURL.path : (try? storage.audioURL(for: t))?.path ?? t.file
                print("\(t.state == .complete ? "Recorded" : "Saved") \(report.session.name)/\(t.name) [\(t.shortID)]: \(Terminal.clock(t.seconds)), \(Terminal.format(t.format)) \(t.encoding)\(t.state == .complete ? "" : ", " + t.state.rawValue)\(t.run?.ended.map { " (\($0.rawValue))" } ?? "")")
                print("  \(path)")
                if let l = t.loudness { print("  Loudness: \(Terminal.loudness(l, seconds: t.seconds))") }
                if t.clippedSamples > 0 {
                    print("  Clipped: \(Terminal.counted(Int(t.clippedSamples), "sample")) at full scale. Lower the input gain.")
                }
                if !t.overruns.isEmpty {
                    print("  \(Terminal.counted(t.overruns.count, "overrun")): \(Terminal.counted(Int(t.overruns.reduce(0) { $0 + $1.frames }), "frame")) filled with silence.")
                }
                if !t.markers.isEmpty {
                    let shown = t.markers.prefix(5).map { m in
                        Terminal.clock(t.format.seconds(forFrames: m.frame)) + (m.label.isEmpty ? "" : " " + Terminal.safe(m.label))
                    }
                    let more = t.markers.count > 5 ? " and \(t.markers.count - 5) more (`tapedeck show` lists them)" : ""
                    print("  \(Terminal.counted(t.markers.count, "marker")): \(shown.joined(separator: ", "))\(more)")
                }
            }
            if report.markersNotKept > 0 {
                print("\(Terminal.counted(report.markersNotKept, "marker")) set after a take had \(TakeMarker.maxCount) \(report.markersNotKept == 1 ? "was" : "were") not kept (a take keeps at most \(TakeMarker.maxCount); split long runs with --split).")
            }
            if let run = report.runID {
                let all = report.earlierTakes + [report.take]
                print("Run \(NameRules.shortID(of: run)): \(Terminal.counted(all.count, "take")), \(Terminal.clock(all.reduce(0) { $0 + $1.seconds })) in all.")
            }
            printProgramTakes(report, storage: storage)
        }
        if status != ExitStatus.ok {
            let overruns = (report.earlierTakes + [report.take]).reduce(0) { $0 + $1.overruns.count }
            let said = report.summary + (overruns == 0 ? "" : " The \(report.runID == nil ? "take" : "run") has \(Terminal.counted(overruns, "overrun")).")
            Terminal.printError(said, priority: .warning,
                                event: report.take.state == .complete ? (overruns > 0 ? "overruns" : "silence") : "take-\(report.take.state.rawValue)")
            throw ExitCode(status)
        }
    }

    /// Runs `body`, then stops the meter and clears its line, however `body` ends.
    @MainActor
    static func endingMeter<T>(_ meter: Task<Void, Never>?, _ body: @MainActor () async throws -> T) async throws -> T {
        defer {
            meter?.cancel()
            if meter != nil { Terminal.endStatus() }
        }
        return try await body()
    }

    static func exitStatus(_ report: RecordingReport) -> Int32 {
        var status = exitStatus(report.end, overruns: (report.earlierTakes + [report.take]).reduce(0) { $0 + $1.overruns.count })
        // A run that went on after losing its device kept everything, but a take was cut short.
        if status == ExitStatus.ok || status == ExitStatus.savedWithOverruns,
           (report.earlierTakes + [report.take]).contains(where: { $0.state == .interrupted }) { status = ExitStatus.savedInterrupted }
        // A silent input matters more than overruns: the take may hold nothing at all.
        if !report.silences.isEmpty && (status == ExitStatus.ok || status == ExitStatus.savedWithOverruns) { return ExitStatus.savedSilent }
        return status
    }


    /// A split rule in words, e.g. "A new take every 1:00:00 on the clock, or before 2.1 GB".
    static func describe(_ split: SplitRule) -> String {
        var parts: [String] = []
        if let every = split.everySeconds { parts.append("every \(Terminal.clock(every).replacingOccurrences(of: ".000", with: ""))\(split.alignedToClock ? " on the clock" : "")") }
        if let bytes = split.maxBytes {
            // As typed: 2G is 2 GiB, not 2.1 GB.
            let binary = [(Int64(1) << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB")].first { bytes % $0.0 == 0 }
            parts.append("before a file passes \(binary.map { "\(bytes / $0.0) \($0.1)" } ?? Terminal.bytes(bytes))")
        }
        return "A new take " + parts.joined(separator: ", or ")
    }

    /// Every take of a split run as JSON, `last` (the report's take) at the end; `nil` without splitting.
    @MainActor
    static func runTakes(_ report: RecordingReport, last: TakeJSON, storage: any TakeStorage) -> [TakeJSON]? {
        guard report.runID != nil else { return nil }
        return report.earlierTakes.map { TakeJSON($0, session: report.session, url: try? storage.audioURL(for: $0)) } + [last]
    }

    static func exitStatus(_ end: RecordingEnd, overruns: Int) -> Int32 {
        switch end {
        case .deviceLost: ExitStatus.savedInterrupted
        case .writeFailed: ExitStatus.savedTruncated
        case .reachedDuration, .stopped: overruns == 0 ? ExitStatus.ok : ExitStatus.savedWithOverruns
        }
    }

    /// The report of `record -o`: on stderr for a stream (stdout carries the audio).
    @MainActor
    static func finish(_ report: OutputRecordingReport, json: Bool) throws {
        var status = exitStatus(report.end, overruns: report.overruns.count)
        let path: String? = if case .file(let url) = report.output { url.path } else { nil }
        // A stream's reader that went away (`| head -c`) ends the recording as a stop does.
        var report = report
        if path == nil, case .writeFailed(let e) = report.end, e.systemCode == EPIPE {
            status = report.overruns.isEmpty ? ExitStatus.ok : ExitStatus.savedWithOverruns
            report.summary = "The program reading the stream went away, so the recording stopped."
        }
        if json {
            try Terminal.printJSON(FileRecordingJSON(path: path ?? "", seconds: report.seconds, frames: report.frames,
                                                     format: FormatJSON(report.format), encoding: report.encoding,
                                                     state: report.state.rawValue, end: endName(report.end),
                                                     overruns: report.overruns.count, clippedSamples: report.clippedSamples,
                                                     message: report.summary, wallSeconds: report.wallSeconds, exitStatus: status))
        } else {
            var lines = ["Recorded \(Terminal.clock(report.seconds)), \(report.encoding)\(report.state == .complete ? "" : ", " + report.state.rawValue) → \(path ?? "stdout")"]
            if report.clippedSamples > 0 {
                lines.append("  Clipped: \(Terminal.counted(Int(report.clippedSamples), "sample")) at full scale. Lower the input gain.")
            }
            if path == nil {
                if Terminal.showsProgress { Terminal.writeStderr(Terminal.safe(lines.joined(separator: "\n")) + "\n") }
            } else {
                for line in lines { print(line) }
            }
        }
        if status != ExitStatus.ok {
            Terminal.printError(report.summary)
            throw ExitCode(status)
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
}
