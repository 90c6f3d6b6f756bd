import Foundation
import Logging
import Synchronization

/// The writer thread of a ``RecordingEngine`` run: takes the device's audio from the hand-off
/// ring, asks the run's ``RunSegmenter`` what to do with it, and carries that out: writes to the
/// take's ``TakeWriter``, holds pre-roll, has the take queue make the next take ready and
/// finish the last, checkpoints, measures levels and publishes progress. Where takes begin and
/// end is the segmenter's alone.
///
/// - Thread: the engine's writer thread only (it owns every field); blocks on the ring's
///   semaphore and, at a boundary, on the next take being made ready.
final class RunWriter {
    /// The take the writer writes now, and what it has gathered for it.
    struct CurrentTake {
        var writer: any TakeWriter
        var index: Int
        var id: String?
        var fileURL: URL?
        /// The run frame it begins at.
        var offset: Int64
        var overruns: [OverrunEvent] = []
        var clipped: Int64 = 0
        var markers: [TakeMarker] = []
        /// Whether the writer has been told the wall-clock time of the take's first frame.
        var announced = false
        /// Frames of pre-roll the take begins with.
        var preRollFrames: Int64 = 0
    }

    let engine: RecordingEngine
    let ring: SlotRing
    let format: AudioFormat
    let plan: RunPlan
    let sequence: (any TakeSequence)?
    let freeSpace: FreeSpace?
    let limit: Int64?
    let logger: Logger
    let rate: Double
    var segmenter: RunSegmenter
    var current: CurrentTake?
    /// The index the last take had (the next one is one more).
    var lastIndex: Int
    var overrunCount = 0
    var overrunFrames: Int64 = 0
    var failure: TapedeckError?
    var peaks: [Float]
    var clippedTotal: Int64 = 0
    /// Float samples the device delivered as NaN, infinities or past +40 dBFS, replaced.
    var invalidSamples: Int64 = 0
    var checkpoints = 0
    var slowestCheckpoint = Duration.zero
    var lastCheckpoint = ContinuousClock.now
    var warnedLowSpace: Bool
    var silences: [SilenceEvent] = []
    var events: [RunEvent] = []
    /// A run frame and the wall-clock time it was captured at (capture's start, or the device's
    /// return after it was lost).
    var clockAnchor: (frame: Int64, date: Date)?
    /// Where the device was lost, while it is away.
    var awayFrom: Int64?
    let silence: UnsafeMutableRawPointer
    let preRoll: PreRollRing
    var blockPeaks: [Float]
    /// Sums of squared samples since the last published progress, and their frames (the RMS).
    var squares: [Double] = []
    var squaredFrames: Int64 = 0
    /// Takes are made ready and finished on this queue while the writer goes on writing.
    let takeQueue: DispatchQueue
    /// The programme takes cut from the run (``RunPlan/programs``); `nil` without programmes.
    let programs: ProgramCutter?
    var next: NextTake?
    var warnedPrepare = false
    /// Whether the run has said that a take reached ``TakeMarker/maxCount`` markers.
    var warnedMarkerLimit = false
    /// Where and when the run began waiting because a take reached `--split-size` and the next
    /// could not be made ready (a full disk); `nil` when it is not waiting so.
    var waitingForRoom: (frame: Int64, date: Date)?
    /// A run that splits only when asked (the web page's Split) makes its next take when the
    /// split comes: no empty take waits in the library meanwhile, and the take's entry is dated
    /// when it begins. The writer waits the few milliseconds that takes; the hand-off ring holds
    /// what the device delivers meanwhile. Every other run makes it ready ahead.
    let preparesAhead: Bool

