import Foundation
import Logging
import Synchronization

/// The writer thread's loop: slots from the ring into ``RunWriter/emit(_:_:gap:)``, device
/// events to the segmenter, checkpoints, progress, and the run's result at the end.
/// - Thread: the engine's writer thread only; blocks on the ring's semaphore.
extension RunWriter {
    /// Runs until the device has finished and the ring is empty, then finishes the last take.
    func run() -> Result<RecordingResult, any Error> {
        while true {
            var took = false
            while let s = ring.consumerSlot() {
                took = true
                take(s)
            }
            if took {
                if failure == nil, current != nil || programs?.recording == true,
                   ContinuousClock.now - lastCheckpoint >= engine.settings.checkpointInterval {
                    checkpoint()
                }
                publishProgress()
                warnOnceOverMarkerLimit()
                if let limit, position >= limit { engine.stopFlag.store(true, ordering: .releasing) }
                continue
            }
            if engine.deviceFinished.load(ordering: .acquiring) && ring.count == 0 { break }
            // A real-time device thread wakes the writer only when the ring is half full or
            // capture ends; otherwise the writer takes what has accumulated every
            // ``RecordingEngine/writerInterval``, so a batch of periods costs one wake-up.
            _ = engine.dataSignal.wait(timeout: .now() + engine.writerInterval)
        }
        engine.deviceDone.wait()
        return .success(finish())
    }

    /// Takes slot `s` (and the full slots after it in memory) into the run.
    private func take(_ s: (slot: Int, frames: Int, bufferGap: Int64, deviceGap: Int64, event: SlotEvent)) {
        // Full slots that follow each other in memory with no gap between them are one write: a
        // batch of periods costs one call into the encoder, not one per period.
        var run = 1
        var runFrames = s.frames
        while runFrames == run * ring.slotFrames, let next = ring.consumerSlot(ahead: run),
              next.slot == s.slot + run, next.bufferGap == 0, next.deviceGap == 0, next.event == .none {
            run += 1
            runFrames += next.frames
        }
        if format.sampleFormat.isFloat {
            // A float device can deliver NaN or infinities: replaced here, once, before the
            // level meter, the segmenter or the encoder sees them (the writer owns the slots
            // until it releases them).
            invalidSamples += Int64(InvalidSamples.replace(in: ring.pointer(s.slot), count: runFrames * format.channels))
        }
        switch s.event {
        case .deviceLost: deviceLost()
        case .deviceResumed: deviceResumed()
        case .none: break
        }
        if failure == nil {
            do {
                if s.bufferGap > 0 { try fillGap(s.bufferGap, cause: "buffer") }
                if s.deviceGap > 0 { try fillGap(s.deviceGap, cause: "device") }
                var n = Int64(runFrames)
                if let limit { n = max(0, min(n, limit - position)) }
                if n > 0 { try emit(ring.pointer(s.slot), n, gap: nil) }
            } catch {
                failure = (error as? TapedeckError) ?? TapedeckError(.io, "Writing the take failed: \(error).")
                engine.stopFlag.store(true, ordering: .releasing)
            }
        }
        ring.release(count: run)
        engine.spaceSignal.signal()
    }

    /// Silence for `gap` frames the device or the ring lost, counted as an overrun.
    private func fillGap(_ gap: Int64, cause: String) throws {
        let g = limit.map { min(gap, $0 - position) } ?? gap
        guard g > 0 else { return }
        overrunCount += 1
        overrunFrames += g
        try emit(nil, g, gap: cause)
    }

    /// The take ends where the device's audio did; the run waits for it.
    private func deviceLost() {
        if segmenter.deviceLost() != nil { endCurrent(.deviceLost) }
        if next == nil { prepare(lastIndex + 1) }
        awayFrom = position
    }

    /// The device came back: a run that records on its own goes on in a new take; one that
    /// waits for sound waits again.
    private func deviceResumed() {
        let (lost, back) = engine.shared.withLock { ($0.lostAt, $0.resumedAt) }
        if let lost {
            events.append(RunEvent(kind: "device-lost", offset: position, seconds: Self.seconds((back ?? .now) - lost.0), date: lost.1))
        }
        segmenter.deviceResumed()
        awayFrom = nil
        if let back = engine.shared.withLock({ $0.resumedDate }) { clockAnchor = (position, back) }
    }

    /// Makes the current take's audio so far durable, and warns once when the disk gets low.
    private func checkpoint() {
        do {
            let began = ContinuousClock.now
            try current?.writer.checkpoint()
            programs?.checkpoint()
            checkpoints += 1
            slowestCheckpoint = max(slowestCheckpoint, ContinuousClock.now - began)
            if plan.split.maxBytes != nil, let url = current?.fileURL, let size = Self.fileSize(url) {
                segmenter.observed(bytes: size)
            }
        } catch {
            failure = (error as? TapedeckError) ?? TapedeckError(.io, "Writing the take failed: \(error).")
            engine.stopFlag.store(true, ordering: .releasing)
        }
        lastCheckpoint = ContinuousClock.now
        if let watch = freeSpace, !warnedLowSpace, let free = FreeSpace.available(at: watch.path), free < watch.warnBelowBytes {
            warnedLowSpace = true
            logger.warning("\(FreeSpace.lowSpaceMessage(free: free, format: format, path: watch.path))")
        }
    }

