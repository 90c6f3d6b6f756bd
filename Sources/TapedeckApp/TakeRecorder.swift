public import Observation
public import TapedeckCore
public import Logging
public import Foundation

/// How long to record.
public enum RecordingLength: Sendable, Hashable {
    /// Exactly this many frames.
    case frames(Int64)
    /// This many seconds, converted to frames at the rate the device negotiated.
    case seconds(Double)

    func frames(at rate: Int) -> Int64 {
        switch self {
        case .frames(let n): n
        case .seconds(let s): Int64((s * Double(rate)).rounded())
        }
    }
}

/// What a finished recording produced, for the final report.
public struct RecordingReport: Sendable, Hashable {
    /// The take recorded (the last one of a split run).
    public var take: Take
    /// A split run's id, and its takes before ``take`` in run order (empty without splitting).
    public var runID: String? = nil
    public var earlierTakes: [Take] = []
    public var session: Session
    public var fileURL: URL
    public var end: RecordingEnd
    public var wallSeconds: Double
    /// A sentence on how the recording ended, e.g. why it was interrupted.
    public var summary: String
    /// Where the silence alarm went off (``RunPlan/silenceAlarm``).
    public var silences: [SilenceEvent] = []
    /// The device's absences (``RunPlan/resume``).
    public var events: [RunEvent] = []
}

/// A run that waited for sound (VOX) or a trigger (armed) and ended before either came: no
/// take was made. Not a failure of the recorder; the command reports it and exits 0.
public struct NothingRecorded: Error, Sendable {
    public var session: Session
    public var end: RecordingEnd
    public var wallSeconds: Double
    public var silences: [SilenceEvent]
    /// A sentence saying why there is no take.
    public var summary: String
}

/// A recording whose audio is safe in its pending file but whose take could not be finished in
/// storage (the folder cannot be written, the catalog failed): the next command that opens the
/// library recovers it. Carries the report so far (the take still `recording`, the pending file's
/// URL) and the error, whose message says all that.
public struct UnfinishedRecording: Error, Sendable {
    public var report: RecordingReport
    public var error: TapedeckError
}

/// Records takes: opens the capture device, commits the take's row, runs the
/// ``RecordingEngine`` and finishes the take in storage.
///
/// Runs on the main actor; the device and writer run on their own threads. The observable
/// properties update every ``RecordingSettings/progressInterval`` while recording (ten times a
/// second by default), for meters.
@MainActor
@Observable
public final class TakeRecorder {
    /// Where the recorder is.
    public enum Phase: Sendable, Hashable {
        case idle, opening, recording, finishing, finished
    }

    @ObservationIgnored private let capture: any CaptureBackend
    @ObservationIgnored private let encoder: any AudioEncoder
    @ObservationIgnored private let store: SessionStore
    @ObservationIgnored private let logger: Logger
    @ObservationIgnored private let analyzer: (any LoudnessAnalyzer)?
    /// Where each finished take's waveform overview goes (drawn as it is written); `nil`: none.
    @ObservationIgnored private let waveforms: TakeWaveforms?
    @ObservationIgnored private let facts: TakeFacts
    @ObservationIgnored public var settings: RecordingSettings
    @ObservationIgnored private var engine: RecordingEngine?
    /// The run being recorded and its session's name, so ``target`` follows the run's takes.
    @ObservationIgnored private var run: (sequence: RunSequence, session: String)?
    @ObservationIgnored private var stopRequested = false
    @ObservationIgnored private var triggerRequested = false

    public private(set) var phase: Phase = .idle
    /// Frames recorded so far.
    public private(set) var frames: Int64 = 0
    /// Per-channel peaks (0...1) over the last update interval.
    public private(set) var peaks: [Float] = []
    /// Gaps filled with silence so far.
    public private(set) var overrunCount = 0
    /// The format negotiated with the device.
    public private(set) var format: AudioFormat?
    /// Samples at full scale so far.
    public private(set) var clippedSamples: Int64 = 0
    /// Where the take being recorded goes, once its row is committed (for a banner).
    public private(set) var target: RecordingTarget?
    /// In a split run: the take being written (from 1), its frames, and frames until the next
    /// time split (`nil` without one).
    public private(set) var takeIndex = 1
    public private(set) var takeFrames: Int64 = 0
    public private(set) var framesToSplit: Int64?
    /// What a run with no take open waits for (`nil` while a take records), the frames of
    /// pre-roll it holds meanwhile, and the silence alarms raised so far.
    public private(set) var waiting: RecordingProgress.Waiting?
    public private(set) var preRollFrames: Int64 = 0
    public private(set) var silenceAlarms = 0
    /// A VOX take in its hold time, and the markers set so far.
    public private(set) var voxHolding = false
    public private(set) var markerCount = 0