    init(engine: RecordingEngine, ring: SlotRing, format: AudioFormat, plan: RunPlan, sequence: (any TakeSequence)?,
         freeSpace: FreeSpace?, limit: Int64?, firstWriter: (any TakeWriter)?, firstFileURL: URL?) {
        self.engine = engine
        self.ring = ring
        self.format = format
        self.plan = plan
        self.sequence = sequence
        self.freeSpace = freeSpace
        self.limit = limit
        logger = engine.logger
        rate = Double(format.sampleRate)
        let aligned = plan.split.alignedToClock ? plan.split.everySeconds.map {
            SplitRule.framesToClockBoundary(from: Date(), every: $0, rate: format.sampleRate)
        } : nil
        let rules = RunSegmenter.Rules(plan: plan, sampleRate: format.sampleRate, bytesPerFrame: format.bytesPerFrame,
                                       blockFrames: ring.slotFrames, firstAlignedSplit: aligned)
        segmenter = RunSegmenter(rules: rules, startsWithTake: firstWriter != nil, bytes: firstFileURL.flatMap(Self.fileSize) ?? 0)
        current = firstWriter.map { CurrentTake(writer: $0, index: 1, id: nil, fileURL: firstFileURL, offset: 0) }
        lastIndex = current == nil ? 0 : 1
        peaks = Array(repeating: 0, count: format.channels)
        blockPeaks = peaks
        // A disk that starts low was warned about before recording; warn here only when it becomes low.
        warnedLowSpace = freeSpace.map { w in FreeSpace.available(at: w.path).map { $0 < w.warnBelowBytes } ?? true } ?? true
        silence = .allocate(byteCount: ring.slotFrames * ring.bytesPerFrame, alignment: 16)
        silence.initializeMemory(as: UInt8.self, repeating: 0, count: ring.slotFrames * ring.bytesPerFrame)
        preRoll = PreRollRing(frames: rules.preRollCapacity, bytesPerFrame: format.bytesPerFrame)
        preparesAhead = plan.split.splits || plan.startsIdle || plan.splitOnMarker || plan.resume
        let queue = DispatchQueue(label: "tapedeck-takes")
        takeQueue = queue
        programs = plan.programs.isEmpty ? nil : sequence.map {
            ProgramCutter(rules: plan.programs, sequence: $0, format: format, queue: queue, logger: engine.logger)
        }
        if preparesAhead { prepare(lastIndex + 1) }
    }

    deinit { silence.deallocate() }

    var position: Int64 { segmenter.position }

    // MARK: takes

    /// Has the take queue make take `index` ready (a run whose takes come from a sequence).
    func prepare(_ index: Int) {
        guard plan.makesRun, let sequence else { return }
        let box = NextTake()
        next = box
        // The take begins at the next time split, when there is one (counted from when capture
        // began, at the device's rate); else it is not known, and now will do.
        var ahead = 0.0
        if current != nil, let t = segmenter.nextTimeSplit {
            // Capture not begun yet: it begins about now.
            let elapsed = engine.shared.withLock { $0.captureStart }.map { began in
                let since = ContinuousClock.now - began
                return Double(since.components.seconds) + Double(since.components.attoseconds) / 1e18
            } ?? 0
            ahead = Double(t) / rate - elapsed
        }
        let start = Date().addingTimeInterval(ahead)
        let format = format
        takeQueue.async {
            do {
                box.set(.success(try sequence.prepareTake(index: index, format: format, start: start)))
            } catch {
                box.set(.failure((error as? TapedeckError) ?? TapedeckError(.io, "Preparing the next take failed: \(error).")))
            }
        }
    }

    /// The prepared next take, waiting for it if it is still being made; `nil` when it could
    /// not be made (the segmenter tries again later).
    /// - Parameter atSizeLimit: the take is wanted for a size split: the current take ends at
    ///   its `--split-size` whether or not the next can begin, and the warning says so.
    func takePrepared(atSizeLimit: Bool = false) -> PreparedTake? {
        if next == nil { prepare(lastIndex + 1) }
        guard let box = next else { return nil }
        next = nil
        switch box.wait() {
        case .success(let p): return p
        case .failure(let error):
            if atSizeLimit {
                logger.warning("Could not start the next take (\(error.message)). Take \(lastIndex) reached --split-size, which no file passes, so it ends there; recording waits and Tapedeck tries again every 10 s. The audio until then is not kept: free some space.")
            } else if !warnedPrepare {
                warnedPrepare = true
                logger.warning("Could not start the next take (\(error.message)); \(current == nil ? "the run waits on" : "recording goes on in the current take"), and Tapedeck tries again every 10 s.")
            }
            return nil
        }
    }

