import Foundation

/// The decisions of a recording run as a plain value: where each take begins and ends, and why.
///
/// It owns no thread, file or clock. The writer thread hands it the audio the device delivered,
/// block by block, and the requests and device events as they come; it answers with one
/// ``Action`` at a time, which the writer carries out (writing frames to the current take,
/// holding them as pre-roll, ending a take, beginning one) before it asks again. The one answer
/// it needs back is whether a take could begin (``takeBegan(_:bytes:)``): making a take ready can fail
/// (a full disk), and then the run goes on as it was and tries again ten seconds of audio later;
/// except at a size split, which is a bound no file passes: the take ends there, and the run
/// waits (its audio not kept) until a take can begin again.
///
/// The rules it applies: pre-roll (at most ``RunPlan/longestPreRoll``), VOX with its hold, the
/// armed trigger, splits by duration (aligned to the clock or not), size and marker, requested
/// splits, the silence alarm, markers, and a lost device that ends the take and, with
/// ``RunPlan/resume``, begins the next when it comes back. A take keeps at most
/// ``TakeMarker/maxCount`` markers: this is where that limit is applied, once, as markers land
/// in takes; later ones are counted (``markersNotKept``) and go no further. Requests cost the
/// same however many come (a flood of markers is appended and passed in order, never sorted
/// again). Frames are accounted exactly: every
/// frame handed in leaves as exactly one ``Action/write(_:)`` or ``Action/hold(_:)``, and held
/// frames reach a take only as the pre-roll a ``Action/begin(_:offset:preRoll:)`` names.
///
/// - Thread: any, one at a time (a value type; the writer thread owns it). Never blocks.
public struct RunSegmenter: Sendable {
    /// What the writer does next.
    public enum Action: Sendable, Hashable {
        /// Write the block's next frames (this many) to the current take.
        case write(Int64)
        /// Hold the block's next frames (this many) in the pre-roll: the run waits.
        case hold(Int64)
        /// End the current take here; the run waits (VOX quiet, the device lost).
        case end(TakeBoundary)
        /// Begin a take for this reason at this run frame, with the newest `preRoll` frames
        /// held (the take's first frames; offset + preRoll is the current position). Answer
        /// with ``takeBegan(_:bytes:)``.
        case begin(TakeBoundary, offset: Int64, preRoll: Int64)
        /// End the current take here and begin the next here, for this reason. Answer with
        /// ``takeBegan(_:bytes:)``; when no take could be made ready, the current one goes on.
        case split(TakeBoundary)
        /// Add this marker to the current take (its frame counted from the take's start).
        case mark(TakeMarker)
        /// This many markers set while the run waited fell before the audio the take begins
        /// with, and are not kept.
        case dropMarkers(Int)
        /// The input has been below the alarm's threshold since run frame `since`, for
        /// `frames`: a new alarm.
        case silenceAlarm(since: Int64, frames: Int64)
        /// The open alarm's silence has grown to `frames`.
        case silenceGoesOn(frames: Int64)
    }

    /// The rules of a run in frames, from a ``RunPlan`` and the audio's format.
    public struct Rules: Sendable, Hashable {
        /// The longest block decided by one level (a device period) and the shortest take a
        /// size split makes.
        public var blockFrames: Int64
        public var bytesPerFrame: Int64
        /// `--split DURATION`, in frames.
        public var splitEvery: Int64?
        public var splitAligned: Bool
        /// With `splitAligned`: frames from the run's start to the first clock boundary.
        public var firstAlignedSplit: Int64?
        /// `--split-size`.
        public var maxBytes: Int64?
        /// No size split closer than this to the limit counts (the file's header may be most of it).
        public var sizeMargin: Int64 = 64 * 1024
        public var splitOnMarker: Bool
        public var splitOnRequest: Bool
        public var startsIdle: Bool
        public var armed: Bool
        public var vox: Bool
        public var preRollCapacity: Int64
        public var voxThreshold: Float?
        public var voxHold: Int64
        public var alarmThreshold: Float?
        public var alarmFrames: Int64
        /// How long after a take could not be made ready the next try comes.
        public var retryFrames: Int64
        /// Why the first take begins (``RunPlan/firstTakeBegins``).
        public var firstReason: TakeBoundary = .start