    public init(capture: any CaptureBackend, encoder: any AudioEncoder, store: SessionStore,
                settings: RecordingSettings, logger: Logger, analyzer: (any LoudnessAnalyzer)? = nil, facts: TakeFacts = TakeFacts(),
                waveforms: TakeWaveforms? = nil) {
        self.analyzer = analyzer
        self.waveforms = waveforms
        self.facts = facts
        self.capture = capture
        self.encoder = encoder
        self.store = store
        self.settings = settings
        self.logger = logger
    }

    /// Seconds recorded so far.
    public var seconds: Double { format.map { $0.seconds(forFrames: frames) } ?? 0 }

    /// Asks the recording to stop; the device is drained and the take finalized.
    /// - Thread: main actor. Never blocks.
    public func stop() {
        stopRequested = true
        engine?.stop()
    }

    /// Records one take.
    ///
    /// The device is opened first (a missing device fails before anything is written), then the
    /// take's row is committed, then audio flows until `duration` frames, ``stop()``, device loss
    /// or a write failure. In every case the captured audio is kept and the file finalized.
    /// - Parameters:
    ///   - sessionName: the session to record into (created if missing); `nil` for the most recent.
    ///   - takeName: the take's display name; `nil` for "Take N".
    ///   - duration: the exact length (of the whole run); `nil` to record until ``stop()``.
    ///   - plan: how the run goes (``RunPlan``): splits (`--split`, `--split-size`), where each
    ///     next take is made ready before its boundary and each ended one finished while audio
    ///     flows on, so the takes' frames, concatenated, are exactly what the device delivered;
    ///     VOX or a trigger that begin takes, with pre-roll; the silence alarm.
    /// - Throws: `.cancelled` when ``stop()`` came before the device delivered anything (no take
    ///   is made); ``NothingRecorded`` when a run that waited for sound or a trigger ended
    ///   before either came.
    /// - Thread: main actor; suspends while recording.
    public func record(sessionName: String?, takeName: String?, duration: RecordingLength?,
                       plan: RunPlan = RunPlan()) async throws -> RecordingReport {
        try encoder.validate(settings.format)
        // A stop asked for before this call (a stop button pressed as recording was asked for)
        // is kept: it ends the recording before anything is made. Cleared when the call ends.
        defer { stopRequested = false }
        phase = .opening
        defer { if phase != .finished { phase = .idle } }
        // The device first: a missing one fails before anything, even a session, is made.
        let (engine, negotiated) = try await openEngine(duration: duration)
        let session: Session
        do {
            session = try await store.sessionForRecording(named: sessionName)
            if stopRequested { throw TapedeckError(.cancelled, "Stopped before recording began; no take was made.") }
        } catch {
            engine.close()
            throw error
        }

        let storage = store.storage
        let encoder = self.encoder
        let runID = plan.makesRun ? UUID().uuidString.lowercased() : nil
        // A run that waits for sound or a trigger makes its first take when that comes.
        var first: PendingTake?
        if !plan.startsIdle {
            do {
                first = try await store.perform {
                    var pending = try storage.beginTake(in: session.id, named: takeName, format: negotiated, encoding: encoder.name,
                                                        fileExtension: encoder.fileExtension, startDate: Date())
                    if let runID {
                        do {
                            pending.take = try storage.annotateTake(pending.take.id, TakeAnnotations(run: TakeRun(id: runID, index: 1, offset: 0, began: .start)))
                        } catch {
                            _ = try? storage.completeRecovery(of: pending.take, repaired: nil)
                            throw error
                        }
                    }
                    return pending
                }
            } catch {
                engine.close()
                throw error
            }
        }
        let sequence = runID.map {
            RunSequence(runID: $0, first: first, storage: storage, encoder: encoder, session: session, baseName: takeName, logger: logger,
                        analyzer: analyzer, facts: facts, waveforms: waveforms)
        }
        run = sequence.map { ($0, session.name) }
        defer { run = nil }
        // The first take's loudness (a run's first take is the run's to finish when it splits).
        let firstNotes = sequence?.notes(for: 1) ?? WriterNotes()
        self.engine = engine
        if stopRequested { engine.stop() }
        if triggerRequested { engine.trigger() }
        if let first {
            logger.debug("Take \(first.take.id) committed in state recording in session \(session.id); audio goes to \(first.fileURL.path) (\(encoder.name)), checkpoint every \(settings.checkpointInterval).")
        }
        let folder = first?.fileURL.deletingLastPathComponent() ?? storage.rootURL
        let watch = settings.warnFreeMinutes > 0
            ? FreeSpace(path: folder.path, warnBelowBytes: Int64(settings.warnFreeMinutes * 60 * Double(negotiated.bytesPerSecond)))
            : nil
        if let watch, let free = FreeSpace.available(at: watch.path), free < watch.warnBelowBytes {
            logger.warning("\(FreeSpace.lowSpaceMessage(free: free, format: negotiated, path: watch.path))")
        }
        target = first.map { RecordingTarget(take: "\(session.name)/\($0.take.name)", fileURL: $0.fileURL) }
            ?? RecordingTarget(take: session.name, fileURL: storage.rootURL.appendingPathComponent(" "), waiting: true)
        phase = .recording

        let meter = followProgress(of: engine)
        defer { meter?.cancel() }

        var result: RecordingResult
        do {
            var makeWriter: (@Sendable (AudioFormat) throws -> any TakeWriter)?
            if let first {
                let metadata = facts.metadata(for: first.take, sessionName: session.name)
                makeWriter = Self.writerMaker(encoder: encoder, url: first.fileURL, metadata: metadata, analyzer: analyzer, waveform: waveforms != nil,
                                              notes: firstNotes, logger: logger)
            }
            result = try await engine.record(watching: watch, plan: plan, sequence: sequence, firstFileURL: first?.fileURL, makeWriter: makeWriter)
        } catch {
            // No audio was written: remove the row (and any empty file) so nothing half-made remains.
            if let first {
                _ = try? await store.perform {
                    try? FileManager.default.removeItem(at: first.fileURL)
                    return try storage.completeRecovery(of: first.take, repaired: nil)
                }
            }
            try? await store.refreshIfLoaded()
            throw error
        }
        phase = .finishing
        apply(engine.takeProgress())
        let (state, outcomeSummary) = Self.outcome(result.end)
        var summary = outcomeSummary
        if let problems = sequence?.problems, !problems.isEmpty { summary += " " + problems.joined(separator: " ") }
        if !result.events.isEmpty {
            let total = result.events.reduce(0) { $0 + $1.seconds }
            summary += " The device was lost \(result.events.count == 1 ? "once" : "\(result.events.count) times") (\(RunText.seconds(total.rounded())) away in all); every take before and after is kept."
        }
        if !result.silences.isEmpty {
            summary += " The input was silent \(result.silences.count == 1 ? "once" : "\(result.silences.count) times") for \(RunText.seconds(plan.silenceAlarm?.seconds ?? 0)) or more: check the microphone."
        }
        var earlier = sequence?.finishedTakes ?? []
        guard result.takeOpenAtEnd else {
            // The run ended waiting: every take it made is finished already.
            try await store.refreshIfLoaded()
            phase = .finished
            self.engine = nil
            guard let last = earlier.popLast() else {
                throw NothingRecorded(session: session, end: result.end, wallSeconds: result.wallSeconds, silences: result.silences,
                    summary: plan.armed ? "The trigger never came, so no take was made." : "No sound reached \(RunText.decibels(plan.vox?.thresholdDB ?? 0)), so no take was made.")
            }
            frames = last.frames
            return RecordingReport(take: last, runID: runID, earlierTakes: earlier, session: session, fileURL: try storage.audioURL(for: last),
                                   end: result.end, wallSeconds: result.wallSeconds, summary: summary, silences: result.silences, events: result.events)
        }
        // The run's last take is the one to finish here (the first, without splitting).
        guard let pending = sequence?.pending(index: result.takeIndex) ?? first else {
            throw TapedeckError(.internalError, "The run's last take (\(result.takeIndex)) is unknown.")
        }
        let lastURL = pending.fileURL
        if case .writeFailed = result.end, !result.writerFinished {
            // The writer could not finalize its file: trust the file's real length instead.
            if let repaired = try? await store.perform({ try encoder.repair(fileAt: lastURL) }) {
                result.frames = repaired.frames
            }
        }
        frames = result.frames

        let (finalFrames, overruns, clipped) = (result.frames, result.overruns, result.clippedSamples)
        clippedSamples = clipped
        var take: Take
        let finalState = state
        do {
            take = try await store.perform {
                try storage.finishTake(pending, frames: finalFrames, state: finalState, overruns: overruns)
            }
        } catch {
            let reason = (error as? TapedeckError) ?? TapedeckError(.io, "\(error)")
            var unfinished = pending.take
            unfinished.frames = finalFrames
            unfinished.overruns = overruns
            let seconds = unfinished.format.seconds(forFrames: finalFrames)
            let message = "\(reason.message) The recording itself is safe: \(String(format: "%.1f", seconds)) s in \(lastURL.path). "
                + "The next tapedeck command that opens the library recovers it as take \"\(unfinished.name)\" (or run `tapedeck doctor --repair` once the cause is fixed)."
            phase = .finished
            self.engine = nil
            throw UnfinishedRecording(
                report: RecordingReport(take: unfinished, runID: runID, earlierTakes: earlier, session: session, fileURL: lastURL,
                                        end: result.end, wallSeconds: result.wallSeconds, summary: message, silences: result.silences, events: result.events),
                error: TapedeckError(reason.code, message, systemCode: reason.systemCode))
        }
        let markers = result.markers
        let notes = result.takeIndex <= 1 ? firstNotes : sequence?.notes(for: result.takeIndex)
        let loudness = notes?.loudness
        let began = notes?.began
        if clipped > 0 || runID != nil || !markers.isEmpty || loudness != nil || began != nil {
            // The take is final already; its clip count and run link are notes on it, so failing
            // to store them is logged, never a lost take.
            var changed = take.annotations
            changed.clippedSamples = clipped
            changed.markers = markers
            changed.loudness = loudness
            changed.began = began
            if let runID {
                changed.run = TakeRun(id: runID, index: result.takeIndex, offset: result.takeOffset, began: result.takeBegan,
                                      ended: Self.boundary(result.end))
            }
            let (id, annotations) = (take.id, changed)
            do {
                take = try await store.perform { try storage.annotateTake(id, annotations) }
            } catch {
                logger.warning("Could not store the take's clip count and run (\(clipped) samples at full scale): \(error)")
                take.annotations = annotations  // the file carries them all the same
            }
        }
        // The overview drawn as the take was written, for pages that show it (`tapedeck serve`).
        if let waveforms, let peaks = notes?.waveform {
            let finished = take
            _ = try? await store.perform { waveforms.store(peaks, for: finished) }
        }
        // Markers go into the finished file too, where its format has a place for them.
        if !take.markers.isEmpty, let url = try? storage.audioURL(for: take) {
            let (written, logger) = (take, self.logger)
            _ = try? await store.perform { TakeFacts.writeMarkers(of: written, to: url, with: encoder, logger: logger) }
        }
        try await store.refreshIfLoaded()
        phase = .finished
        self.engine = nil
        return RecordingReport(take: take, runID: runID, earlierTakes: earlier, session: session, fileURL: try storage.audioURL(for: take),
                               end: result.end, wallSeconds: result.wallSeconds, summary: summary, silences: result.silences, events: result.events)
    }

