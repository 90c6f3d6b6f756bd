public import Foundation
public import Logging
import Synchronization

/// A snapshot of a recording in progress.
public struct RecordingProgress: Sendable, Hashable {
    /// Frames in the take so far, gaps included.
    public var frames: Int64 = 0
    /// Per-channel peaks since the previous snapshot was taken, 0...1 (zeros when the settings
    /// does not measure levels).
    public var peaks: [Float] = []
    /// Per-channel sums of squared samples (full scale 1) since the previous snapshot was
    /// taken, over ``squaredFrames`` frames: their RMS is ``rms``.
    public var squares: [Double] = []
    public var squaredFrames: Int64 = 0
    /// Gaps filled with silence so far.
    public var overrunCount: Int = 0
    /// Frames of silence inserted so far.
    public var overrunFrames: Int64 = 0
    /// Samples at full scale so far (0 when levels are not measured).
    public var clippedSamples: Int64 = 0
    /// The take being written: its place in the run (1 without splitting) and its frames so far.
    public var takeIndex = 1
    public var takeFrames: Int64 = 0
    /// Frames until the next time split; `nil` without one.
    public var framesToSplit: Int64?
    /// What a run with no take open waits for (`nil` while a take records).
    public var waiting: Waiting?
    /// Frames held in the pre-roll while waiting.
    public var preRollFrames: Int64 = 0
    /// Silence alarms raised so far.
    public var silenceAlarms = 0
    /// The latest silence alarm (where in the run it began, its length so far), and whether the
    /// input is still silent: alerts say when a silence began and when it was resolved.
    public var lastSilence: SilenceEvent?
    public var silenceOngoing = false
    /// A VOX take is in its hold time: the input is below the level, and the take ends unless
    /// sound comes back.
    public var voxHolding = false
    /// Markers set in the run so far.
    public var markers = 0
    /// A run that resumes (`--resume`) and lost its device: when, while it waits for it to come
    /// back; `nil` while the device delivers.
    public var deviceLostAt: Date?

    /// Per-channel RMS (0…1) since the previous snapshot was taken; empty when nothing was measured.
    public var rms: [Float] {
        guard squaredFrames > 0 else { return [] }
        return squares.map { Float(($0 / Double(squaredFrames)).squareRoot()) }
    }
    /// Attempts to open the lost device again so far (one a second while it is away): the
    /// device thread is alive and trying even while no frame arrives.
    public var deviceRetries = 0

    /// What a run with no take open waits for.
    public enum Waiting: Sendable, Hashable {
        /// The trigger (`--armed`).
        case armed
        /// Sound above the VOX threshold.
        case vox
    }

    public init() {}
}

/// Why a recording ended.
public enum RecordingEnd: Sendable, Hashable {
    /// The requested frame count was reached.
    case reachedDuration
    /// ``RecordingEngine/stop()`` was called (a signal or the user); captured audio was drained.
    case stopped
    /// The device or server went away; everything captured before was kept.
    case deviceLost(TapedeckError)
    /// Writing failed (e.g. disk full); everything written before was kept.
    case writeFailed(TapedeckError)
}

/// The outcome of a recording whose file was created.
public struct RecordingResult: Sendable, Hashable {
    /// Frames in the finished file.
    public var frames: Int64
    /// Gaps filled with silence.
    public var overruns: [OverrunEvent]
    public var end: RecordingEnd
    /// Seconds from the first read to the end of capture (for a stop: to when it was asked for).
    public var wallSeconds: Double
    /// When capture ended on the device thread (the device was lost, the length reached, or the
    /// stop observed), before the file was finished.
    public var captureEnded: ContinuousClock.Instant
    /// Whether the writer finished the file itself (``TakeWriter/finish()`` returned), so
    /// ``frames`` is exact and the file final, even after a failed write; `false` when it had to
    /// be abandoned and needs its encoder's repair.
    public var writerFinished: Bool = true
    /// Samples recorded at full scale (0 when levels were not measured).
    public var clippedSamples: Int64 = 0
    /// The last take of a split run: its place in the run, the run's frame it starts at, and
    /// why it began (1, 0 and `start` without splitting). ``frames``, ``overruns`` and
    /// ``clippedSamples`` are that take's; earlier takes went to the ``TakeSequence``.
    public var takeIndex = 1
    public var takeOffset: Int64 = 0
    public var takeBegan: TakeBoundary = .start
    /// Frames of the whole run (every take's, and what came between them).
    public var runFrames: Int64 = 0
    /// Whether a take was open when the run ended (``frames`` and the rest describe it); `false`
    /// when the run ended waiting (VOX, armed), every take finished by the ``TakeSequence``.
    public var takeOpenAtEnd = true
    /// Where the silence alarm went off.
    public var silences: [SilenceEvent] = []
    /// The last take's markers, at frames of that take.
    public var markers: [TakeMarker] = []
    /// Markers of the run that were not kept: their take had ``TakeMarker/maxCount`` already.
    public var markersNotKept = 0
    /// The device's absences (``RunPlan/resume``).
    public var events: [RunEvent] = []
}