        /// - Parameters:
        ///   - plan: the run's plan: its splits, VOX, trigger, pre-roll and silence alarm.
        ///   - sampleRate: the audio's frames per second, to turn the plan's seconds into frames.
        ///   - bytesPerFrame: the size of one frame of the audio, for size splits.
        ///   - blockFrames: the longest block decided by one level (a device period), and the
        ///     shortest take a size split makes.
        ///   - firstAlignedSplit: frames from the run's start to the first boundary of the
        ///     clock (``SplitRule/framesToClockBoundary(from:every:rate:timeZone:)``) when the plan's
        ///     splits are aligned to it; the caller reads the clock, this type never does.
        public init(plan: RunPlan, sampleRate: Int, bytesPerFrame: Int, blockFrames: Int, firstAlignedSplit: Int64? = nil) {
            let rate = Double(sampleRate)
            self.blockFrames = Int64(max(1, blockFrames))
            self.bytesPerFrame = Int64(bytesPerFrame)
            splitEvery = plan.split.everySeconds.map { max(1, Int64(($0 * rate).rounded())) }
            splitAligned = plan.split.alignedToClock
            self.firstAlignedSplit = firstAlignedSplit
            maxBytes = plan.split.maxBytes
            splitOnMarker = plan.splitOnMarker
            splitOnRequest = plan.splitOnRequest
            startsIdle = plan.startsIdle
            armed = plan.armed
            vox = plan.vox != nil
            preRollCapacity = plan.startsIdle ? max(0, Int64((min(plan.preRollSeconds, RunPlan.longestPreRoll) * rate).rounded())) : 0
            voxThreshold = plan.vox.map { Float(pow(10, $0.thresholdDB / 20)) }
            voxHold = plan.vox.map { Int64(($0.holdSeconds * rate).rounded()) } ?? 0
            alarmThreshold = plan.silenceAlarm.map { Float(pow(10, $0.thresholdDB / 20)) }
            alarmFrames = plan.silenceAlarm.map { max(1, Int64(($0.seconds * rate).rounded())) } ?? 0
            retryFrames = Int64(sampleRate) * 10
            firstReason = plan.firstTakeBegins
        }

        var splitsByRule: Bool { splitEvery != nil || maxBytes != nil }
        var watchesLevels: Bool { voxThreshold != nil || alarmThreshold != nil }
    }

    /// The take being recorded.
    public struct Take: Sendable, Hashable {
        /// The run frame it begins at (its pre-roll included).
        public var offset: Int64
        public var reason: TakeBoundary
        /// The file's size when last looked at, and the take's frames then (size splits).
        var bytesSeen: Int64
        var framesSeen: Int64 = 0
        /// Markers the take keeps so far (at most ``TakeMarker/maxCount``).
        public internal(set) var markers = 0
    }

    /// A marker or a split asked for at a run frame.
    struct Request: Sendable, Hashable {
        var marker: TakeMarker
        var splits: Bool
    }

    public let rules: Rules
    /// Frames of the run so far: every take's, the held audio and the gaps.
    public private(set) var position: Int64 = 0
    /// The take being recorded; `nil` while the run waits.
    public private(set) var take: Take?
    /// The run frame of the next time split, when one is due.
    public private(set) var nextTimeSplit: Int64?
    /// Frames held as pre-roll (never more than ``Rules/preRollCapacity``).
    public private(set) var held: Int64 = 0
    /// Markers set so far (splits not counted; markers later dropped taken off).
    public private(set) var markersSet = 0
    /// Markers that were not kept because their take had ``TakeMarker/maxCount`` already.
    public private(set) var markersNotKept = 0
    /// Whether the trigger has begun a take.
    public private(set) var triggered = false
    /// The device frame the trigger came at, once it came.
    public var triggerFrame: Int64?
    private var lastLoud: Int64 = 0
    private var quietSince: Int64?
    private var alarmOpen = false
    /// The silence alarm went off and the input is still below its level.
    var silenceAlarmOpen: Bool { alarmOpen }
    private var resumePending = false
    /// No take begins before this frame: the last one could not be made ready.
    private var retryAt: Int64 = 0
    /// The last take ended at its size limit because the next could not be made ready: the run
    /// waits, and begins a take (``TakeBoundary/splitSize``) as soon as one can be.
    public private(set) var waitingForRoom = false
    /// Requests not reached yet, in frame order from ``dueStart`` (those before it are done).
    private var due: [Request] = []
    private var dueStart = 0
    /// Markers set while no take was open (run frames).
    private var waiting: [TakeMarker] = []
    /// What follows an answered begin or split, in order.
    private var after: [Action] = []
    /// The begin or split waiting for ``takeBegan(_:bytes:)``, with the markers that ride on it.
    private var asked: (action: Action, marker: TakeMarker?)?