    /// The progress others read (``RecordingEngine/takeProgress()``); the peaks start again.
    private func publishProgress() {
        let (pos, count, gapFrames, clips) = (position, overrunCount, overrunFrames, clippedTotal)
        let takeFrames = current.map { position - $0.offset } ?? 0
        let toSplit = current == nil ? nil : segmenter.nextTimeSplit.map { $0 - position }
        let waiting: RecordingProgress.Waiting? = current != nil ? nil : plan.armed && !segmenter.triggered ? .armed : plan.vox != nil ? .vox : nil
        let (index, held, alarms, holding, markerCount) = (current?.index ?? 0, preRoll.count, silences.count, segmenter.voxHolding, segmenter.markersSet)
        let (peaks, squares, squaredFrames) = (peaks, squares, squaredFrames)
        let (lastSilence, silent) = (silences.last, segmenter.silenceAlarmOpen)
        engine.shared.withLock { st in
            st.progress.lastSilence = lastSilence
            st.progress.silenceOngoing = silent
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
            if st.progress.squares.count == squares.count {
                for c in squares.indices { st.progress.squares[c] += squares[c] }
                st.progress.squaredFrames += squaredFrames
            }
        }
        for c in self.peaks.indices { self.peaks[c] = 0 }
        for c in self.squares.indices { self.squares[c] = 0 }
        self.squaredFrames = 0
    }

    /// Finishes the last take, discards a take made ready for a boundary the run did not reach,
    /// waits for the take queue, and describes the run.
    private func finish() -> RecordingResult {
        // Markers the writer did not reach (set while the device drained): at the take's end.
        takeRequests()
        for marker in segmenter.finish() { current?.markers.append(marker) }
        warnOnceOverMarkerLimit()
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
                if failure == nil { failure = (error as? TapedeckError) ?? TapedeckError(.io, "Finishing the take failed: \(error).") }
            }
        }
        programs?.finishAll(failure != nil ? .writeFailed : engine.lengthReached.load(ordering: .acquiring) || limit.map { position >= $0 } == true
                            ? .duration : awayFrom != nil ? .deviceLost : .stopped)
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
        let (deviceEnd, start, stop, lost) = engine.shared.withLock { ($0.deviceEnd, $0.captureStart, $0.captureEnd, $0.lostAt) }
        let ended = engine.shared.withLock { $0.deviceLoopEnd } ?? ContinuousClock.now
        let wall = (start.flatMap { s in stop.map { s.duration(to: $0) } }) ?? .zero
        let end: RecordingEnd
        if let failure {
            end = .writeFailed(failure)
        } else if case .deviceLost = deviceEnd {
            end = deviceEnd
        } else if let limit, position >= limit {
            end = .reachedDuration
        } else if engine.lengthReached.load(ordering: .acquiring) {
            end = .reachedDuration
        } else {
            end = deviceEnd
        }
        // The report carries the overruns (each with its frame and time): the log only notes them.
        if overrunCount > 0 {
            logger.info("Recording had \(overrunCount) overrun(s); \(overrunFrames) frames were filled with silence.")
        }
        if invalidSamples > 0 {
            logger.warning("The device delivered \(InvalidSamples.summary(invalidSamples)). Check its driver, or the program that feeds it.")
        }
        let slowest = slowestCheckpoint.components.attoseconds / 1_000_000_000_000_000 + slowestCheckpoint.components.seconds * 1000
        logger.debug("Writer finished: \(frames) frames in take \(last?.index ?? 0) (\(position) in the run), \(checkpoints) checkpoints (slowest \(slowest) ms), \(clippedTotal) samples at full scale, end \(end).")
        var result = RecordingResult(frames: frames, overruns: last?.overruns ?? [], end: end, wallSeconds: Self.seconds(wall), captureEnded: ended,
                                     writerFinished: writerFinished, clippedSamples: last?.clipped ?? 0,
                                     takeIndex: last?.index ?? 0, takeOffset: last?.offset ?? 0,
                                     takeBegan: segmenter.take?.reason ?? .start, runFrames: position)
        result.silences = silences
        result.markers = last?.markers ?? []
        result.markersNotKept = segmenter.markersNotKept
        if awayFrom != nil, let lost {
            // Lost and not back when the run ended.
            events.append(RunEvent(kind: "device-lost", offset: position, seconds: Self.seconds(ContinuousClock.now - lost.0), date: lost.1))
        }
        if let waited = waitingForRoom {
            // Still waiting for room for a take when the run ended.
            events.append(RunEvent(kind: RunEvent.noRoom, offset: waited.frame, seconds: Double(position - waited.frame) / rate, date: waited.date))
        }
        result.events = events
        result.takeOpenAtEnd = last != nil
        return result
    }

    static func seconds(_ d: Duration) -> Double {
        Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
    }
}

/// The last seconds of audio no take holds (VOX and armed runs wait with it), allocated once.
/// - Thread: the writer thread only. Never blocks.
final class PreRollRing {
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