/// Runs one recording: a device thread that owns the capture stream and a writer thread that
/// owns the take writer, joined by a bounded `SlotRing`.
///
/// The device thread never awaits, allocates, logs or touches the disk inside its loop. When the
/// ring is full, a real-time stream's frames are dropped and the gap is counted, timestamped and
/// filled with silence by the writer, so the take's timeline stays true.
///
/// Use it once: ``open()``, then ``record(watching:plan:sequence:firstFileURL:makeWriter:)`` (or
/// ``close()``), with ``stop()`` from any thread.
public final class RecordingEngine: Sendable {
    private let backend: any CaptureBackend
    let settings: RecordingSettings
    /// Stop after exactly this many frames; `nil` records until ``stop()``.
    private let frameLimit: Int64?
    let logger: Logger

    let stopFlag = Atomic<Bool>(false)
    /// The device's frame when ``trigger()`` was first called; -1 before.
    let triggerFrame = Atomic<Int64>(-1)
    /// Frames the device thread has delivered (or lost) so far: the run's timeline as the
    /// device sees it, ahead of the writer by what the hand-off buffer holds.
    private let deviceTimeline = Atomic<Int64>(0)
    /// A marker, or a split asked for at a frame (``split()``).
    struct MarkRequest {
        var marker: TakeMarker
        var splits = false
    }
    /// Markers and splits asked for and not yet taken by the writer (frames of the run).
    let markRequests = Mutex<[MarkRequest]>([])
    let markCount = Atomic<Int>(0)
    let deviceFinished = Atomic<Bool>(false)
    private let startGate = DispatchSemaphore(value: 0)
    let deviceDone = DispatchSemaphore(value: 0)
    let dataSignal = DispatchSemaphore(value: 0)
    let spaceSignal = DispatchSemaphore(value: 0)

    struct Shared {
        var ring: SlotRing?
        var format: AudioFormat?
        var deviceName: String?
        var cancelled = false
        var deviceEnd: RecordingEnd = .stopped
        var captureStart: ContinuousClock.Instant?
        /// The wall-clock time capture started (the run's frame 0), and when the device last came back.
        var captureStartDate: Date?
        var resumedDate: Date?
        /// A frame of the run and its time of day by the source's own clock (``CaptureCues/Clock``).
        var sourceClock: (frame: Int64, date: Date)?
        var captureEnd: ContinuousClock.Instant?
        var deviceLoopEnd: ContinuousClock.Instant?
        var progress = RecordingProgress()
        /// Wait for a lost device and go on (``RunPlan/resume``); set before capture starts.
        var resume = false
        /// When the device was last lost, and when it came back.
        var lostAt: (ContinuousClock.Instant, Date)?
        var resumedAt: ContinuousClock.Instant?
    }
    let shared = Mutex(Shared())

    /// How long the writer lets a real-time stream's periods accumulate before writing them:
    /// half the checkpoint interval, at most 500 ms (fewer wake-ups and larger writes). A killed
    /// process loses only what is not yet written, so this keeps that below one checkpoint
    /// interval plus one period.
    var writerInterval: DispatchTimeInterval {
        let checkpointNanos = settings.checkpointInterval.components.seconds * 1_000_000_000
            + settings.checkpointInterval.components.attoseconds / 1_000_000_000
        return .nanoseconds(Int(max(1_000_000, min(500_000_000, checkpointNanos / 2))))
    }

    /// Creates an engine; nothing is opened until ``open()``. The engine uses the format,
    /// period, buffer, checkpoint interval and `measuresLevels` of `settings`.
    /// - Parameters:
    ///   - backend: the capture backend that opens the device.
    ///   - settings: the recording settings the engine takes its format, sizes and intervals from.
    ///   - frameLimit: stop after exactly this many frames; `nil` records until ``stop()``.
    ///   - logger: where the device's opening, losses and returns are logged.
    public init(backend: any CaptureBackend, settings: RecordingSettings, frameLimit: Int64? = nil, logger: Logger) {
        self.backend = backend
        self.settings = settings
        self.frameLimit = frameLimit
        self.logger = logger
    }