    /// - Parameters:
    ///   - rules: the rules of the run, in frames.
    ///   - startsWithTake: the run's first take is open from its first frame (a run that does
    ///     not wait), made ready by the caller; its file is `bytes` long already.
    ///   - bytes: the first take's file size now (its header), for size splits.
    public init(rules: Rules, startsWithTake: Bool, bytes: Int64 = 0) {
        self.rules = rules
        if startsWithTake { take = Take(offset: 0, reason: rules.firstReason, bytesSeen: bytes) }
        if let every = rules.splitEvery {
            if rules.splitAligned {
                nextTimeSplit = rules.firstAlignedSplit ?? every
            } else if startsWithTake {
                nextTimeSplit = every  // counted from the first take's start
            }
        }
    }

    // MARK: events

    /// A marker (`splits` false) or a split (true) asked for at run frame `marker.frame`; it is
    /// acted on when the run reaches that frame.
    public mutating func request(_ marker: TakeMarker, splits: Bool) {
        let request = Request(marker: marker, splits: splits)
        // Requests come in frame order but for a race between the threads that set them:
        // appended at once, or placed after the last one at or before their frame.
        guard let last = due.last, last.marker.frame > marker.frame else {
            due.append(request)
            return
        }
        let index = due[dueStart...].lastIndex { $0.marker.frame <= marker.frame }.map { $0 + 1 } ?? dueStart
        due.insert(request, at: index)
    }

    /// The file of the current take is `bytes` long now (a checkpoint looked).
    public mutating func observed(bytes: Int64) {
        guard take != nil else { return }
        take!.bytesSeen = bytes
        take!.framesSeen = position - take!.offset
    }

    /// The device was lost: the take, if one is open, ends here.
    public mutating func deviceLost() -> Action? {
        guard take != nil else { return nil }
        take = nil
        return .end(.deviceLost)
    }

    /// The device came back: a run that records on its own begins a take with the next audio;
    /// one that waits for sound waits again.
    public mutating func deviceResumed() {
        resumePending = !rules.startsIdle || (rules.armed && triggered)
    }

    /// The answer to ``Action/begin(_:offset:preRoll:)`` or ``Action/split(_:)``: whether a take
    /// could be made ready and has begun.
    /// - Parameters:
    ///   - began: whether the take was made ready and has begun.
    ///   - bytes: the new take's file size now (its header), for size splits.
    public mutating func takeBegan(_ began: Bool, bytes: Int64 = 0) {
        guard let (action, marker) = asked else { return }
        asked = nil
        switch action {
        case .begin(let reason, let offset, _):
            guard began else {
                retryAt = position + rules.retryFrames
                return
            }
            if reason == .trigger { triggered = true }
            resumePending = false
            waitingForRoom = false
            open(at: offset, reason, bytes: bytes)
            held = 0
            // Markers set while waiting, in the audio the take now begins with.
            let kept = waiting.filter { $0.frame >= offset }
            for marker in kept {
                if let mark = accept(TakeMarker(frame: marker.frame - offset, label: marker.label, date: marker.date)) { after.append(mark) }
            }
            if kept.count < waiting.count {
                markersSet -= waiting.count - kept.count
                after.append(.dropMarkers(waiting.count - kept.count))
            }
            waiting.removeAll()
            lastLoud = position
        case .split(let reason):
            guard began else {
                retryAt = position + rules.retryFrames
                if reason == .splitSize {
                    // No file passes --split-size: the take ends here, and the run waits for room.
                    take = nil
                    waitingForRoom = true
                    after.append(.end(.splitSize))
                    return
                }
                if let marker, let take, let mark = accept(TakeMarker(frame: max(0, position - take.offset), label: marker.label, date: marker.date)) {
                    after.append(mark)
                }
                return
            }
            open(at: position, reason, bytes: bytes)
            if let marker, let mark = accept(TakeMarker(frame: 0, label: marker.label, date: marker.date)) { after.append(mark) }
        default:
            break
        }
    }

