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
    /// A VOX take is in its hold time: the input is below the level, and the take ends unless
    /// sound comes back.
    public var voxHolding = false
    /// Markers set in the run so far.
    public var markers = 0

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
    /// The device's absences (``RunPlan/resume``).
    public var events: [RunEvent] = []
}

/// Runs one recording: a device thread that owns the capture stream and a writer thread that
/// owns the take writer, joined by a bounded ``SlotRing``.
///
/// The device thread never awaits, allocates, logs or touches the disk inside its loop. When the
/// ring is full, a real-time stream's frames are dropped and the gap is counted, timestamped and
/// filled with silence by the writer, so the take's timeline stays true.
///
/// Use it once: ``open()``, then ``record(makeWriter:)`` (or ``close()``), with ``stop()`` from any thread.
public final class RecordingEngine: Sendable {
    private let backend: any CaptureBackend
    private let settings: RecordingSettings
    /// Stop after exactly this many frames; `nil` records until ``stop()``.
    private let frameLimit: Int64?
    private let logger: Logger

    private let stopFlag = Atomic<Bool>(false)
    /// The device's frame when ``trigger()`` was first called; -1 before.
    private let triggerFrame = Atomic<Int64>(-1)
    /// Frames the device thread has delivered (or lost) so far: the run's timeline as the
    /// device sees it, ahead of the writer by what the hand-off buffer holds.
    private let deviceTimeline = Atomic<Int64>(0)
    /// A marker, or a split asked for at a frame (``split()``).
    private struct MarkRequest {
        var marker: TakeMarker
        var splits = false
    }
    /// Markers and splits asked for and not yet taken by the writer (frames of the run).
    private let markRequests = Mutex<[MarkRequest]>([])
    private let markCount = Atomic<Int>(0)
    private let deviceFinished = Atomic<Bool>(false)
    private let startGate = DispatchSemaphore(value: 0)
    private let deviceDone = DispatchSemaphore(value: 0)
    private let dataSignal = DispatchSemaphore(value: 0)
    private let spaceSignal = DispatchSemaphore(value: 0)

    private struct Shared {
        var ring: SlotRing?
        var format: AudioFormat?
        var cancelled = false
        var deviceEnd: RecordingEnd = .stopped
        var captureStart: ContinuousClock.Instant?
        /// The wall-clock time capture started (the run's frame 0), and when the device last came back.
        var captureStartDate: Date?
        var resumedDate: Date?
        var captureEnd: ContinuousClock.Instant?
        var deviceLoopEnd: ContinuousClock.Instant?
        var progress = RecordingProgress()
        /// Wait for a lost device and go on (``RunPlan/resume``); set before capture starts.
        var resume = false
        /// When the device was last lost, and when it came back.
        var lostAt: (ContinuousClock.Instant, Date)?
        var resumedAt: ContinuousClock.Instant?
    }
    private let shared = Mutex(Shared())

    /// How long the writer lets a real-time stream's periods accumulate before writing them:
    /// half the checkpoint interval, at most 500 ms (fewer wake-ups and larger writes). A killed
    /// process loses only what is not yet written, so this keeps that below one checkpoint
    /// interval plus one period.
    private var writerInterval: DispatchTimeInterval {
        let checkpointNanos = settings.checkpointInterval.components.seconds * 1_000_000_000
            + settings.checkpointInterval.components.attoseconds / 1_000_000_000
        return .nanoseconds(Int(max(1_000_000, min(500_000_000, checkpointNanos / 2))))
    }

    /// Creates an engine; nothing is opened until ``open()``. The engine uses the format,
    /// period, buffer, checkpoint interval and `measuresLevels` of `settings`.
    /// - Parameter frameLimit: stop after exactly this many frames; `nil` records until ``stop()``.
    public init(backend: any CaptureBackend, settings: RecordingSettings, frameLimit: Int64? = nil, logger: Logger) {
        self.backend = backend
        self.settings = settings
        self.frameLimit = frameLimit
        self.logger = logger
    }