    /// The device the open stream records from, as its backend names it (``CaptureStream/deviceName``).
    /// - Thread: any; never blocks.
    public var deviceName: String? { shared.withLock { $0.deviceName } }

    /// Opens the capture stream on a new device thread and returns the negotiated format.
    /// - Thread: any; suspends (does not block the caller's thread) until the device is open.
    public func open() async throws -> AudioFormat {
        try await withCheckedThrowingContinuation { (cont: CheckedContinuation<AudioFormat, any Error>) in
            let thread = Thread { [self] in
                Self.keepSignalsOffThisThread()
                self.deviceThreadMain(opened: cont)
            }
            thread.name = "tapedeck-capture"
            thread.qualityOfService = .userInteractive
            thread.start()
        }
    }

    /// Closes an opened stream that will not be recorded.
    /// - Thread: any. Does not wait for the device to close.
    public func close() {
        shared.withLock { $0.cancelled = true }
        startGate.signal()
    }

    /// Begins the take of an armed run (``RunPlan/armed``), with its pre-roll; nothing after the
    /// first call.
    /// - Thread: any, including a signal-handling queue. Never blocks.
    public func trigger() {
        // The moment is the audio the device is delivering now, not what the writer has reached.
        _ = triggerFrame.compareExchange(expected: -1, desired: deviceTimeline.load(ordering: .acquiring), ordering: .acquiringAndReleasing)
        dataSignal.signal()
    }

    /// Sets a marker at the frame the device is delivering now, with `label`; it lands in the
    /// take that holds that frame (with ``RunPlan/splitOnMarker``, a new take begins there).
    /// - Thread: any, including a signal-handling queue. Takes a lock the writer holds only
    ///   briefly; never the device thread's.
    public func mark(label: String = "") {
        request(MarkRequest(marker: TakeMarker(frame: deviceTimeline.load(ordering: .acquiring), label: label, date: Date())))
    }

    /// Ends the take at the frame the device is delivering now and begins the next there (a run
    /// with ``RunPlan/splitOnRequest``; otherwise, or while the run waits, nothing happens).
    /// - Thread: any. Takes a lock the writer holds only briefly; never the device thread's.
    public func split() {
        request(MarkRequest(marker: TakeMarker(frame: deviceTimeline.load(ordering: .acquiring), date: Date()), splits: true))
    }

    private func request(_ r: MarkRequest) {
        markRequests.withLock { $0.append(r) }
        // One wake-up for a batch: a flood of markers never floods the writer with them.
        if markCount.add(1, ordering: .releasing).oldValue == 0 { dataSignal.signal() }
    }

    /// Keeps the signals a command handles (stops, markers, the trigger) off the calling thread
    /// and the threads it starts, which inherit the mask: the kernel hands them to another
    /// thread, whose handler only writes to a pipe, so a flood of them never interrupts capture
    /// or writing. - Thread: the device or writer thread, as it starts. Never blocks.
    static func keepSignalsOffThisThread() {
        var set = sigset_t()
        _ = sigemptyset(&set)
        for signal in [SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2] { _ = sigaddset(&set, signal) }
        _ = pthread_sigmask(SIG_BLOCK, &set, nil)
    }

    /// Asks the recording to stop: the device is drained and the file finalized.
    /// - Thread: any, including a signal-handling queue. Never blocks.
    public func stop() {
        stopFlag.store(true, ordering: .releasing)
        dataSignal.signal()
    }

    /// Ends the recording as its length would (``RecordingEnd/reachedDuration``), on the wall
    /// clock: `-d` of time passed after a device came back with less audio (`--resume`), or
    /// `--until`'s moment. - Thread: any. Never blocks.
    public func stopAtLength() {
        lengthReached.store(true, ordering: .releasing)
        stop()
    }

    /// Set by ``stopAtLength()``.
    let lengthReached = Atomic<Bool>(false)

    /// The latest progress; taking it resets the peak levels.
    /// - Thread: any. Takes a lock the writer thread holds only briefly; never the device thread.
    public func takeProgress() -> RecordingProgress {
        shared.withLock { s in
            let p = s.progress
            s.progress.peaks = Array(repeating: 0, count: p.peaks.count)
            s.progress.squares = Array(repeating: 0, count: p.squares.count)
            s.progress.squaredFrames = 0
            return p
        }
    }