    /// Makes the first take's writer on the writer thread, measured when there is an analyzer.
    nonisolated private static func writerMaker(encoder: any AudioEncoder, url: URL, metadata: TakeMetadata,
                                                analyzer: (any LoudnessAnalyzer)?, waveform: Bool, notes: WriterNotes,
                                                logger: Logger) -> @Sendable (AudioFormat) throws -> any TakeWriter {
        { format in
            let writer = LoudnessMeasuring.wrap(try encoder.makeWriter(at: url, format: format, metadata: metadata),
                                                format: format, analyzer: analyzer, waveform: waveform, into: notes, logger: logger)
            // The new file's name must survive a power cut as surely as its checkpoints.
            try DurableFiles().syncDirectory(url.deletingLastPathComponent())
            return writer
        }
    }

    /// Begins the take of an armed run (`--armed`): Enter on the terminal, SIGUSR2.
    /// - Thread: main actor. Never blocks.
    public func trigger() {
        triggerRequested = true
        engine?.trigger()
    }

    /// Ends the take at the audio being captured now and begins the next (a run recorded with
    /// ``RunPlan/splitOnRequest``). - Thread: main actor. Never blocks.
    public func split() {
        engine?.split()
    }

    /// Sets a marker at the audio being captured now (`m` on the terminal, SIGUSR1).
    /// - Thread: main actor. Never blocks.
    public func mark(label: String = "") {
        engine?.mark(label: label)
    }