    /// Markers the run did not reach (asked for at frames after its end), for the take open at
    /// its end, at that take's last frame; splits are dropped.
    public mutating func finish() -> [TakeMarker] {
        defer {
            due.removeAll()
            dueStart = 0
        }
        guard let take else { return [] }
        var kept: [TakeMarker] = []
        for request in due[dueStart...] where !request.splits {
            markersSet += 1
            if case .mark(let marker)? = accept(TakeMarker(frame: position - take.offset, label: request.marker.label, date: request.marker.date)) {
                kept.append(marker)
            }
        }
        return kept
    }

    // MARK: the audio

    /// The next thing to do with a block of which `available` frames are left.
    /// - Parameters:
    ///   - available: the frames of the block not yet written or held.
    ///   - gap: the block is silence standing in for audio that was lost (an overrun): it
    ///     goes where audio would, but no level decides on it and it raises no alarm.
    ///   - level: the peak level (0...1, the loudest channel) of the block's next frames, this
    ///     many; asked at most once per call, only when a rule decides by levels.
    /// - Returns: `nil` when `available` is 0 and nothing is left to do.
    public mutating func next(available: Int64, gap: Bool = false, level: (Int64) -> Float) -> Action? {
        precondition(asked == nil, "RunSegmenter: takeBegan(_:) must answer a begin or split first")
        if !after.isEmpty { return after.removeFirst() }
        guard available > 0 else { return nil }
        var n = available
        if rules.watchesLevels { n = min(n, rules.blockFrames) }
        // Markers: each lands in the take holding its frame (or, splitting on markers, begins a
        // take there); the block is cut at the next one.
        while dueStart < due.count {
            let request = due[dueStart]
            if request.marker.frame > position {
                n = min(n, request.marker.frame - position)
                break
            }
            dueStart += 1
            if let action = reach(request) {
                compactDue()
                return action
            }
        }
        compactDue()
        let loudness = rules.watchesLevels && !gap ? level(n) : 0
        if take == nil { return waitingNext(&n, loudness) }
        if let threshold = rules.voxThreshold {
            if loudness >= threshold {
                lastLoud = position + n
            } else if position - lastLoud >= rules.voxHold {
                // Quiet for the hold time: the take ends here; the run waits again.
                take = nil
                return .end(.vox)
            }
        }
        if let (frame, reason) = boundary() {
            if frame <= position, let take, position > take.offset {
                asked = (.split(reason), nil)
                return .split(reason)
            } else if frame > position {
                n = min(n, frame - position)
            }
        }
        if !gap { alarm(n, loudness) }
        position += n
        return .write(n)
    }

    /// Whether the rules hold the run in a take: the progress shows a VOX take going quiet.
    public var voxHolding: Bool { take != nil && rules.vox && position - lastLoud >= rules.blockFrames }

    /// The marker or split `request` at the current position.
    private mutating func reach(_ request: Request) -> Action? {
        let marker = request.marker
        if !request.splits { markersSet += 1 }
        guard let take else {
            // Waiting: a marker is kept if the take that begins next starts with it (pre-roll);
            // a split has nothing to split.
            if !request.splits { waiting.append(marker) }
            return nil
        }
        let splits = request.splits ? rules.splitOnRequest : rules.splitOnMarker
        if splits, position > take.offset, position >= retryAt {
            let reason: TakeBoundary = request.splits ? .requested : .markerSplit
            asked = (.split(reason), request.splits ? nil : marker)
            return .split(reason)
        }
        if request.splits { return nil }
        return accept(TakeMarker(frame: max(0, position - take.offset), label: marker.label, date: marker.date))
    }