    /// Records until the frame limit, ``stop()``, device loss or a write failure.
    ///
    /// `makeWriter` is called on the writer thread, which then owns the writer. If it throws,
    /// the device is closed and the error is rethrown: no audio was written. With `freeSpace`,
    /// the writer asks at each checkpoint how much room the disk has left and logs a warning
    /// once when it falls below the limit (a disk already below it when recording starts is not
    /// warned about again).
    /// - Thread: any; suspends until the file is finished and synced.
    ///
    /// With a `plan` that makes a run (splits, VOX, armed) and a `sequence`, the run is cut into
    /// takes at the plan's boundaries: the sequence makes each next take ready on a background
    /// queue while the current one records, and finishes each ended take there too; the result
    /// describes the last take. A run that starts waiting (VOX, armed) passes `makeWriter: nil`:
    /// its first take comes from the sequence too. `firstFileURL` is the first writer's file
    /// (for size splits).
    public func record(watching freeSpace: FreeSpace? = nil, plan: RunPlan = RunPlan(), sequence: (any TakeSequence)? = nil,
                       firstFileURL: URL? = nil,
                       makeWriter: (@Sendable (AudioFormat) throws -> any TakeWriter)?) async throws -> RecordingResult {
        try await withCheckedThrowingContinuation { (cont: CheckedContinuation<RecordingResult, any Error>) in
            let thread = Thread { [self] in
                Self.keepSignalsOffThisThread()
                cont.resume(with: self.writerThreadMain(freeSpace: freeSpace, plan: plan, sequence: sequence,
                                                        firstFileURL: firstFileURL, makeWriter: makeWriter))
            }
            thread.name = "tapedeck-writer"
            thread.start()
        }
    }

    // MARK: device thread

    private func deviceThreadMain(opened: CheckedContinuation<AudioFormat, any Error>) {
        var stream: any CaptureStream
        do {
            stream = try backend.openCaptureStream(format: settings.format, options: CaptureOptions(periodFrames: settings.periodFrames, chosen: settings.formatChoice))
        } catch {
            deviceFinished.store(true, ordering: .releasing)
            deviceDone.signal()
            opened.resume(throwing: error)
            return
        }
        let format = stream.format
        let slotFrames = max(stream.periodFrames, 1)
        let slots = max(4, Int((settings.bufferSeconds * Double(format.sampleRate)) / Double(slotFrames)))
        let ring = SlotRing(slotCount: slots, slotFrames: slotFrames, bytesPerFrame: format.bytesPerFrame)
        logger.info("Capture opened on \(backend.name): \(format), period \(stream.periodFrames) frames (\(String(format: "%.1f", Double(stream.periodFrames) * 1000 / Double(format.sampleRate))) ms; asked \(settings.periodFrames)), hand-off buffer \(slots) slots = \(String(format: "%.2f", Double(slots * slotFrames) / Double(format.sampleRate))) s.")
        let deviceName = stream.deviceName
        shared.withLock {
            $0.ring = ring
            $0.format = format
            $0.deviceName = deviceName
            $0.progress.peaks = Array(repeating: 0, count: format.channels)
            $0.progress.squares = Array(repeating: 0, count: format.channels)
        }
        opened.resume(returning: format)

        startGate.wait()
        if shared.withLock({ $0.cancelled }) {
            stream.close()
            deviceFinished.store(true, ordering: .releasing)
            deviceDone.signal()
            return
        }
        let start = ContinuousClock.now
        let resume = shared.withLock { s in
            s.captureStart = start
            s.captureStartDate = Date()
            return s.resume
        }
        var timeline: Int64 = 0
        var (end, stoppedAt) = captureLoop(stream: stream, ring: ring, timeline: &timeline)
        // A lost device, with resume: the take ends; wait for the device, then go on.
        while resume, case .deviceLost(let error) = end, !stopFlag.load(ordering: .acquiring) {
            stream.close()
            let lostAt = ContinuousClock.now
            shared.withLock {
                $0.lostAt = (lostAt, Date())
                $0.progress.deviceLostAt = Date()
            }
            ring.publish(waitForSlot(ring), frames: 0, bufferGap: 0, deviceGap: 0, event: .deviceLost)
            dataSignal.signal()
            logger.warning("\(error.message) Waiting for the device to come back (trying every second; Ctrl-C stops).")
            // The run's length bounds the wait too: it ends when it would have ended with audio.
            let deadline = frameLimit.map { start + .milliseconds(Int64(Double($0) * 1000 / Double(format.sampleRate))) }
            var reopened: (any CaptureStream)?
            var warnedFormat = false
            waiting: while true {
                for _ in 0..<20 {
                    if stopFlag.load(ordering: .acquiring) { break waiting }
                    if let deadline, ContinuousClock.now >= deadline { break waiting }
                    Thread.sleep(forTimeInterval: 0.05)
                }
                shared.withLock { $0.progress.deviceRetries += 1 }
                guard let s = try? backend.openCaptureStream(format: format, options: CaptureOptions(periodFrames: settings.periodFrames)) else { continue }
                if s.format == format && s.periodFrames <= ring.slotFrames {
                    reopened = s
                    break
                }
                s.close()
                if !warnedFormat {
                    warnedFormat = true
                    logger.warning("The device came back as \(s.format), not \(format); Tapedeck waits for it as it was.")
                }
            }
            guard let back = reopened else {
                end = stopFlag.load(ordering: .acquiring) && !lengthReached.load(ordering: .acquiring) ? .stopped : .reachedDuration
                stoppedAt = ContinuousClock.now
                break
            }
            stream = back
            let away = ContinuousClock.now - lostAt
            shared.withLock {
                $0.resumedAt = .now
                $0.resumedDate = Date()
                $0.progress.deviceLostAt = nil
            }
            logger.notice("The device is back after \(away.components.seconds) s; recording goes on in a new take.")
            ring.publish(waitForSlot(ring), frames: 0, bufferGap: 0, deviceGap: 0, event: .deviceResumed)
            dataSignal.signal()
            (end, stoppedAt) = captureLoop(stream: stream, ring: ring, timeline: &timeline)
        }
        let loopEnded = ContinuousClock.now
        // A stop is timed when it was asked for, not when draining finished.
        let finish = stoppedAt ?? ContinuousClock.now
        stream.close()
        shared.withLock {
            $0.deviceEnd = end
            $0.captureEnd = finish
            $0.deviceLoopEnd = loopEnded
        }
        deviceFinished.store(true, ordering: .releasing)
        dataSignal.signal()
        deviceDone.signal()
    }