    /// Ends the current take at the current position; the take queue finishes it.
    func endCurrent(_ reason: TakeBoundary) {
        guard let ended = current, let sequence else { return }
        let offset = ended.offset
        let endedFrames = position - offset
        let endedWriter = UncheckedTransfer(ended.writer)
        let (endedIndex, endedID) = (ended.index, ended.id ?? "")
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
            sequence.takeEnded(EndedTake(index: endedIndex, id: endedID, offset: offset, frames: frames,
                                         overruns: endedOverruns, clippedSamples: endedClipped, reason: reason,
                                         writerFinished: finished, failure: problem, markers: endedMarkers))
        }
        current = nil
    }

    /// Starts `prepared` at `offset` for `reason`.
    func begin(_ prepared: PreparedTake, at offset: Int64, _ reason: TakeBoundary) {
        guard let sequence else { return }
        takeQueue.async { sequence.takeBegan(prepared, offset: offset, reason: reason) }
        current = CurrentTake(writer: prepared.writer, index: prepared.index, id: prepared.id, fileURL: prepared.fileURL, offset: offset)
        lastIndex = prepared.index
        lastCheckpoint = ContinuousClock.now
    }

    /// Carries out a begin or split the segmenter asked for, and answers it.
    func beginOrSplit(_ action: RunSegmenter.Action) throws {
        guard let prepared = takePrepared(atSizeLimit: action == .split(.splitSize)) else {
            segmenter.takeBegan(false)
            return
        }
        let bytes = prepared.fileURL.flatMap(Self.fileSize) ?? 0
        switch action {
        case .begin(let reason, let offset, let held):
            if let waited = waitingForRoom {
                // The audio between the take that ended at its size limit and this one was not kept.
                events.append(RunEvent(kind: RunEvent.noRoom, offset: waited.frame, seconds: Double(max(0, offset - waited.frame)) / rate, date: waited.date))
                waitingForRoom = nil
            }
            begin(prepared, at: offset, reason)
            segmenter.takeBegan(true, bytes: bytes)
            current!.preRollFrames = held
            try preRoll.drain { piece, frames in try write(piece, frames, gap: nil) }
            // More takes may follow (splits, or VOX again): the next is made ready now.
            if plan.split.splits || plan.vox != nil, next == nil { prepare(lastIndex + 1) }
        case .split(let reason):
            endCurrent(reason)
            begin(prepared, at: position, reason)
            segmenter.takeBegan(true, bytes: bytes)
            if preparesAhead { prepare(prepared.index + 1) }
        default:
            break
        }
    }

    // MARK: audio

    /// Writes `n` frames from `p` (`nil`: silence for a gap with `cause`) into the current take.
    func write(_ p: UnsafeRawPointer?, _ n: Int64, gap cause: String?) throws {
        guard current != nil else { return }
        if !current!.announced { announce() }
        if let cause {
            // The segmenter has counted these frames already: the gap began n frames ago.
            current!.overruns.append(OverrunEvent(frame: position - n - current!.offset, frames: n, date: Date(), cause: cause))
            var left = n
            while left > 0 {
                let m = Int(min(left, Int64(ring.slotFrames)))
                try current!.writer.write(silence, frames: m)
                left -= Int64(m)
            }
        } else if let p {
            try current!.writer.write(p, frames: Int(n))
            if engine.settings.measuresLevels {
                var clips: Int64 = 0
                LevelMeter.accumulatePeaks(p, frames: Int(n), format: format, into: &peaks, clipped: &clips, squares: &squares)
                squaredFrames += n
                current!.clipped += clips
                clippedTotal += clips
            }
        }
    }

    /// Tells the writer the time of day of the take's first frame: the clock when capture (or
    /// the device's return) began, or the source's own clock when it has one and it is newer,
    /// plus the run's frames since, at the device's rate.
    private func announce() {
        current!.announced = true
        if let anchor = timeAnchor() {
            current!.writer.began(at: anchor.date.addingTimeInterval(Double(current!.offset - anchor.frame) / rate),
                                  preRollFrames: current!.preRollFrames)
        }
    }

    /// The run's frame whose time of day is known best now, and that time: capture's start (or
    /// the device's return), or the source's own clock when it has one and it is newer.
    func timeAnchor() -> (frame: Int64, date: Date)? {
        let (started, source) = engine.shared.withLock { ($0.captureStartDate, $0.sourceClock) }
        if clockAnchor == nil, let started { clockAnchor = (0, started) }
        if let source, source.frame >= clockAnchor?.frame ?? 0 { clockAnchor = source }
        return clockAnchor
    }

    /// Takes `count` frames (from `source`, or silence for a gap with `cause`) into the run, as
    /// the segmenter says: into the current take, ending and beginning takes at their
    /// boundaries on the way (sample-exact: nothing doubled, nothing left out), or into the
    /// pre-roll while the run waits for sound or a trigger.
    func emit(_ source: UnsafeRawPointer?, _ count: Int64, gap cause: String?) throws {
        takeRequests()
        if let programs {
            // The programmes' takes first: a marker the segmenter places below finds their frames.
            if let anchor = timeAnchor() { programs.anchored(anchor) }
            programs.feed(source, count, at: position, gap: cause)
        }
        var done: Int64 = 0
        let level = { [format] (n: Int64) -> Float in
            guard let p = source.map({ $0 + Int(done) * format.bytesPerFrame }) else { return 0 }
            for c in self.blockPeaks.indices { self.blockPeaks[c] = 0 }
            LevelMeter.accumulatePeaks(p, frames: Int(n), format: format, into: &self.blockPeaks)
            return self.blockPeaks.max() ?? 0
        }
        while let action = segmenter.next(available: count - done, gap: cause != nil, level: level) {
            let p = source.map { $0 + Int(done) * format.bytesPerFrame }
            switch action {
            case .write(let n):
                try write(p, n, gap: cause)
                done += n
            case .hold(let n):
                preRoll.append(p, frames: n)
                // The meter shows the input while the run waits, too.
                if engine.settings.measuresLevels, let p { LevelMeter.accumulatePeaks(p, frames: Int(n), format: format, into: &peaks) }
                done += n
            case .end(let reason):
                endCurrent(reason)
                // Only a take at its size limit whose next could not be made ready ends so.
                if reason == .splitSize { waitingForRoom = (position, Date()) }
                if next == nil { prepare(lastIndex + 1) }
            case .begin, .split:
                try beginOrSplit(action)
            case .mark(let marker):
                current?.markers.append(marker)
                if let programs, let take = current { programs.mark(marker, atRunFrame: take.offset + marker.frame) }
            case .dropMarkers(let count):
                logger.warning("\(count == 1 ? "A marker" : "\(count) markers") set while no take was recording \(count == 1 ? "was" : "were") not kept: a marker needs a take to be in. Set markers once a take runs (the m key, or `tapedeck mark`).")
            case .silenceAlarm(let since, let frames):
                silences.append(SilenceEvent(offset: since, frames: frames, date: Date()))
                let threshold = plan.silenceAlarm.map { String(format: "%.0f", $0.thresholdDB) } ?? ""
                logger.warning("The input has been silent (below \(threshold) dBFS) for \(String(format: "%.0f", Double(frames) / rate)) s, since \(String(format: "%.1f", Double(since) / rate)) s into the run. Check the microphone and its cable.")
            case .silenceGoesOn(let frames):
                if !silences.isEmpty { silences[silences.count - 1].frames = frames }
            }
        }
    }

    /// Says once per run, when it first happens, that a take had ``TakeMarker/maxCount``
    /// markers and the later ones were not kept.
    func warnOnceOverMarkerLimit() {
        guard !warnedMarkerLimit, segmenter.markersNotKept > 0 else { return }
        warnedMarkerLimit = true
        logger.warning("A take keeps at most \(TakeMarker.maxCount) markers: take \(current?.index ?? lastIndex) has them all, and markers set after those are not kept (the report counts them). Split long runs with --split to set more.")
    }

    /// Markers, splits and the trigger asked for since the last block, handed to the segmenter.
    func takeRequests() {
        if plan.armed, segmenter.triggerFrame == nil, case let at = engine.triggerFrame.load(ordering: .acquiring), at >= 0 {
            segmenter.triggerFrame = at
        }
        guard engine.markCount.load(ordering: .acquiring) > 0 else { return }
        let taken = engine.markRequests.withLock { requests -> [RecordingEngine.MarkRequest] in
            defer { requests.removeAll(keepingCapacity: true) }
            return requests
        }
        engine.markCount.subtract(taken.count, ordering: .releasing)
        for request in taken { segmenter.request(request.marker, splits: request.splits) }
    }

    /// A file's size in bytes, `nil` when it cannot be looked at.
    static func fileSize(_ url: URL) -> Int64? {
        var st = stat()
        return stat(url.path, &st) == 0 ? Int64(st.st_size) : nil
    }
}

/// The next take, made ready on the take queue while the current one records.
final class NextTake: @unchecked Sendable {
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

/// Moves a value that is not `Sendable` to another thread that then owns it alone.
struct UncheckedTransfer<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