    /// Opens the capture stream on a new device thread and returns the negotiated format.
    /// - Thread: any; suspends (does not block the caller's thread) until the device is open.
    public func open() async throws -> AudioFormat {
        try await withCheckedThrowingContinuation { (cont: CheckedContinuation<AudioFormat, any Error>) in
            let thread = Thread { [self] in self.deviceThreadMain(opened: cont) }
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
        markCount.add(1, ordering: .releasing)
        dataSignal.signal()
    }

    /// Asks the recording to stop: the device is drained and the file finalized.
    /// - Thread: any, including a signal-handling queue. Never blocks.
    public func stop() {
        stopFlag.store(true, ordering: .releasing)
        dataSignal.signal()
    }

    /// The latest progress; taking it resets the peak levels.
    /// - Thread: any. Takes a lock the writer thread holds only briefly; never the device thread.
    public func takeProgress() -> RecordingProgress {
        shared.withLock { s in
            let p = s.progress
            s.progress.peaks = Array(repeating: 0, count: p.peaks.count)
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
            stream = try backend.openCaptureStream(format: settings.format, options: CaptureOptions(periodFrames: settings.periodFrames))
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
        logger.debug("Capture opened on \(backend.name): \(format), period \(stream.periodFrames) frames (\(String(format: "%.1f", Double(stream.periodFrames) * 1000 / Double(format.sampleRate))) ms; asked \(settings.periodFrames)), hand-off buffer \(slots) slots = \(String(format: "%.2f", Double(slots * slotFrames) / Double(format.sampleRate))) s.")
        shared.withLock {
            $0.ring = ring
            $0.format = format
            $0.progress.peaks = Array(repeating: 0, count: format.channels)
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
            shared.withLock { $0.lostAt = (lostAt, Date()) }
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
                end = stopFlag.load(ordering: .acquiring) ? .stopped : .reachedDuration
                stoppedAt = ContinuousClock.now
                break
            }
            stream = back
            let away = ContinuousClock.now - lostAt
            shared.withLock {
                $0.resumedAt = .now
                $0.resumedDate = Date()
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

    /// The real-time loop. No allocation, locking, logging or disk I/O inside the `while`.
    /// - Parameter timeline: frames of the run so far (delivered or lost), carried on when the
    ///   loop starts again on a device that came back.
    private func captureLoop(stream: any CaptureStream, ring: SlotRing, timeline: inout Int64) -> (RecordingEnd, ContinuousClock.Instant?) {
        let scratch = UnsafeMutableRawPointer.allocate(byteCount: ring.slotFrames * ring.bytesPerFrame, alignment: 16)
        defer { scratch.deallocate() }
        let limit = frameLimit
        let wakeThreshold = max(1, ring.slotCount / 2)
        let firstFrame = timeline
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
                    end = .stopped
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

    /// The take the writer thread writes now, and what it has gathered for it.
    private struct CurrentTake {
        var writer: any TakeWriter
        var index: Int
        var id: String?
        var fileURL: URL?
        /// The run's frame the take starts at.
        var offset: Int64
        var began: TakeBoundary
        var overruns: [OverrunEvent] = []
        var clipped: Int64 = 0
        var markers: [TakeMarker] = []
        /// The file's size when last looked at, and the take's frames then (size splits).
        var bytesSeen: Int64 = 0
        var framesSeen: Int64 = 0
        /// Whether the writer has been told the wall-clock time of the take's first frame.
        var announced = false
        /// Frames of pre-roll the take begins with.
        var preRollFrames: Int64 = 0
    }

    /// The next take, made ready on the take queue while the current one records.
    private final class NextTake: @unchecked Sendable {
        private let lock = Mutex<Result<PreparedTake, TapedeckError>?>(nil)
        private let ready = DispatchSemaphore(value: 0)
        func set(_ result: Result<PreparedTake, TapedeckError>) {
            lock.withLock { $0 = result }
            ready.signal()
        }
        /// Waits for the result (the writer thread, at a boundary: the ring holds the audio meanwhile).
        func wait() -> Result<PreparedTake, TapedeckError> {
            ready.wait()
            ready.signal()
            return lock.withLock { $0! }
        }
    }

    /// The last seconds of audio no take holds (VOX and armed runs wait with it), allocated once.
    private final class PreRollRing {
        let capacity: Int64
        let bytesPerFrame: Int
        private let storage: UnsafeMutableRawPointer
        private var start: Int64 = 0
        private(set) var count: Int64 = 0

        init(frames: Int64, bytesPerFrame: Int) {
            capacity = max(0, frames)
            self.bytesPerFrame = bytesPerFrame
            storage = .allocate(byteCount: max(1, Int(capacity) * bytesPerFrame), alignment: 16)
            // Touched now, so the run's memory does not grow when the ring first fills.
            storage.initializeMemory(as: UInt8.self, repeating: 0, count: max(1, Int(capacity) * bytesPerFrame))
        }
        deinit { storage.deallocate() }

        /// Keeps the newest `capacity` frames of what it holds and `frames` more (`nil`: silence).
        func append(_ source: UnsafeRawPointer?, frames: Int64) {
            guard capacity > 0 else { return }
            var skip = max(0, frames - capacity)  // older than the ring holds
            var left = frames - skip
            while left > 0 {
                let end = (start + count) % capacity
                let n = min(left, capacity - end)
                let dest = storage + Int(end) * bytesPerFrame
                if let source { dest.copyMemory(from: source + Int(skip) * bytesPerFrame, byteCount: Int(n) * bytesPerFrame) } else {
                    dest.initializeMemory(as: UInt8.self, repeating: 0, count: Int(n) * bytesPerFrame)
                }
                count += n
                if count > capacity {
                    start = (start + count - capacity) % capacity
                    count = capacity
                }
                skip += n
                left -= n
            }
        }

        /// Hands what it holds, oldest first, to `body` in up to two pieces, and empties.
        func drain(_ body: (UnsafeRawPointer, Int64) throws -> Void) rethrows {
            defer { (start, count) = (0, 0) }
            guard count > 0 else { return }
            let first = min(count, capacity - start)
            try body(storage + Int(start) * bytesPerFrame, first)
            if count > first { try body(storage, count - first) }
        }
    }

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

        let limit = frameLimit
        let split = plan.split
        let measuresLevels = settings.measuresLevels
        let bytesPerFrame = Int64(format.bytesPerFrame)
        let rate = Double(format.sampleRate)
        let silence = UnsafeMutableRawPointer.allocate(byteCount: ring.slotFrames * ring.bytesPerFrame, alignment: 16)
        silence.initializeMemory(as: UInt8.self, repeating: 0, count: ring.slotFrames * ring.bytesPerFrame)
        defer { silence.deallocate() }
        /// Frames of the run so far (every take's, the audio between takes, gaps included).
        var position: Int64 = 0
        var current: CurrentTake? = firstWriter.map { CurrentTake(writer: $0, index: 1, id: nil, fileURL: firstFileURL, offset: 0, began: .start) }
        current?.bytesSeen = firstFileURL.flatMap(Self.fileSize) ?? 0
        /// The index the last take had (the next one is one more).
        var lastIndex = current == nil ? 0 : 1
        var overrunCount = 0
        var overrunFrames: Int64 = 0
        var failure: TapedeckError?
        var peaks = Array(repeating: Float(0), count: format.channels)
        var clippedTotal: Int64 = 0
        var checkpoints = 0
        var slowestCheckpoint = Duration.zero
        var lastCheckpoint = ContinuousClock.now
        // A disk that starts low was warned about before recording; warn here only when it becomes low.
        var warnedLowSpace = freeSpace.map { w in FreeSpace.available(at: w.path).map { $0 < w.warnBelowBytes } ?? true } ?? true

        // Where takes begin and end: the take queue prepares the next take and finishes the last
        // one while the writer thread goes on writing; only the swap of writers happens here.
        let segmenting = plan.makesRun && sequence != nil
        let takeQueue = DispatchQueue(label: "tapedeck-takes")
        let everyFrames = split.everySeconds.map { max(1, Int64(($0 * rate).rounded())) }
        var nextTimeSplit: Int64? = everyFrames.map { every in
            split.alignedToClock ? SplitRule.framesToClockBoundary(from: Date(), every: split.everySeconds ?? 1, rate: format.sampleRate) : every
        }
        if current == nil && !split.alignedToClock { nextTimeSplit = nil }  // counted from the first take's start
        // No size split before this much of a take (the file's own header may be most of a tiny limit).
        let sizeMargin: Int64 = 64 * 1024
        let preRoll = PreRollRing(frames: plan.startsIdle ? Int64((min(plan.preRollSeconds, RunPlan.longestPreRoll) * rate).rounded()) : 0,
                                  bytesPerFrame: format.bytesPerFrame)
        let voxThreshold = plan.vox.map { Float(pow(10, $0.thresholdDB / 20)) }
        let voxHold = plan.vox.map { Int64(($0.holdSeconds * rate).rounded()) } ?? 0
        var lastLoud: Int64 = 0
        var triggered = false
        let alarmThreshold = plan.silenceAlarm.map { Float(pow(10, $0.thresholdDB / 20)) }
        let alarmFrames = plan.silenceAlarm.map { max(1, Int64(($0.seconds * rate).rounded())) } ?? 0
        var quietSince: Int64?
        var silences: [SilenceEvent] = []
        var alarmOpen = false
        // Levels are looked at one period at a time when something decides by them.
        let watchesLevels = voxThreshold != nil || alarmThreshold != nil
        var blockPeaks = Array(repeating: Float(0), count: format.channels)

        /// A run frame and the wall-clock time it was captured at (capture's start, or the
        /// device's return after it was lost).
        var clockAnchor: (frame: Int64, date: Date)?
        /// Markers taken from the requests, waiting for the writer to reach their frames.
        var dueMarkers: [MarkRequest] = []
        var markersSet = 0
        /// Markers that came while no take was open (frames of the run).
        var waitingMarkers: [TakeMarker] = []
        /// The device came back: the next audio begins a take.
        var resumePending = false
        var events: [RunEvent] = []
        /// Where the device was lost, while it is away.
        var awayFrom: Int64?
        var next: NextTake?
        var retryPrepareAt: Int64 = 0
        var warnedPrepare = false
        func prepare(_ index: Int) {
            guard segmenting, let sequence else { return }
            let box = NextTake()
            next = box
            // The take begins at the next time split, when there is one (counted from when
            // capture began, at the device's rate); else it is not known, and now will do.
            var ahead = 0.0
            if current != nil, let t = nextTimeSplit {
                // Capture not begun yet: it begins about now.
                let elapsed = shared.withLock { $0.captureStart }.map { began in
                    let since = ContinuousClock.now - began
                    return Double(since.components.seconds) + Double(since.components.attoseconds) / 1e18
                } ?? 0
                ahead = Double(t) / rate - elapsed
            }
            let start = Date().addingTimeInterval(ahead)
            takeQueue.async {
                do {
                    box.set(.success(try sequence.prepareTake(index: index, format: format, start: start)))
                } catch {
                    box.set(.failure((error as? TapedeckError) ?? TapedeckError(.io, "Preparing the next take failed: \(error).")))
                }
            }
        }
        // A run that splits only when asked (the web page's Split) makes its next take when the
        // split comes: no empty take waits in the library meanwhile, and the take's entry is
        // dated when it begins. The writer waits the few milliseconds that takes; the hand-off
        // ring holds what the device delivers meanwhile. Every other run makes it ready ahead.
        let preparesAhead = split.splits || plan.startsIdle || plan.splitOnMarker || plan.resume
        if preparesAhead { prepare(lastIndex + 1) }

        /// The prepared next take, waiting for it if it is still being made; `nil` (and a retry
        /// 10 s of audio later) when it could not be made.
        func takePrepared() -> PreparedTake? {
            if next == nil {
                guard position >= retryPrepareAt else { return nil }
                prepare(lastIndex + 1)
            }
            guard let box = next else { return nil }
            next = nil
            switch box.wait() {
            case .success(let p): return p
            case .failure(let error):
                retryPrepareAt = position + Int64(format.sampleRate) * 10
                if !warnedPrepare {
                    warnedPrepare = true
                    logger.warning("Could not start the next take (\(error.message)); \(current == nil ? "the run waits on" : "recording goes on in the current take"), and Tapedeck tries again every 10 s.")
                }
                return nil
            }
        }

        /// Ends the current take at `position`; the take queue finishes it.
        func endCurrent(_ reason: TakeBoundary) {
            guard let ended = current, let sequence else { return }
            let endedFrames = position - ended.offset
            let endedWriter = UncheckedTransfer(ended.writer)
            let (endedIndex, endedID, endedOffset) = (ended.index, ended.id ?? "", ended.offset)
            let (endedOverruns, endedClipped, endedMarkers) = (ended.overruns, ended.clipped, ended.markers)
            takeQueue.async {
                var frames = endedFrames
                var finished = true
                var problem: TapedeckError?
                do {
                    frames = try endedWriter.value.finish()
                } catch {
                    finished = false
                    endedWriter.value.abandon()
                    problem = (error as? TapedeckError) ?? TapedeckError(.io, "Finishing the take failed: \(error).")
                }
                sequence.takeEnded(EndedTake(index: endedIndex, id: endedID, offset: endedOffset, frames: frames,
                                             overruns: endedOverruns, clippedSamples: endedClipped, reason: reason,
                                             writerFinished: finished, failure: problem, markers: endedMarkers))
            }
            current = nil
        }

        /// Starts `prepared` at `offset` for `reason`.
        func begin(_ prepared: PreparedTake, at offset: Int64, _ reason: TakeBoundary) {
            guard let sequence else { return }
            takeQueue.async { sequence.takeBegan(prepared, offset: offset, reason: reason) }
            current = CurrentTake(writer: prepared.writer, index: prepared.index, id: prepared.id, fileURL: prepared.fileURL,
                                  offset: offset, began: reason)
            current?.bytesSeen = prepared.fileURL.flatMap(Self.fileSize) ?? 0
            lastIndex = prepared.index
            lastCheckpoint = ContinuousClock.now
            if let every = everyFrames {
                if !split.alignedToClock, reason != .splitTime && reason != .splitSize {
                    nextTimeSplit = offset + every  // a take that began on its own: its length counts from its start
                } else if reason == .splitTime {
                    nextTimeSplit = (nextTimeSplit ?? offset) + every
                }
                if let t = nextTimeSplit, t <= offset {
                    // Never a boundary in the past (a size split came first): the next whole interval.
                    nextTimeSplit = t + ((offset - t) / every + 1) * every
                }
            }
        }

        /// The current take's next split as a run frame, and why; `nil` when none is due.
        func boundary() -> (frame: Int64, reason: TakeBoundary)? {
            guard split.splits, let current, next != nil || position >= retryPrepareAt else { return nil }
            var best: (frame: Int64, reason: TakeBoundary)?
            if let t = nextTimeSplit { best = (t, .splitTime) }
            if let maxBytes = split.maxBytes {
                let takeFrames = position - current.offset
                // The file's size when last looked at, plus the rest as raw PCM: never less than
                // the file will be (an encoder only compresses).
                let estimate = current.bytesSeen + (takeFrames - current.framesSeen) * bytesPerFrame + sizeMargin
                let room = max(0, (maxBytes - estimate) / bytesPerFrame)
                // A take holds at least one period, whatever the header costs.
                let frame = current.offset + max(takeFrames + room, Int64(ring.slotFrames))
                if best == nil || frame < best!.frame { best = (frame, .splitSize) }
            }
            return best
        }

        /// Writes `n` frames from `p` (`nil`: silence for a gap with `cause`) into the current take.
        func write(_ p: UnsafeRawPointer?, _ n: Int64, gap cause: String?) throws {
            guard current != nil else { return }
            if !current!.announced {
                // The time of day of the take's first frame: the clock when capture (or the
                // device's return) began, plus the run's frames since, at the device's rate.
                current!.announced = true
                if clockAnchor == nil, let date = shared.withLock({ $0.captureStartDate }) { clockAnchor = (0, date) }
                if let anchor = clockAnchor {
                    current!.writer.began(at: anchor.date.addingTimeInterval(Double(current!.offset - anchor.frame) / rate),
                                          preRollFrames: current!.preRollFrames)
                }
            }
            if let cause {
                current!.overruns.append(OverrunEvent(frame: position - current!.offset, frames: n, date: Date(), cause: cause))
                var left = n
                while left > 0 {
                    let m = Int(min(left, Int64(ring.slotFrames)))
                    try current!.writer.write(silence, frames: m)
                    left -= Int64(m)
                }
            } else if let p {
                try current!.writer.write(p, frames: Int(n))
                if measuresLevels {
                    var clips: Int64 = 0
                    LevelMeter.accumulatePeaks(p, frames: Int(n), format: format, into: &peaks, clipped: &clips)
                    current!.clipped += clips
                    clippedTotal += clips
                }
            }
        }

        /// Takes `count` frames (from `source`, or silence for a gap with `cause`) into the run:
        /// into the current take, ending and beginning takes at their boundaries on the way
        /// (sample-exact: nothing doubled, nothing left out), or into the pre-roll while the run
        /// waits for sound or a trigger.
        func emit(_ source: UnsafeRawPointer?, _ count: Int64, gap cause: String?) throws {
            var done: Int64 = 0
            while done < count {
                var n = count - done
                if watchesLevels { n = min(n, Int64(ring.slotFrames)) }
                // Markers: each lands in the take holding its frame (or, splitting on markers,
                // begins a take there); the block is cut at the next one.
                if markCount.load(ordering: .acquiring) > 0 {
                    let taken = markRequests.withLock { requests -> [MarkRequest] in
                        defer { requests.removeAll(keepingCapacity: true) }
                        return requests
                    }
                    markCount.subtract(taken.count, ordering: .releasing)
                    dueMarkers.append(contentsOf: taken)
                    dueMarkers.sort { $0.marker.frame < $1.marker.frame }
                }
                if let request = dueMarkers.first {
                    let m = request.marker
                    if m.frame > position {
                        n = min(n, m.frame - position)
                    } else {
                        dueMarkers.removeFirst()
                        if !request.splits { markersSet += 1 }
                        let splits = request.splits ? plan.splitOnRequest : plan.splitOnMarker
                        if current == nil {
                            // Waiting: a marker is kept if the take that begins next starts with
                            // it (pre-roll); a split has nothing to split.
                            if !request.splits { waitingMarkers.append(m) }
                        } else if splits, position > current!.offset, let prepared = takePrepared() {
                            let reason: TakeBoundary = request.splits ? .requested : .markerSplit
                            endCurrent(reason)
                            begin(prepared, at: position, reason)
                            if !request.splits { current!.markers.append(TakeMarker(frame: 0, label: m.label, date: m.date)) }
                            if preparesAhead { prepare(prepared.index + 1) }
                        } else if !request.splits {
                            current!.markers.append(TakeMarker(frame: max(0, position - current!.offset), label: m.label, date: m.date))
                        }
                        continue
                    }
                }
                let p = source.map { $0 + Int(done) * format.bytesPerFrame }
                var level: Float = 0
                if watchesLevels, let p {
                    for c in blockPeaks.indices { blockPeaks[c] = 0 }
                    LevelMeter.accumulatePeaks(p, frames: Int(n), format: format, into: &blockPeaks)
                    level = blockPeaks.max() ?? 0
                }
                if current == nil {
                    // Waiting: VOX or the trigger begins a take, with the pre-roll before it.
                    var reason: TakeBoundary?
                    if resumePending { reason = .deviceResumed }
                    if let voxThreshold, level >= voxThreshold { reason = .vox }
                    if plan.armed, !triggered, case let at = triggerFrame.load(ordering: .acquiring), at >= 0 {
                        // The take begins at the frame the device was at when the trigger came.
                        if at > position {
                            n = min(n, at - position)
                        } else {
                            reason = .trigger
                        }
                    }
                    if let reason, let prepared = takePrepared() {
                        if reason == .trigger { triggered = true }
                        resumePending = false
                        let offset = position - preRoll.count
                        begin(prepared, at: offset, reason)
                        current!.preRollFrames = preRoll.count
                        // Markers set while waiting, in the audio the take now begins with.
                        for m in waitingMarkers where m.frame >= offset {
                            current!.markers.append(TakeMarker(frame: m.frame - offset, label: m.label, date: m.date))
                        }
                        if waitingMarkers.contains(where: { $0.frame < offset }) {
                            logger.warning("A marker set while the run waited, before the audio its take begins with, was not kept.")
                            markersSet -= waitingMarkers.filter { $0.frame < offset }.count
                        }
                        waitingMarkers.removeAll()
                        lastLoud = position
                        try preRoll.drain { piece, frames in try write(piece, frames, gap: nil) }
                        // More takes may follow (splits, or VOX again): the next is made ready now.
                        if split.splits || plan.vox != nil, next == nil { prepare(lastIndex + 1) }
                        continue
                    }
                    preRoll.append(p, frames: n)
                    // The meter shows the input while the run waits, too.
                    if measuresLevels, let p { LevelMeter.accumulatePeaks(p, frames: Int(n), format: format, into: &peaks) }
                    position += n
                    done += n
                    continue
                }
                if let voxThreshold {
                    if level >= voxThreshold {
                        lastLoud = position + n
                    } else if position - lastLoud >= voxHold {
                        // Quiet for the hold time: the take ends here; the run waits again.
                        endCurrent(.vox)
                        if next == nil { prepare(lastIndex + 1) }
                        continue
                    }
                }
                if let b = boundary() {
                    if b.frame <= position, let c = current, position > c.offset {
                        if let prepared = takePrepared() {
                            endCurrent(b.reason)
                            begin(prepared, at: position, b.reason)
                            prepare(prepared.index + 1)
                            continue
                        }
                    } else if b.frame > position {
                        n = min(n, b.frame - position)
                    }
                }
                if let alarmThreshold, cause == nil {  // a gap is an overrun, reported as one
                    if level < alarmThreshold {
                        let since = quietSince ?? position
                        quietSince = since
                        if position + n - since >= alarmFrames {
                            if !alarmOpen {
                                alarmOpen = true
                                silences.append(SilenceEvent(offset: since, frames: position + n - since, date: Date()))
                                logger.warning("The input has been silent (below \(plan.silenceAlarm.map { String(format: "%.0f", $0.thresholdDB) } ?? "") dBFS) for \(String(format: "%.0f", Double(position + n - since) / rate)) s, since \(String(format: "%.1f", Double(since) / rate)) s into the run. Check the microphone and its cable.")
                            } else {
                                silences[silences.count - 1].frames = position + n - since
                            }
                        }
                    } else {
                        quietSince = nil
                        alarmOpen = false
                    }
                }
                try write(p, n, gap: cause)
                position += n
                done += n
            }
        }

        while true {
            var took = false
            while let s = ring.consumerSlot() {
                took = true
                // Full slots that follow each other in memory with no gap between them are one
                // write: a batch of periods costs one call into the encoder, not one per period.
                var run = 1
                var runFrames = s.frames
                while runFrames == run * ring.slotFrames, let next = ring.consumerSlot(ahead: run),
                      next.slot == s.slot + run, next.bufferGap == 0, next.deviceGap == 0, next.event == .none {
                    run += 1
                    runFrames += next.frames
                }
                switch s.event {
                case .deviceLost:
                    // The take ends where the device's audio did; the run waits for it.
                    if current != nil { endCurrent(.deviceLost) }
                    if next == nil { prepare(lastIndex + 1) }
                    awayFrom = position
                case .deviceResumed:
                    let (lost, back) = shared.withLock { ($0.lostAt, $0.resumedAt) }
                    if let lost {
                        let away = (back ?? .now) - lost.0
                        events.append(RunEvent(kind: "device-lost", offset: position,
                                               seconds: Double(away.components.seconds) + Double(away.components.attoseconds) / 1e18, date: lost.1))
                    }
                    // A run that records on its own goes on in a new take; one that waits for
                    // sound waits again.
                    resumePending = !plan.startsIdle || (plan.armed && triggered)
                    awayFrom = nil
                    if let back = shared.withLock({ $0.resumedDate }) { clockAnchor = (position, back) }
                case .none: break
                }
                if failure == nil {
                    do {
                        func fillGap(_ gap: Int64, cause: String) throws {
                            let g = limit.map { min(gap, $0 - position) } ?? gap
                            guard g > 0 else { return }
                            overrunCount += 1
                            overrunFrames += g
                            try emit(nil, g, gap: cause)
                        }
                        if s.bufferGap > 0 { try fillGap(s.bufferGap, cause: "buffer") }
                        if s.deviceGap > 0 { try fillGap(s.deviceGap, cause: "device") }
                        var n = Int64(runFrames)
                        if let limit { n = max(0, min(n, limit - position)) }
                        if n > 0 { try emit(ring.pointer(s.slot), n, gap: nil) }
                    } catch {
                        failure = (error as? TapedeckError) ?? TapedeckError(.io, "Writing the take failed: \(error).")
                        stopFlag.store(true, ordering: .releasing)
                    }
                }
                ring.release(count: run)
                spaceSignal.signal()
            }
            if took {
                if failure == nil, current != nil, ContinuousClock.now - lastCheckpoint >= settings.checkpointInterval {
                    do {
                        let began = ContinuousClock.now
                        try current!.writer.checkpoint()
                        checkpoints += 1
                        slowestCheckpoint = max(slowestCheckpoint, ContinuousClock.now - began)
                        if split.maxBytes != nil, let url = current!.fileURL, let size = Self.fileSize(url) {
                            current!.bytesSeen = size
                            current!.framesSeen = position - current!.offset
                        }
                    } catch {
                        failure = (error as? TapedeckError) ?? TapedeckError(.io, "Writing the take failed: \(error).")
                        stopFlag.store(true, ordering: .releasing)
                    }
                    lastCheckpoint = ContinuousClock.now
                    if let watch = freeSpace, !warnedLowSpace, let free = FreeSpace.available(at: watch.path),
                       free < watch.warnBelowBytes {
                        warnedLowSpace = true
                        logger.warning("\(FreeSpace.lowSpaceMessage(free: free, format: format, path: watch.path))")
                    }
                }
                let (pos, count, gapFrames, clips) = (position, overrunCount, overrunFrames, clippedTotal)
                let (index, takeFrames, toSplit) = (current?.index ?? 0, current.map { position - $0.offset } ?? 0,
                                                    current == nil ? nil : nextTimeSplit.map { $0 - position })
                let waiting: RecordingProgress.Waiting? = current != nil ? nil : plan.armed && !triggered ? .armed : plan.vox != nil ? .vox : nil
                let (held, alarms) = (preRoll.count, silences.count)
                let holding = current != nil && plan.vox != nil && position - lastLoud >= Int64(ring.slotFrames)
                let markerCount = markersSet
                shared.withLock { st in
                    st.progress.frames = pos
                    st.progress.clippedSamples = clips
                    st.progress.overrunCount = count
                    st.progress.overrunFrames = gapFrames
                    st.progress.takeIndex = index
                    st.progress.takeFrames = takeFrames
                    st.progress.framesToSplit = toSplit
                    st.progress.waiting = waiting
                    st.progress.preRollFrames = held
                    st.progress.silenceAlarms = alarms
                    st.progress.voxHolding = holding
                    st.progress.markers = markerCount
                    for c in 0..<min(peaks.count, st.progress.peaks.count) where peaks[c] > st.progress.peaks[c] {
                        st.progress.peaks[c] = peaks[c]
                    }
                }
                for c in peaks.indices { peaks[c] = 0 }
                if let limit, position >= limit { stopFlag.store(true, ordering: .releasing) }
                continue
            }
            if deviceFinished.load(ordering: .acquiring) && ring.count == 0 { break }
            // A real-time device thread wakes the writer only when the ring is half full or
            // capture ends; otherwise the writer takes what has accumulated every
            // ``writerInterval``, so a batch of periods costs one wake-up.
            _ = dataSignal.wait(timeout: .now() + writerInterval)
        }
        deviceDone.wait()

        // Markers the writer did not reach (set while the device drained): at the take's end.
        for request in dueMarkers + markRequests.withLock({ $0 }) where current != nil && !request.splits {
            let m = request.marker
            current!.markers.append(TakeMarker(frame: position - current!.offset, label: m.label, date: m.date))
        }
        var frames: Int64 = 0
        var writerFinished = true
        let last = current
        if let open = current {
            frames = position - open.offset
            do {
                frames = try open.writer.finish()
            } catch {
                writerFinished = false
                open.writer.abandon()
                if failure == nil {
                    failure = (error as? TapedeckError) ?? TapedeckError(.io, "Finishing the take failed: \(error).")
                }
            }
        }
        // A take made ready for a boundary the run did not reach is not a take.
        if let box = next, let sequence {
            takeQueue.async {
                if case .success(let unused) = box.wait() {
                    unused.writer.abandon()
                    sequence.discard(unused)
                }
            }
        }
        // Every earlier take is finished in storage before the run's result is returned.
        takeQueue.sync {}
        let (deviceEnd, start, stop) = shared.withLock { ($0.deviceEnd, $0.captureStart, $0.captureEnd) }
        let ended = shared.withLock { $0.deviceLoopEnd } ?? ContinuousClock.now
        let wall = (start.flatMap { s in stop.map { s.duration(to: $0) } }) ?? .zero
        let end: RecordingEnd
        if let failure {
            end = .writeFailed(failure)
        } else if case .deviceLost = deviceEnd {
            end = deviceEnd
        } else if let limit, position >= limit {
            end = .reachedDuration
        } else {
            end = deviceEnd
        }
        if overrunCount > 0 {
            logger.warning("Recording had \(overrunCount) overrun(s); \(overrunFrames) frames were filled with silence.")
        }
        logger.debug("Writer finished: \(frames) frames in take \(last?.index ?? 0) (\(position) in the run), \(checkpoints) checkpoints (slowest \(slowestCheckpoint.components.attoseconds / 1_000_000_000_000_000 + slowestCheckpoint.components.seconds * 1000) ms), \(clippedTotal) samples at full scale, end \(end).")
        let seconds = Double(wall.components.seconds) + Double(wall.components.attoseconds) / 1e18
        var result = RecordingResult(frames: frames, overruns: last?.overruns ?? [], end: end, wallSeconds: seconds, captureEnded: ended,
                                     writerFinished: writerFinished, clippedSamples: last?.clipped ?? 0,
                                     takeIndex: last?.index ?? 0, takeOffset: last?.offset ?? 0, takeBegan: last?.began ?? .start,
                                     runFrames: position)
        result.silences = silences
        result.markers = last?.markers ?? []
        if awayFrom != nil, let lost = shared.withLock({ $0.lostAt }) {
            // Lost and not back when the run ended.
            let away = ContinuousClock.now - lost.0
            events.append(RunEvent(kind: "device-lost", offset: position,
                                   seconds: Double(away.components.seconds) + Double(away.components.attoseconds) / 1e18, date: lost.1))
        }
        result.events = events
        result.takeOpenAtEnd = last != nil
        return .success(result)
    }

    /// A file's size in bytes, `nil` when it cannot be looked at.
    private static func fileSize(_ url: URL) -> Int64? {
        var st = stat()
        return stat(url.path, &st) == 0 ? Int64(st.st_size) : nil
    }
}

/// Moves a value that is not `Sendable` to another thread that then owns it alone.
private struct UncheckedTransfer<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