    /// A source's markers (requested as `tapedeck mark` does) and clock (the run's anchor for
    /// the time of day, ``Shared/sourceClock``), at frames of the run up to `through`.
    private func take(_ cues: CaptureCues, firstFrame: Int64, through: Int64) {
        if let clock = cues.takeClock() {
            shared.withLock { $0.sourceClock = (firstFrame + min(clock.frame, through - firstFrame), clock.date) }
        }
        for cue in cues.take() {
            request(MarkRequest(marker: TakeMarker(frame: firstFrame + min(cue.frame, through - firstFrame), label: cue.label, date: Date())))
        }
    }

    /// The real-time loop. No allocation, locking, logging or disk I/O inside the `while`.
    /// - Parameter timeline: frames of the run so far (delivered or lost), carried on when the
    ///   loop starts again on a device that came back.
    private func captureLoop(stream: any CaptureStream, ring: SlotRing, timeline: inout Int64) -> (RecordingEnd, ContinuousClock.Instant?) {
        let scratch = UnsafeMutableRawPointer.allocate(byteCount: ring.slotFrames * ring.bytesPerFrame, alignment: 16)
        defer { scratch.deallocate() }
        let limit = frameLimit
        let wakeThreshold = max(1, ring.slotCount / 2)
        let firstFrame = timeline
        let cues = stream.cues
        var bufferGap: Int64 = 0
        var deviceGap: Int64 = 0
        var end: RecordingEnd = .stopped
        var stoppedAt: ContinuousClock.Instant?
        do {
            while true {
                if stopFlag.load(ordering: .acquiring) {
                    stoppedAt = ContinuousClock.now
                    // Drain what the device already holds, then stop. There is no real-time
                    // deadline any more, so wait for room rather than drop captured frames.
                    // Streams bound their own draining; the cap here only guards against one that
                    // never says it is done.
                    for _ in 0..<(ring.slotCount * 8) {
                        let slot = waitForSlot(ring)
                        let r = try stream.drain(into: ring.pointer(slot), maxFrames: ring.slotFrames)
                        if r.frames == 0 && r.lostFramesBefore == 0 { break }
                        ring.publish(slot, frames: r.frames, bufferGap: bufferGap, deviceGap: deviceGap + r.lostFramesBefore)
                        bufferGap = 0
                        deviceGap = 0
                        dataSignal.signal()
                    }
                    end = lengthReached.load(ordering: .acquiring) ? .reachedDuration : .stopped
                    break
                }
                if let limit, timeline >= limit {
                    end = .reachedDuration
                    break
                }
                guard let slot = ring.producerSlot() else {
                    if stream.isRealTime {
                        let r = try stream.read(into: scratch, maxFrames: ring.slotFrames)
                        bufferGap += Int64(r.frames)
                        deviceGap += r.lostFramesBefore
                        timeline += Int64(r.frames) + r.lostFramesBefore
                        deviceTimeline.store(timeline, ordering: .releasing)
                    } else {
                        _ = spaceSignal.wait(timeout: .now() + .milliseconds(50))
                    }
                    continue
                }
                let r = try stream.read(into: ring.pointer(slot), maxFrames: ring.slotFrames)
                // A source's own markers and clock: rare, so taking them may allocate. Before
                // the frames are handed on, so the writer dates a take by the source's clock.
                if let cues, cues.hasPending {
                    take(cues, firstFrame: firstFrame, through: timeline + Int64(r.frames) + r.lostFramesBefore)
                }
                ring.publish(slot, frames: r.frames, bufferGap: bufferGap, deviceGap: deviceGap + r.lostFramesBefore)
                timeline += Int64(r.frames) + r.lostFramesBefore
                deviceTimeline.store(timeline, ordering: .releasing)
                bufferGap = 0
                deviceGap = 0
                // A real-time stream's periods are batched (see writerInterval); a stream that
                // waits for the writer anyway hands over every slot at once.
                // The first period is written at once, so the file shows audio from the start.
                if !stream.isRealTime || ring.count >= wakeThreshold || timeline == firstFrame + Int64(r.frames) + r.lostFramesBefore {
                    dataSignal.signal()
                }
            }
        } catch let error as TapedeckError {
            end = .deviceLost(error)
        } catch {
            end = .deviceLost(TapedeckError(.deviceLost, "The capture device failed: \(error)."))
        }
        // A gap still pending at the end is handed over once there is room, so the timeline stays true.
        if bufferGap > 0 || deviceGap > 0 {
            ring.publish(waitForSlot(ring), frames: 0, bufferGap: bufferGap, deviceGap: deviceGap)
            dataSignal.signal()
        }
        return (end, stoppedAt)
    }