    /// `marker` (at a frame of the current take, counted in ``markersSet``) as the take keeps
    /// it; `nil` when the take has ``TakeMarker/maxCount`` markers already (counted in
    /// ``markersNotKept`` instead) or no take is open.
    private mutating func accept(_ marker: TakeMarker) -> Action? {
        guard take != nil else { return nil }
        guard take!.markers < TakeMarker.maxCount else {
            markersSet -= 1
            markersNotKept += 1
            return nil
        }
        take!.markers += 1
        return .mark(marker)
    }

    /// Forgets the requests already acted on, once they are most of the list.
    private mutating func compactDue() {
        if dueStart == due.count {
            due.removeAll(keepingCapacity: true)
            dueStart = 0
        } else if dueStart >= 1024, dueStart * 2 >= due.count {
            due.removeFirst(dueStart)
            dueStart = 0
        }
    }

    /// While the run waits: VOX, the trigger or the device's return begins a take with the
    /// pre-roll before it; else the block is held.
    private mutating func waitingNext(_ n: inout Int64, _ loudness: Float) -> Action {
        var reason: TakeBoundary?
        if waitingForRoom { reason = .splitSize }
        if resumePending { reason = .deviceResumed }
        if let threshold = rules.voxThreshold, loudness >= threshold { reason = .vox }
        if rules.armed, !triggered, let at = triggerFrame {
            // The take begins at the frame the device was at when the trigger came.
            if at > position {
                n = min(n, at - position)
            } else {
                reason = .trigger
            }
        }
        if let reason, position >= retryAt {
            let action = Action.begin(reason, offset: position - held, preRoll: held)
            asked = (action, nil)
            return action
        }
        held = min(rules.preRollCapacity, held + n)
        position += n
        return .hold(n)
    }

    /// The current take's next split as a run frame, and why; `nil` when none is due. A time
    /// split waits while no take can be made ready; the size limit never does.
    private func boundary() -> (Int64, TakeBoundary)? {
        guard rules.splitsByRule, let take else { return nil }
        var best: (Int64, TakeBoundary)?
        if position >= retryAt, let t = nextTimeSplit { best = (t, .splitTime) }
        if let maxBytes = rules.maxBytes {
            let takeFrames = position - take.offset
            // The file's size when last looked at, plus the rest as raw PCM: never less than the
            // file will be (an encoder only compresses).
            let estimate = take.bytesSeen + (takeFrames - take.framesSeen) * rules.bytesPerFrame + rules.sizeMargin
            let room = max(0, (maxBytes - estimate) / rules.bytesPerFrame)
            // A take holds at least one block, whatever the header costs.
            let frame = take.offset + max(takeFrames + room, rules.blockFrames)
            if best == nil || frame < best!.0 { best = (frame, .splitSize) }
        }
        return best
    }

    /// The silence alarm over the next `n` frames at `loudness`.
    private mutating func alarm(_ n: Int64, _ loudness: Float) -> Void {
        guard let threshold = rules.alarmThreshold else { return }
        guard loudness < threshold else {
            quietSince = nil
            alarmOpen = false
            return
        }
        let since = quietSince ?? position
        quietSince = since
        guard position + n - since >= rules.alarmFrames else { return }
        if alarmOpen {
            after.append(.silenceGoesOn(frames: position + n - since))
        } else {
            alarmOpen = true
            after.append(.silenceAlarm(since: since, frames: position + n - since))
        }
    }

    /// A take begins at `offset` for `reason`: the next time split is counted from it.
    private mutating func open(at offset: Int64, _ reason: TakeBoundary, bytes: Int64) {
        take = Take(offset: offset, reason: reason, bytesSeen: bytes)
        guard let every = rules.splitEvery else { return }
        if !rules.splitAligned, reason != .splitTime && reason != .splitSize {
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
