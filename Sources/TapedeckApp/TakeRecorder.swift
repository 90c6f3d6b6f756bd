public import Observation
public import TapedeckCore
public import Logging
public import Foundation

/// Records takes: opens the capture device, commits the take's row, runs the
/// `RecordingEngine` and finishes the take in storage.
///
/// Runs on the main actor; the device and writer run on their own threads. The observable
/// properties update every `RecordingSettings.progressInterval` while recording (ten times a
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
    @ObservationIgnored private var facts: TakeFacts
    /// Seals every take into its signed chain (`provenance.sign`); `nil`: takes are not signed.
    @ObservationIgnored private let sealer: (any TakeSealing)?
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
    /// Per-channel RMS (0...1) over the same interval; empty until measured.
    public private(set) var rms: [Float] = []
    /// Gaps filled with silence so far.
    public private(set) var overrunCount = 0
    /// The format negotiated with the device.
    public private(set) var format: AudioFormat?
    /// The device recorded from, as its backend names it once open (a PulseAudio source's name
    /// where the config said "the default"); `nil` when no more is known than the configured
    /// name. The takes' files name it too.
    public private(set) var deviceName: String?
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
    /// The latest silence alarm, and whether the input is still silent (`RecordingProgress.lastSilence`).
    public private(set) var lastSilence: SilenceEvent?
    public private(set) var silenceOngoing = false
    /// A VOX take in its hold time, and the markers set so far.
    public private(set) var voxHolding = false
    public private(set) var markerCount = 0
    /// A resuming run whose device is lost: when it went; `nil` while it delivers.
    public private(set) var deviceLostAt: Date?
    /// Attempts to open the lost device again so far (`RecordingProgress.deviceRetries`).
    public private(set) var deviceRetries = 0

    public init(capture: any CaptureBackend, encoder: any AudioEncoder, store: SessionStore,
                settings: RecordingSettings, logger: Logger, analyzer: (any LoudnessAnalyzer)? = nil, facts: TakeFacts = TakeFacts(),
                waveforms: TakeWaveforms? = nil, sealer: (any TakeSealing)? = nil) {
        self.sealer = sealer
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

    /// Ends the recording as its length would, on the wall clock (`RecordingEngine.stopAtLength()`).
    /// - Thread: main actor. Never blocks.
    public func stopAtLength() {
        stopRequested = true
        engine?.stopAtLength()
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
    ///   - plan: how the run goes (`RunPlan`): splits (`--split`, `--split-size`), where each
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
                first = try await beginFirstTake(in: session, named: takeName, format: negotiated, runID: runID)
            } catch {
                engine.close()
                throw error
            }
        }
        let sequence = runID.map {
            RunSequence(runID: $0, first: first, storage: storage, encoder: encoder, session: session, baseName: takeName, logger: logger,
                        analyzer: analyzer, facts: facts, waveforms: waveforms, sealer: sealer)
        }
        run = sequence.map { ($0, session.name) }
        defer { run = nil }
        // The first take's loudness (a run's first take is the run's to finish when it splits).
        let firstNotes = sequence?.notes(for: 1) ?? WriterNotes()
        self.engine = engine
        if stopRequested { engine.stop() }
        if triggerRequested { engine.trigger() }
        if let first {
            logger.info("Take \(first.take.id) committed in state recording in session \(session.id); audio goes to \(first.fileURL.path) (\(encoder.name)), checkpoint every \(settings.checkpointInterval).")
        }
        let watch = freeSpaceWatch(folder: first?.fileURL.deletingLastPathComponent() ?? storage.rootURL, format: negotiated)
        target = first.map { RecordingTarget(take: "\(session.name)/\($0.take.name)", fileURL: $0.fileURL, takeID: $0.take.id, sessionID: session.id, runID: runID) }
            ?? RecordingTarget(take: session.name, fileURL: storage.rootURL.appendingPathComponent(" "), waiting: true, sessionID: session.id, runID: runID)
        phase = .recording

        let meter = followProgress(of: engine)
        defer { meter?.cancel() }

        var result: RecordingResult
        do {
            var makeWriter: (@Sendable (AudioFormat) throws -> any TakeWriter)?
            if let first {
                let (metadata, audioURL) = (facts.metadata(for: first.take, sessionName: session.name), try storage.audioURL(for: first.take))
                let writing = TakeWriting(encoder: encoder, analyzer: analyzer, waveform: waveforms != nil, sealer: sealer, logger: logger)
                makeWriter = { try writing.make(at: first.fileURL, audioURL: audioURL, takeID: first.take.id, format: $0, metadata: metadata, notes: firstNotes) }
            }
            result = try await engine.record(watching: watch, plan: plan, sequence: sequence, firstFileURL: first?.fileURL, makeWriter: makeWriter)
        } catch {
            await discardUnwrittenTake(first)
            throw error
        }
        phase = .finishing
        apply(engine.takeProgress())
        let state = Self.outcome(result.end).0
        let summary = Self.summary(of: result, plan: plan, problems: sequence?.problems ?? [])
        let earlier = sequence?.finishedTakes ?? []
        guard result.takeOpenAtEnd else {
            // The run ended waiting: every take it made is finished already.
            return try await reportOfWaitingRun(result, plan: plan, runID: runID, finished: earlier, session: session, summary: summary)
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
            throw unfinishedRecording(error, pending: pending, result: result, runID: runID, earlier: earlier, session: session)
        }
        let notes = result.takeIndex <= 1 ? firstNotes : sequence?.notes(for: result.takeIndex)
        take = await storeNotes(on: take, result: result, notes: notes, runID: runID)
        try await store.refreshIfLoaded()
        phase = .finished
        self.engine = nil
        return RecordingReport(take: take, runID: runID, earlierTakes: earlier, session: session, fileURL: try storage.audioURL(for: take),
                               end: result.end, wallSeconds: result.wallSeconds, summary: summary, silences: result.silences, events: result.events,
                               markersNotKept: result.markersNotKept, programTakes: sequence?.finishedPrograms ?? [])
    }

    /// Commits the first take's row (linked to the run as its take 1 when there is one); a take
    /// whose run link cannot be stored is recovered away again.
    /// - Thread: main actor; suspends while storage works on its queue.
    private func beginFirstTake(in session: Session, named takeName: String?, format negotiated: AudioFormat,
                                runID: String?) async throws -> PendingTake {
        let storage = store.storage
        let encoder = self.encoder
        // A signed take says so from its start (SIGNED=key), a run's first take where it stands.
        let tags = TakeCompanions.tags(sealedBy: sealer)
        return try await store.perform {
            // A name template (`%Y-%m-%d %H.%M`) is made at the take's start; a name it made
            // already in the session gets " (2)", " (3)" (a plain name taken is refused).
            let start = Date()
            let name = takeName.map { NameTemplate.expand($0, at: start) }
            let attempts = takeName.map(NameTemplate.isTemplate) == true ? 9 : 1
            var made: PendingTake?
            for attempt in 1...attempts where made == nil {
                do {
                    made = try storage.beginTake(in: session.id, named: name.map { attempt == 1 ? $0 : "\($0) (\(attempt))" }, format: negotiated,
                                                 encoding: encoder.name, fileExtension: encoder.fileExtension, startDate: start)
                } catch let error as TapedeckError where error.code == .alreadyExists && attempt < attempts {
                    continue
                }
            }
            guard var pending = made else { throw TapedeckError(.alreadyExists, "Every name \(name ?? "") makes is taken in this session.") }
            if runID != nil || !tags.isEmpty {
                do {
                    pending.take = try storage.annotateTake(pending.take.id, TakeAnnotations(tags: tags, run: runID.map { TakeRun(id: $0, index: 1, offset: 0, began: .start) }))
                } catch {
                    _ = try? storage.completeRecovery(of: pending.take, repaired: nil)
                    throw error
                }
            }
            return pending
        }
    }

    /// The free-space watch of a recording into `folder` (``RecordingSettings/warnFreeMinutes``;
    /// `nil` when off), warning at once when the disk is low already. - Thread: main actor.
    private func freeSpaceWatch(folder: URL, format negotiated: AudioFormat) -> FreeSpace? {
        let watch = settings.warnFreeMinutes > 0
            ? FreeSpace(path: folder.path, warnBelowBytes: Int64(settings.warnFreeMinutes * 60 * Double(negotiated.bytesPerSecond)))
            : nil
        if let watch, let free = FreeSpace.available(at: watch.path), free < watch.warnBelowBytes {
            logger.warning("\(FreeSpace.lowSpaceMessage(free: free, format: negotiated, path: watch.path))")
        }
        return watch
    }

    /// Removes the row of a take no audio was written to (and any empty file), so nothing
    /// half-made remains. - Thread: main actor; suspends while storage works.
    private func discardUnwrittenTake(_ first: PendingTake?) async {
        let storage = store.storage
        if let first {
            _ = try? await store.perform {
                try? FileManager.default.removeItem(at: first.fileURL)
                return try storage.completeRecovery(of: first.take, repaired: nil)
            }
        }
        try? await store.refreshIfLoaded()
    }

    /// The report's sentence on how a run ended: the outcome, the problems finishing earlier
    /// takes, the device's absences and the silence alarms. - Thread: main actor. Never blocks.
    private static func summary(of result: RecordingResult, plan: RunPlan, problems: [String]) -> String {
        var summary = outcome(result.end).1
        if !problems.isEmpty { summary += " " + problems.joined(separator: " ") }
        let lost = result.events.filter { $0.kind != RunEvent.noRoom }
        if !lost.isEmpty {
            let total = lost.reduce(0) { $0 + $1.seconds }
            summary += " The device was lost \(lost.count == 1 ? "once" : "\(lost.count) times") (\(RunText.seconds(total.rounded())) away in all); every take before and after is kept."
        }
        let waits = result.events.filter { $0.kind == RunEvent.noRoom }
        if !waits.isEmpty {
            let total = waits.reduce(0) { $0 + $1.seconds }
            summary += " The disk had no room for a take \(waits.count == 1 ? "once" : "\(waits.count) times"): the take before ended at --split-size and \(RunText.seconds(total.rounded())) of audio in all were not kept. Free some space before the next recording."
        }
        if result.markersNotKept > 0 {
            summary += " \(result.markersNotKept == 1 ? "One marker was" : "\(result.markersNotKept) markers were") not kept: a take keeps at most \(TakeMarker.maxCount)."
        }
        if !result.silences.isEmpty {
            summary += " The input was silent \(result.silences.count == 1 ? "once" : "\(result.silences.count) times") for \(RunText.seconds(plan.silenceAlarm?.seconds ?? 0)) or more: check the microphone."
        }
        return summary
    }

    /// The report of a run that ended waiting, every take it made finished already: its last
    /// take, or ``NothingRecorded`` when it made none. - Thread: main actor; suspends.
    private func reportOfWaitingRun(_ result: RecordingResult, plan: RunPlan, runID: String?, finished: [Take], session: Session,
                                    summary: String) async throws -> RecordingReport {
        var earlier = finished
        try await store.refreshIfLoaded()
        phase = .finished
        self.engine = nil
        guard let last = earlier.popLast() else {
            throw NothingRecorded(session: session, end: result.end, wallSeconds: result.wallSeconds, silences: result.silences,
                summary: plan.armed ? "The trigger never came, so no take was made." : "No sound reached \(RunText.decibels(plan.vox?.thresholdDB ?? 0)), so no take was made.")
        }
        frames = last.frames
        return RecordingReport(take: last, runID: runID, earlierTakes: earlier, session: session, fileURL: try store.storage.audioURL(for: last),
                               end: result.end, wallSeconds: result.wallSeconds, summary: summary, silences: result.silences, events: result.events,
                               markersNotKept: result.markersNotKept, programTakes: run?.sequence.finishedPrograms ?? [])
    }

    /// The error of a take whose audio is safe but which storage could not finish: its message
    /// says where the audio is and that the next open recovers it. - Thread: main actor.
    private func unfinishedRecording(_ error: any Error, pending: PendingTake, result: RecordingResult, runID: String?,
                                     earlier: [Take], session: Session) -> UnfinishedRecording {
        let lastURL = pending.fileURL
        let (finalFrames, overruns) = (result.frames, result.overruns)
        let reason = (error as? TapedeckError) ?? TapedeckError(.io, "\(error)")
        var unfinished = pending.take
        unfinished.frames = finalFrames
        unfinished.overruns = overruns
        let seconds = unfinished.format.seconds(forFrames: finalFrames)
        let message = "\(reason.message) The recording itself is safe: \(String(format: "%.1f", seconds)) s in \(lastURL.path). "
            + "The next tapedeck command that opens the library recovers it as take \"\(unfinished.name)\" (or run `tapedeck doctor --repair` once the cause is fixed)."
        phase = .finished
        self.engine = nil
        return UnfinishedRecording(
            report: RecordingReport(take: unfinished, runID: runID, earlierTakes: earlier, session: session, fileURL: lastURL,
                                    end: result.end, wallSeconds: result.wallSeconds, summary: message, silences: result.silences, events: result.events,
                                    markersNotKept: result.markersNotKept),
            error: TapedeckError(reason.code, message, systemCode: reason.systemCode))
    }

    /// Stores what the finished take's recording learnt: its clip count, markers, loudness,
    /// first frame's time and run link as notes on it, its waveform overview, and its markers in
    /// the file. The take is final already, so a failure here is logged, never a lost take.
    /// - Thread: main actor; suspends while storage works.
    private func storeNotes(on finishedTake: Take, result: RecordingResult, notes: WriterNotes?, runID: String?) async -> Take {
        var take = finishedTake
        let storage = store.storage
        let encoder = self.encoder
        let clipped = result.clippedSamples
        let markers = result.markers
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
            // Each fact is stored on its own merits: one that breaks a limit is left out and
            // said, never the others.
            let (id, annotations) = (take.id, changed)
            do {
                let (stored, leftOut) = try await store.perform { try storage.annotateTake(id, keepingValid: annotations) }
                take = stored
                if !leftOut.isEmpty {
                    logger.warning("Take \"\(take.name)\" keeps its other facts, but not \(leftOut.joined(separator: ", ")).")
                }
            } catch {
                logger.warning("Could not store the take's clip count and run (\(clipped) samples at full scale): \(error)")
                take.annotations = annotations.keepingValid().kept  // the file carries them all the same
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
        return take
    }

    /// Begins the take of an armed run (`--armed`): Enter on the terminal, SIGUSR2.
    /// - Thread: main actor. Never blocks.
    public func trigger() {
        triggerRequested = true
        engine?.trigger()
    }

    /// Ends the take at the audio being captured now and begins the next (a run recorded with
    /// `RunPlan.splitOnRequest`). - Thread: main actor. Never blocks.
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
            if negotiated != settings.chosenFormat(filledFrom: negotiated) { logger.warning("The device records \(negotiated), not the requested \(settings.format).") }
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
        deviceName = engine.deviceName
        if let name = deviceName { facts.source?.device = name }
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
        var described = TakeMetadata(takeName: name, sessionName: "", takeNumber: 1, startDate: Date(),
                                     identity: facts.identity, source: facts.source)
        // A stream's header is written once: with the length it will have, when that is known.
        described.expectedFrames = duration?.frames(at: negotiated.sampleRate)
        let metadata = described
        if case .file(let url) = output { target = RecordingTarget(take: nil, fileURL: url) }
        let (sealer, writing) = (self.sealer, TakeWriting(encoder: encoder, analyzer: nil, waveform: false, sealer: self.sealer, logger: logger))
        phase = .recording
        let meter = followProgress(of: engine)
        defer { meter?.cancel() }
        var result: RecordingResult
        do {
            result = try await engine.record(watching: nil) { format in
                switch output {
                case .file(let url):
                    // Signed as a take is (`provenance.sign`): its chain beside it, FILE.chain.
                    return try writing.make(at: url, audioURL: url, takeID: UUID().uuidString.lowercased(), format: format, metadata: metadata, notes: WriterNotes())
                case .stream(let fd):
                    guard sealer == nil else {
                        throw TapedeckError(.invalidArgument, "provenance.sign is on, and a recording to stdout has no place for its signed chain. Record into the library or to a file (-o FILE), or add --set provenance.sign=false for this run.")
                    }
                    return try encoder.makeStreamWriter(to: fd, format: format, metadata: metadata)
                }
            }
        } catch {
            if case .file(let url) = output { for u in [url] + TakeCompanions.urls(of: url) { unlink(u.path) } }
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

    /// Brings the observable progress up to date now, for a reader that asks now and then (the
    /// recorder's control socket, ``RecorderControl``) when nothing refreshes it on a timer
    /// (`RecordingSettings.progressInterval` is `nil`); the peaks are then those of the audio
    /// that arrived since the last call (the writer takes audio in batches: with none new, the
    /// last batch's stay). - Thread: main actor. Never blocks.
    public func refreshProgress() {
        guard settings.progressInterval == nil, phase == .recording, let engine else { return }
        let (before, held, heldRMS) = (frames, peaks, rms)
        apply(engine.takeProgress())
        if frames == before { (peaks, rms) = (held, heldRMS) }
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
            target = RecordingTarget(take: "\(run.session)/\(pending.take.name)", fileURL: pending.fileURL, takeID: pending.take.id,
                                     sessionID: pending.take.sessionID, runID: run.sequence.runID)
        }
        frames = progress.frames
        takeIndex = progress.takeIndex
        takeFrames = progress.takeFrames
        framesToSplit = progress.framesToSplit
        waiting = progress.waiting
        preRollFrames = progress.preRollFrames
        silenceAlarms = progress.silenceAlarms
        lastSilence = progress.lastSilence
        silenceOngoing = progress.silenceOngoing
        voxHolding = progress.voxHolding
        markerCount = progress.markers
        deviceLostAt = progress.deviceLostAt
        deviceRetries = progress.deviceRetries
        peaks = progress.peaks
        let measured = progress.rms
        if !measured.isEmpty { rms = measured }
        overrunCount = progress.overrunCount
        clippedSamples = progress.clippedSamples
    }
}