    /// Why the last take of a run ended, as its run link says.
    static func boundary(_ end: RecordingEnd) -> TakeBoundary {
        switch end {
        case .reachedDuration: .duration
        case .stopped: .stopped
        case .deviceLost: .deviceLost
        case .writeFailed: .writeFailed
        }
    }

    /// Opens the device (a missing one fails before anything is written) and returns the engine
    /// and the format it negotiated. - Thread: main actor; suspends while the device opens.
    private func openEngine(duration: RecordingLength?) async throws -> (RecordingEngine, AudioFormat) {
        let frameLimit = duration?.frames(at: settings.format.sampleRate)
        let probe = RecordingEngine(backend: capture, settings: settings, frameLimit: frameLimit, logger: logger)
        let negotiated = try await probe.open()
        var engine = probe
        if negotiated != settings.format {
            logger.warning("The device records \(negotiated), not the requested \(settings.format).")
            if let duration, negotiated.sampleRate != settings.format.sampleRate {
                // Count the requested length at the rate the device really runs at.
                probe.close()
                engine = RecordingEngine(backend: capture, settings: settings,
                                         frameLimit: duration.frames(at: negotiated.sampleRate), logger: logger)
                _ = try await engine.open()
            }
        }
        if stopRequested {
            engine.close()
            throw TapedeckError(.cancelled, "Stopped before recording began; nothing was made.")
        }
        format = negotiated
        peaks = Array(repeating: 0, count: negotiated.channels)
        return (engine, negotiated)
    }

