import Foundation
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
        var captureEnd: ContinuousClock.Instant?
        var deviceLoopEnd: ContinuousClock.Instant?
        var progress = RecordingProgress()
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
    public func record(watching freeSpace: FreeSpace? = nil,
                       makeWriter: @escaping @Sendable (AudioFormat) throws -> any TakeWriter) async throws -> RecordingResult {
        try await withCheckedThrowingContinuation { (cont: CheckedContinuation<RecordingResult, any Error>) in
            let thread = Thread { [self] in cont.resume(with: self.writerThreadMain(freeSpace: freeSpace, makeWriter: makeWriter)) }
            thread.name = "tapedeck-writer"
            thread.start()
        }
    }

    // MARK: device thread

    private func deviceThreadMain(opened: CheckedContinuation<AudioFormat, any Error>) {
        let stream: any CaptureStream
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
        shared.withLock { $0.captureStart = start }
        let (end, stoppedAt) = captureLoop(stream: stream, ring: ring)
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
    private func captureLoop(stream: any CaptureStream, ring: SlotRing) -> (RecordingEnd, ContinuousClock.Instant?) {
        let scratch = UnsafeMutableRawPointer.allocate(byteCount: ring.slotFrames * ring.bytesPerFrame, alignment: 16)
        defer { scratch.deallocate() }
        let limit = frameLimit
        let wakeThreshold = max(1, ring.slotCount / 2)
        var timeline: Int64 = 0
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
                    } else {
                        _ = spaceSignal.wait(timeout: .now() + .milliseconds(50))
                    }
                    continue
                }
                let r = try stream.read(into: ring.pointer(slot), maxFrames: ring.slotFrames)
                ring.publish(slot, frames: r.frames, bufferGap: bufferGap, deviceGap: deviceGap + r.lostFramesBefore)
                timeline += Int64(r.frames) + r.lostFramesBefore
                bufferGap = 0
                deviceGap = 0
                // A real-time stream's periods are batched (see writerInterval); a stream that
                // waits for the writer anyway hands over every slot at once.
                // The first period is written at once, so the file shows audio from the start.
                if !stream.isRealTime || ring.count >= wakeThreshold || timeline == Int64(r.frames) + r.lostFramesBefore {
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

    private func writerThreadMain(freeSpace: FreeSpace?, makeWriter: @Sendable (AudioFormat) throws -> any TakeWriter) -> Result<RecordingResult, any Error> {
        guard let (ring, format) = shared.withLock({ s in s.ring.map { ($0, s.format!) } }) else {
            return .failure(TapedeckError(.internalError, "record(makeWriter:) was called before open() succeeded."))
        }
        let writer: any TakeWriter
        do {
            writer = try makeWriter(format)
        } catch {
            close()
            deviceDone.wait()
            return .failure(error)
        }
        startGate.signal()

        let limit = frameLimit
        let measuresLevels = settings.measuresLevels
        let silence = UnsafeMutableRawPointer.allocate(byteCount: ring.slotFrames * ring.bytesPerFrame, alignment: 16)
        silence.initializeMemory(as: UInt8.self, repeating: 0, count: ring.slotFrames * ring.bytesPerFrame)
        defer { silence.deallocate() }
        var position: Int64 = 0
        var overruns: [OverrunEvent] = []
        var overrunFrames: Int64 = 0
        var failure: TapedeckError?
        var peaks = Array(repeating: Float(0), count: format.channels)
        var clipped: Int64 = 0
        var checkpoints = 0
        var slowestCheckpoint = Duration.zero
        var lastCheckpoint = ContinuousClock.now
        // A disk that starts low was warned about before recording; warn here only when it becomes low.
        var warnedLowSpace = freeSpace.map { w in FreeSpace.available(at: w.path).map { $0 < w.warnBelowBytes } ?? true } ?? true

        func writeSilence(_ frames: Int64) throws {
            var left = frames
            while left > 0 {
                let n = Int(min(left, Int64(ring.slotFrames)))
                try writer.write(silence, frames: n)
                left -= Int64(n)
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
                      next.slot == s.slot + run, next.bufferGap == 0, next.deviceGap == 0 {
                    run += 1
                    runFrames += next.frames
                }
                if failure == nil {
                    do {
                        func fillGap(_ gap: Int64, cause: String) throws {
                            let g = limit.map { min(gap, $0 - position) } ?? gap
                            guard g > 0 else { return }
                            overruns.append(OverrunEvent(frame: position, frames: g, date: Date(), cause: cause))
                            overrunFrames += g
                            try writeSilence(g)
                            position += g
                        }
                        if s.bufferGap > 0 { try fillGap(s.bufferGap, cause: "buffer") }
                        if s.deviceGap > 0 { try fillGap(s.deviceGap, cause: "device") }
                        var n = Int64(runFrames)
                        if let limit { n = max(0, min(n, limit - position)) }
                        if n > 0 {
                            let p = ring.pointer(s.slot)
                            try writer.write(p, frames: Int(n))
                            if measuresLevels { LevelMeter.accumulatePeaks(p, frames: Int(n), format: format, into: &peaks, clipped: &clipped) }
                            position += n
                        }
                    } catch {
                        failure = (error as? TapedeckError) ?? TapedeckError(.io, "Writing the take failed: \(error).")
                        stopFlag.store(true, ordering: .releasing)
                    }
                }
                ring.release(count: run)
                spaceSignal.signal()
            }
            if took {
                if failure == nil, ContinuousClock.now - lastCheckpoint >= settings.checkpointInterval {
                    do {
                        let began = ContinuousClock.now
                        try writer.checkpoint()
                        checkpoints += 1
                        slowestCheckpoint = max(slowestCheckpoint, ContinuousClock.now - began)
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
                let (pos, count, gapFrames, clips) = (position, overruns.count, overrunFrames, clipped)
                shared.withLock { st in
                    st.progress.frames = pos
                    st.progress.clippedSamples = clips
                    st.progress.overrunCount = count
                    st.progress.overrunFrames = gapFrames
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

        var frames = position
        var writerFinished = true
        do {
            frames = try writer.finish()
        } catch {
            writerFinished = false
            writer.abandon()
            if failure == nil {
                failure = (error as? TapedeckError) ?? TapedeckError(.io, "Finishing the take failed: \(error).")
            }
        }
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
        if !overruns.isEmpty {
            logger.warning("Recording had \(overruns.count) overrun(s); \(overrunFrames) frames were filled with silence.")
        }
        logger.debug("Writer finished: \(frames) frames, \(checkpoints) checkpoints (slowest \(slowestCheckpoint.components.attoseconds / 1_000_000_000_000_000 + slowestCheckpoint.components.seconds * 1000) ms), \(clipped) samples at full scale, end \(end).")
        let seconds = Double(wall.components.seconds) + Double(wall.components.attoseconds) / 1e18
        return .success(RecordingResult(frames: frames, overruns: overruns, end: end, wallSeconds: seconds, captureEnded: ended,
                                        writerFinished: writerFinished, clippedSamples: clipped))
    }
}