    /// Waits for a free slot. Only used once capture has ended (the writer always frees slots,
    /// even after a write failure, so this returns).
    private func waitForSlot(_ ring: SlotRing) -> Int {
        while true {
            if let slot = ring.producerSlot() { return slot }
            _ = spaceSignal.wait(timeout: .now() + .milliseconds(50))
        }
    }

    // MARK: writer thread

    private func writerThreadMain(freeSpace: FreeSpace?, plan: RunPlan, sequence: (any TakeSequence)?, firstFileURL: URL?,
                                  makeWriter: (@Sendable (AudioFormat) throws -> any TakeWriter)?) -> Result<RecordingResult, any Error> {
        guard let (ring, format) = shared.withLock({ s in s.ring.map { ($0, s.format!) } }) else {
            return .failure(TapedeckError(.internalError, "record(makeWriter:) was called before open() succeeded."))
        }
        guard makeWriter != nil || (plan.startsIdle && sequence != nil) else {
            close()
            deviceDone.wait()
            return .failure(TapedeckError(.internalError, "A run that starts with a take needs makeWriter; one that waits needs a TakeSequence."))
        }
        shared.withLock { $0.resume = plan.resume }
        var firstWriter: (any TakeWriter)?
        if let makeWriter {
            do {
                firstWriter = try makeWriter(format)
            } catch {
                close()
                deviceDone.wait()
                return .failure(error)
            }
        }
        startGate.signal()
        // Where takes begin and end is the run's segmenter's; the writer carries it out, and the
        // take queue prepares the next take and finishes the last while it goes on writing.
        let writer = RunWriter(engine: self, ring: ring, format: format, plan: plan, sequence: sequence, freeSpace: freeSpace,
                               limit: frameLimit, firstWriter: firstWriter, firstFileURL: firstFileURL)
        return writer.run()
    }
}