    /// Records to a plain file outside the library, or to a stream (`record -o FILE`, `-o -`),
    /// with the same engine: the file is created new (never replacing one), its header brought
    /// up to date and synced at every checkpoint, so a crash keeps everything up to the last
    /// one; a stream's header says "length unknown".
    /// - Throws: `.alreadyExists` when the file exists, `.cancelled` for a stop before audio.
    /// - Thread: main actor; suspends while recording.
    public func record(to output: RecordingOutput, name: String, duration: RecordingLength?) async throws -> OutputRecordingReport {
        try encoder.validate(settings.format)
        // A stop asked for before this call (a stop button pressed as recording was asked for)
        // is kept: it ends the recording before anything is made. Cleared when the call ends.
        defer { stopRequested = false }
        phase = .opening
        defer { if phase != .finished { phase = .idle } }
        if case .file(let url) = output, FileManager.default.fileExists(atPath: url.path) {
            throw TapedeckError(.alreadyExists, "\(url.path) exists already; it was left as it is. Choose another file name.")
        }
        let (engine, negotiated) = try await openEngine(duration: duration)
        self.engine = engine
        if stopRequested { engine.stop() }
        let encoder = self.encoder
        let metadata = TakeMetadata(takeName: name, sessionName: "", takeNumber: 1, startDate: Date(),
                                    identity: facts.identity, source: facts.source)
        if case .file(let url) = output { target = RecordingTarget(take: nil, fileURL: url) }
        phase = .recording
        let meter = followProgress(of: engine)
        defer { meter?.cancel() }
        var result: RecordingResult
        do {
            result = try await engine.record(watching: nil) { format in
                switch output {
                case .file(let url):
                    let writer = try encoder.makeWriter(at: url, format: format, metadata: metadata)
                    try DurableFiles().syncDirectory(url.deletingLastPathComponent())
                    return writer
                case .stream(let fd):
                    return try encoder.makeStreamWriter(to: fd, format: format, metadata: metadata)
                }
            }
        } catch {
            if case .file(let url) = output { unlink(url.path) }
            throw error
        }
        phase = .finishing
        apply(engine.takeProgress())
        if case .writeFailed = result.end, !result.writerFinished, case .file(let url) = output {
            if let repaired = try? await BlockingWork.detached({ try encoder.repair(fileAt: url) }) { result.frames = repaired.frames }
        }
        frames = result.frames
        clippedSamples = result.clippedSamples
        let (state, summary) = Self.outcome(result.end)
        phase = .finished
        self.engine = nil
        return OutputRecordingReport(output: output, format: negotiated, encoding: encoder.name, frames: result.frames, state: state,
                                     overruns: result.overruns, clippedSamples: result.clippedSamples, end: result.end,
                                     wallSeconds: result.wallSeconds, summary: summary)
    }

    /// Refreshes the observable progress from `engine` every ``RecordingSettings/progressInterval``
    /// while recording; `nil` when nothing watches it. - Thread: main actor.
    private func followProgress(of engine: RecordingEngine) -> Task<Void, Never>? {
        settings.progressInterval.map { interval in
            Task { @MainActor [weak self] in
                while !Task.isCancelled, let self, self.phase == .recording {
                    self.apply(engine.takeProgress())
                    try? await Task.sleep(for: interval)
                }
            }
        }
    }

    /// The state a recording that ended so leaves its take in, and a sentence saying why.
    static func outcome(_ end: RecordingEnd) -> (TakeState, String) {
        switch end {
        case .reachedDuration: (.complete, "Recorded the requested length.")
        case .stopped: (.complete, "Stopped on request; everything captured was kept.")
        case .deviceLost(let e): (.interrupted, "\(e.message) Everything captured before that was kept.")
        case .writeFailed(let e): (.truncated, "\(e.message) Everything written before that was kept.")
        }
    }

    private func apply(_ progress: RecordingProgress) {
        if progress.takeIndex != takeIndex, progress.waiting == nil, let run, let pending = run.sequence.pending(index: progress.takeIndex) {
            // A split run went on in its next take.
            target = RecordingTarget(take: "\(run.session)/\(pending.take.name)", fileURL: pending.fileURL)
        }
        frames = progress.frames
        takeIndex = progress.takeIndex
        takeFrames = progress.takeFrames
        framesToSplit = progress.framesToSplit
        waiting = progress.waiting
        preRollFrames = progress.preRollFrames
        silenceAlarms = progress.silenceAlarms
        voxHolding = progress.voxHolding
        markerCount = progress.markers
        peaks = progress.peaks
        overrunCount = progress.overrunCount
        clippedSamples = progress.clippedSamples
    }
}

/// Where a recording goes: the take (`SESSION/TAKE`; `nil` for a file outside the library) and
/// the file.
public struct RecordingTarget: Sendable, Hashable {
    public var take: String?
    public var fileURL: URL
    /// A run waiting for sound or a trigger: ``take`` is the session's name, and no file exists yet.
    public var waiting = false
}

/// Where `record -o` writes: a plain file outside the library, or a stream (stdout).
public enum RecordingOutput: Sendable, Hashable {
    case file(URL)
    /// A file descriptor that cannot seek; never closed by the recorder.
    case stream(Int32)
}

/// What a recording to a file or stream produced (``TakeRecorder/record(to:name:duration:)``).
public struct OutputRecordingReport: Sendable, Hashable {
    public var output: RecordingOutput
    public var format: AudioFormat
    public var encoding: String
    public var frames: Int64
    /// As a take in the library would be: complete, interrupted or truncated.
    public var state: TakeState
    public var overruns: [OverrunEvent]
    public var clippedSamples: Int64
    public var end: RecordingEnd
    public var wallSeconds: Double
    public var summary: String

    /// Length in seconds.
    public var seconds: Double { format.seconds(forFrames: frames) }
}

/// How a run's settings read in messages: `3 s`, `2.5 s`, `-40 dBFS`. Plain functions; any
/// thread, never block.
public enum RunText {
    public static func seconds(_ s: Double) -> String {
        s == s.rounded() ? "\(Int(s)) s" : String(format: "%.1f s", s)
    }

    public static func decibels(_ db: Double) -> String {
        db == db.rounded() ? "\(Int(db)) dBFS" : String(format: "%.1f dBFS", db)
    }
}
