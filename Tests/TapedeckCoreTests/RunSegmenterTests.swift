import Foundation
import TapedeckCore
import Testing

/// Property tests of ``RunSegmenter``: random runs (rules, blocks of loud and quiet audio, gaps,
/// markers, splits, triggers, device losses and returns, takes that cannot be made ready) are
/// played through it by a driver that carries out its actions on frame numbers, and every run
/// must keep the segmenter's promises. `TAPEDECK_SEGMENTER_RUNS` sets how many runs (default
/// 10 000); `TAPEDECK_SEGMENTER_SEED=N` replays the one run a failure names.
@Suite("Run segmenter")
struct RunSegmenterTests {
    @Test("random runs: no frame lost or repeated, boundaries where their rules say, pre-roll within its limit, VOX takes begin by the first loud block")
    func randomRuns() {
        let environment = ProcessInfo.processInfo.environment
        let seeds: [UInt64]
        if let one = environment["TAPEDECK_SEGMENTER_SEED"].flatMap(UInt64.init) {
            seeds = [one]
        } else {
            let runs = environment["TAPEDECK_SEGMENTER_RUNS"].flatMap(Int.init) ?? 10_000
            seeds = (0..<UInt64(runs)).map { 0x7A9E_DEC0_0000 &+ $0 }
        }
        var failed = 0
        for seed in seeds {
            let run = SimulatedRun(seed: seed)
            let problems = run.play()
            if !problems.isEmpty {
                failed += 1
                if failed <= 5 {
                    Issue.record("Seed \(seed): \(problems.prefix(5).joined(separator: "; ")). Rules: \(run.rules). Replay it: TAPEDECK_SEGMENTER_SEED=\(seed) swift test --skip-build --filter RunSegmenterTests")
                }
            }
        }
        #expect(failed == 0, "\(failed) of \(seeds.count) random runs broke a rule")
    }

    @Test("a run that never waits splits every N frames exactly, and its takes join to every frame")
    func timeSplits() {
        var plan = RunPlan()
        plan.split.everySeconds = 1
        let rules = RunSegmenter.Rules(plan: plan, sampleRate: 1000, bytesPerFrame: 4, blockFrames: 100)
        var segmenter = RunSegmenter(rules: rules, startsWithTake: true)
        var lengths: [Int64] = [0]
        for _ in 0..<35 {
            var left: Int64 = 90
            while let action = segmenter.next(available: left, level: { _ in 0 }) {
                switch action {
                case .write(let n): lengths[lengths.count - 1] += n; left -= n
                case .split(let reason):
                    #expect(reason == .splitTime)
                    segmenter.takeBegan(true)
                    lengths.append(0)
                default: Issue.record("unexpected \(action)")
                }
            }
        }
        #expect(lengths == [1000, 1000, 1000, 150])
    }

    @Test("--split-size holds on a full disk: a take whose next cannot be made ready ends at its limit, the run waits, and goes on when a take can begin")
    func sizeLimitWithoutRoom() {
        var plan = RunPlan()
        plan.split.maxBytes = 64 * 1024 + 4 * 1000  // 1000 frames of 4 bytes after the margin
        let rules = RunSegmenter.Rules(plan: plan, sampleRate: 1000, bytesPerFrame: 4, blockFrames: 100)
        var segmenter = RunSegmenter(rules: rules, startsWithTake: true)
        var lengths: [Int64] = [0]
        var open = true, room = false
        var delivered: Int64 = 0
        var ends: [Int64] = [], begins: [Int64] = []
        for _ in 0..<300 {  // 27 000 frames in blocks of 90
            var left: Int64 = 90
            while let action = segmenter.next(available: left, level: { _ in 0 }) {
                switch action {
                case .write(let n):
                    #expect(open, "audio written while no take is open")
                    lengths[lengths.count - 1] += n
                    left -= n
                    delivered += n
                case .hold(let n):
                    #expect(!open)
                    left -= n
                    delivered += n
                case .split(let reason):
                    #expect(reason == .splitSize)
                    // No room for a take until the run has waited once.
                    segmenter.takeBegan(room)
                    if room { lengths.append(0) }
                case .end(let reason):
                    #expect(reason == .splitSize)
                    ends.append(delivered)
                    open = false
                case .begin(let reason, let offset, let preRoll):
                    #expect(reason == .splitSize && preRoll == 0 && offset == delivered)
                    begins.append(offset)
                    room = true
                    segmenter.takeBegan(true)
                    open = true
                    lengths.append(0)
                default:
                    Issue.record("unexpected \(action)")
                }
            }
        }
        #expect(lengths.allSatisfy { $0 <= 1000 }, "no take passes the size limit: \(lengths)")
        #expect(lengths.first == 1000 && ends == [1000], "the first take ends at its limit: \(lengths) \(ends)")
        // Tried again 10 s of audio later (at the next block), then split at the limit as usual.
        #expect(begins.count == 1 && begins[0] >= 11_000 && begins[0] < 11_090, "\(begins)")
        #expect(lengths.dropFirst().dropLast().allSatisfy { $0 == 1000 } && lengths.reduce(0, +) == 27_000 - (begins.first ?? 0) + 1000, "\(lengths)")
        #expect(!segmenter.waitingForRoom)
    }

    @Test("VOX: a take begins with the loud block and its pre-roll, and ends after the hold")
    func vox() {
        var plan = RunPlan(preRollSeconds: 0.5, vox: VoxRule(thresholdDB: -20, holdSeconds: 0.3))
        plan.split = SplitRule()
        let rules = RunSegmenter.Rules(plan: plan, sampleRate: 1000, bytesPerFrame: 2, blockFrames: 100)
        var segmenter = RunSegmenter(rules: rules, startsWithTake: false)
        var log: [RunSegmenter.Action] = []
        for loud in [false, false, false, false, false, false, false, true, false, false, false, false, false] {
            var left: Int64 = 100
            while let action = segmenter.next(available: left, level: { _ in loud ? 0.5 : 0.01 }) {
                log.append(action)
                switch action {
                case .write(let n), .hold(let n): left -= n
                case .begin: segmenter.takeBegan(true)
                default: break
                }
            }
        }
        #expect(log.contains(.begin(.vox, offset: 200, preRoll: 500)))
        #expect(log.filter { if case .write = $0 { return true } else { return false } }.count == 4)  // the loud block and the 300 quiet frames of the hold
        #expect(log.contains(.end(.vox)))
    }

    /// Plays `frames` through `segmenter` in blocks, answering every begin and split, and
    /// returns the markers each take got (a split opens the next take).
    static func markersPerTake(_ segmenter: inout RunSegmenter, frames: Int64, block: Int64 = 1000) -> [[TakeMarker]] {
        var perTake: [[TakeMarker]] = [[]]
        var done: Int64 = 0
        while done < frames {
            var left = min(block, frames - done)
            done += left
            while let action = segmenter.next(available: left, level: { _ in 0 }) {
                switch action {
                case .write(let n): left -= n
                case .split:
                    segmenter.takeBegan(true)
                    perTake.append([])
                case .mark(let marker): perTake[perTake.count - 1].append(marker)
                default: Issue.record("unexpected \(action)")
                }
            }
        }
        return perTake
    }

    @Test("a take keeps its first 999 markers; later ones are counted as not kept, and the next take keeps its own")
    func markerLimit() {
        var plan = RunPlan()
        plan.split.everySeconds = 10
        let rules = RunSegmenter.Rules(plan: plan, sampleRate: 1000, bytesPerFrame: 4, blockFrames: 100)
        var segmenter = RunSegmenter(rules: rules, startsWithTake: true)
        let date = Date(timeIntervalSince1970: 0)
        // 1,200 markers in the first take (a flood: 200 of them at one frame), 5 in the second.
        for i in 0..<1000 { segmenter.request(TakeMarker(frame: Int64(i), label: "a\(i)", date: date), splits: false) }
        for i in 1000..<1200 { segmenter.request(TakeMarker(frame: 5000, label: "a\(i)", date: date), splits: false) }
        for i in 0..<5 { segmenter.request(TakeMarker(frame: 12_000 + Int64(i), label: "b\(i)", date: date), splits: false) }
        let perTake = Self.markersPerTake(&segmenter, frames: 15_000)
        #expect(perTake.count == 2)
        #expect(perTake.first?.count == TakeMarker.maxCount)
        #expect(perTake.first?.map(\.label) == (0..<999).map { "a\($0)" }, "the first 999, in order")
        #expect(perTake.last?.map(\.label) == (0..<5).map { "b\($0)" })
        #expect(perTake.last?.map(\.frame) == [2000, 2001, 2002, 2003, 2004])
        #expect(segmenter.markersNotKept == 201)
        #expect(segmenter.markersSet == 999 + 5, "the count shown counts the markers kept")
        // Markers past the run's end land at its last take's end, within the same limit.
        for i in 0..<1100 { segmenter.request(TakeMarker(frame: 99_000, label: "c\(i)", date: date), splits: false) }
        let late = segmenter.finish()
        #expect(late.count == TakeMarker.maxCount - 5)
        #expect(late.allSatisfy { $0.frame == 5000 })
        #expect(segmenter.markersNotKept == 201 + 1100 - (TakeMarker.maxCount - 5))
    }

    @Test("markers that begin takes (--split-on-marker) count against the take they begin: it keeps 999 of them")
    func markerLimitOnSplitsAndPreRoll() {
        var plan = RunPlan()
        plan.splitOnMarker = true
        let rules = RunSegmenter.Rules(plan: plan, sampleRate: 1000, bytesPerFrame: 4, blockFrames: 100)
        var segmenter = RunSegmenter(rules: rules, startsWithTake: true)
        let date = Date(timeIntervalSince1970: 0)
        // 1,500 markers at frame 500: the first splits there, and the new take keeps 999 of them.
        for i in 0..<1500 { segmenter.request(TakeMarker(frame: 500, label: "s\(i)", date: date), splits: false) }
        let perTake = Self.markersPerTake(&segmenter, frames: 1000)
        #expect(perTake.map(\.count) == [0, TakeMarker.maxCount])
        #expect(perTake.last?.first?.label == "s0")
        #expect(perTake.last?.allSatisfy { $0.frame == 0 } == true)
        #expect(segmenter.markersNotKept == 1500 - TakeMarker.maxCount)
    }

    @Test("a flood of 300,000 markers, all waiting at once (a writer held up), is taken in time proportional to it", .timeLimit(.minutes(1)))
    func markerFlood() {
        let rules = RunSegmenter.Rules(plan: RunPlan(), sampleRate: 48_000, bytesPerFrame: 4, blockFrames: 1024)
        var segmenter = RunSegmenter(rules: rules, startsWithTake: true)
        let date = Date(timeIntervalSince1970: 0)
        // Four a frame, in frame order as the device's timeline gives them.
        for i in 0..<300_000 { segmenter.request(TakeMarker(frame: Int64(i / 4), date: date), splits: false) }
        var kept = 0
        for _ in 0..<75 {
            var left: Int64 = 1000
            while let action = segmenter.next(available: left, level: { _ in 0 }) {
                switch action {
                case .write(let n): left -= n
                case .mark: kept += 1
                default: Issue.record("unexpected \(action)")
                }
            }
        }
        #expect(kept == TakeMarker.maxCount)
        #expect(segmenter.markersNotKept == 300_000 - TakeMarker.maxCount)
        #expect(segmenter.finish().isEmpty)
    }
}

/// A run of random rules and events, and a driver that carries out the segmenter's actions on
/// frame numbers and checks them.
final class SimulatedRun {
    struct Generator {
        var state: UInt64
        mutating func next() -> UInt64 {  // SplitMix64
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        mutating func int(_ range: ClosedRange<Int64>) -> Int64 { range.lowerBound + Int64(next() % UInt64(range.upperBound - range.lowerBound + 1)) }
        mutating func chance(_ p: Double) -> Bool { Double(next() % 1_000_000) / 1_000_000 < p }
    }

    struct Take {
        var offset: Int64
        var end: Int64
        var began: TakeBoundary
        var preRoll: Int64 = 0
        var ended: TakeBoundary?
        var markers: [TakeMarker] = []
        /// Ended at its size limit with no room for the next: the run waited after it.
        var waitsAfter = false
    }

    var random: Generator
    let plan: RunPlan
    let rules: RunSegmenter.Rules
    let failBegins: Double
    var segmenter: RunSegmenter
    /// Frames handed to the segmenter so far.
    var delivered: Int64 = 0
    /// Held frames not yet in a take: the run frames [heldFrom, delivered).
    var heldFrom: Int64 = 0
    var takes: [Take] = []
    var open: Bool
    var problems: [String] = []
    /// Markers asked for: run frame and label; and how many were reported dropped.
    var markers: [(frame: Int64, label: String)] = []
    var dropped = 0
    var lostAt: Int64?

    init(seed: UInt64) {
        var random = Generator(state: seed)
        var plan = RunPlan()
        let rate = 1000
        if random.chance(0.5) { plan.split.everySeconds = Double(random.int(3...30)) / 10 }
        plan.split.alignedToClock = plan.split.everySeconds != nil && random.chance(0.3)
        let bytesPerFrame = Int(random.int(1...4)) * 2
        let blockFrames = Int(random.int(16...200))
        if random.chance(0.3) { plan.split.maxBytes = 64 * 1024 + Int64(bytesPerFrame) * random.int(Int64(blockFrames)...4000) }
        switch random.int(0...3) {
        case 0: plan.vox = VoxRule(thresholdDB: -20, holdSeconds: Double(random.int(0...15)) / 10)
        case 1: plan.armed = true
        default: break
        }
        if plan.startsIdle { plan.preRollSeconds = Double(random.int(0...40)) / 10 }
        if random.chance(0.3) { plan.silenceAlarm = SilenceAlarm(seconds: Double(random.int(1...20)) / 10, thresholdDB: -20) }
        plan.splitOnMarker = random.chance(0.3)
        plan.splitOnRequest = random.chance(0.5)
        plan.resume = random.chance(0.5)
        var aligned: Int64?
        if plan.split.alignedToClock, let every = plan.split.everySeconds { aligned = random.int(1...Int64(every * Double(rate))) }
        let rules = RunSegmenter.Rules(plan: plan, sampleRate: rate, bytesPerFrame: bytesPerFrame, blockFrames: blockFrames, firstAlignedSplit: aligned)
        failBegins = random.chance(0.3) ? 0.2 : 0
        self.plan = plan
        self.rules = rules
        self.random = random
        open = !plan.startsIdle
        segmenter = RunSegmenter(rules: rules, startsWithTake: !plan.startsIdle)
        if open { takes.append(Take(offset: 0, end: 0, began: .start)) }
    }

    func check(_ ok: Bool, _ message: @autoclosure () -> String) {
        if !ok { problems.append(message()) }
    }

    /// Plays the run's events and returns what broke.
    func play() -> [String] {
        let events = random.int(5...120)
        for _ in 0..<events {
            switch random.int(0...19) {
            case 0:
                let label = "m\(markers.count)"
                let frame = delivered + random.int(0...300)
                markers.append((frame, label))
                segmenter.request(TakeMarker(frame: frame, label: label, date: Date(timeIntervalSince1970: 0)), splits: false)
            case 1:
                segmenter.request(TakeMarker(frame: delivered + random.int(0...300), date: Date(timeIntervalSince1970: 0)), splits: true)
            case 2 where plan.armed && segmenter.triggerFrame == nil:
                segmenter.triggerFrame = delivered + random.int(0...500)
            case 3 where lostAt == nil:
                lostAt = delivered
                if let action = segmenter.deviceLost() {
                    check(action == .end(.deviceLost) && open, "a lost device gave \(action)")
                    close(.deviceLost)
                }
            case 4 where lostAt != nil:
                lostAt = nil
                segmenter.deviceResumed()
            default:
                deliver(random.int(1...700), loud: random.chance(0.4), gap: random.chance(0.05))
            }
            if !problems.isEmpty { return problems }
        }
        // Markers asked for past the run's end land at the end of the take open then.
        let late = segmenter.finish()
        check(open || late.isEmpty, "markers for a take when none was open at the end")
        if open {
            takes[takes.count - 1].markers += late
            takes[takes.count - 1].ended = .stopped
        }
        verify()
        return problems
    }

    /// Hands the segmenter a block and carries out its actions.
    func deliver(_ count: Int64, loud: Bool, gap: Bool) {
        let blockStart = delivered
        var left = count
        var guardSteps = 0
        while let action = segmenter.next(available: left, gap: gap, level: { _ in loud ? 0.5 : 0.01 }) {
            guardSteps += 1
            guard guardSteps < 10_000 else { check(false, "no progress in a block"); return }
            check(segmenter.held <= rules.preRollCapacity, "pre-roll \(segmenter.held) over its limit \(rules.preRollCapacity)")
            switch action {
            case .write(let n):
                check(n > 0 && n <= left, "write(\(n)) of \(left) left")
                check(open, "write with no take open")
                if open {
                    check(takes[takes.count - 1].end == delivered, "a take's frames are not contiguous")
                    takes[takes.count - 1].end += n
                }
                delivered += n
                left -= n
                heldFrom = delivered
            case .hold(let n):
                check(n > 0 && n <= left, "hold(\(n)) of \(left) left")
                check(!open, "hold while a take is open")
                // A VOX take never starts later than the first loud block.
                check(plan.vox == nil || !loud || gap || failBegins > 0, "a loud block was held while the VOX run waited")
                delivered += n
                left -= n
                heldFrom = max(heldFrom, delivered - rules.preRollCapacity)
            case .begin(let reason, let offset, let preRoll):
                check(!open, "begin while a take is open")
                check(offset + preRoll == delivered, "begin at \(offset) with \(preRoll) pre-roll, but \(delivered) frames were delivered")
                check(preRoll <= rules.preRollCapacity, "pre-roll \(preRoll) over its limit")
                check(offset >= heldFrom, "pre-roll reaches back to \(offset), before what was held (\(heldFrom))")
                if reason == .vox { check(loud && !gap, "a VOX take began on a quiet block") }
                if random.chance(failBegins) {
                    segmenter.takeBegan(false)
                } else {
                    segmenter.takeBegan(true)
                    open = true
                    takes.append(Take(offset: offset, end: delivered, began: reason, preRoll: preRoll))
                    heldFrom = delivered
                }
            case .split(let reason):
                check(open, "split with no take open")
                if random.chance(failBegins) {
                    segmenter.takeBegan(false)
                } else {
                    segmenter.takeBegan(true)
                    close(reason)
                    open = true
                    takes.append(Take(offset: delivered, end: delivered, began: reason))
                }
            case .end(let reason):
                check(open, "end with no take open")
                if reason == .splitSize {
                    check(failBegins > 0 && rules.maxBytes != nil, "a take ended at its size limit though the next could begin")
                    if open { takes[takes.count - 1].waitsAfter = true }
                }
                close(reason)
            case .mark(let marker):
                check(open, "a marker with no take open")
                if open { takes[takes.count - 1].markers.append(marker) }
            case .dropMarkers(let n):
                dropped += n
            case .silenceAlarm, .silenceGoesOn:
                check(plan.silenceAlarm != nil, "a silence alarm with none set")
            }
        }
        check(left == 0, "the segmenter stopped with \(left) frames of the block left")
        check(delivered == blockStart + count, "the block moved the run by \(delivered - blockStart), not \(count)")
        check(segmenter.position == delivered, "the segmenter is at \(segmenter.position), the driver at \(delivered)")
    }

    func close(_ reason: TakeBoundary) {
        guard open else { return }
        takes[takes.count - 1].ended = reason
        open = false
        heldFrom = delivered
    }

    /// The promises about the whole run.
    func verify() {
        // Takes in order, never overlapping; a run that never waits has every frame in a take.
        var end: Int64 = 0
        for (i, take) in takes.enumerated() {
            check(take.offset >= end, "take \(i + 1) begins at \(take.offset), inside the one before (ends \(end))")
            check(take.end >= take.offset, "take \(i + 1) ends before it begins")
            end = take.end
        }
        if !plan.startsIdle && !plan.resume {
            var covered: Int64 = 0
            var joined = true
            for take in takes {
                if take.offset != covered { joined = false }
                covered = take.end
            }
            let lostSomewhere = takes.contains { $0.ended == .deviceLost || $0.waitsAfter }
            if !lostSomewhere { check(joined && covered == delivered, "the takes hold \(covered) of \(delivered) frames, or leave a hole") }
        }
        if !plan.startsIdle {
            // Without waiting, a take's boundaries with its neighbour are the same frame.
            for (a, b) in zip(takes, takes.dropFirst()) where a.ended != .deviceLost && !a.waitsAfter {
                check(a.end == b.offset, "a take ends at \(a.end) and the next begins at \(b.offset)")
            }
        }
        let every = rules.splitEvery
        // Time splits of takes that follow each other count from the first one's start (its
        // pre-roll included), or from the clock; a pre-roll that reaches past the next boundary
        // splits at the first frame after it.
        var chainStart: Int64 = 0
        var chainPreRoll: Int64 = 0
        for (i, take) in takes.enumerated() {
            if take.began != .splitTime && take.began != .splitSize { (chainStart, chainPreRoll) = (take.offset, take.preRoll) }
            let atOnce = take.preRoll > 0 && take.end == take.offset + take.preRoll
            let length = take.end - take.offset
            if let maxBytes = rules.maxBytes {
                // --split-size is a bound in every state, takes that could not be made ready
                // included: only a pre-roll bigger than the limit passes it (split right after it).
                let fit = max(rules.blockFrames, (maxBytes - rules.sizeMargin) / rules.bytesPerFrame)
                check(length <= max(fit, take.preRoll), "take \(i + 1) holds \(length) frames; at most \(fit) fit")
                if take.ended == .splitSize && !atOnce && failBegins == 0 {
                    check(length == fit, "take \(i + 1) was split by size at \(length) frames, not \(fit)")
                }
            }
            if take.ended == .splitTime, let every {
                if failBegins > 0 || atOnce {
                    // A take that could not be made ready splits when the next one can.
                } else if rules.splitAligned {
                    let first = rules.firstAlignedSplit ?? every
                    check(take.end >= first && (take.end - first) % every == 0, "an aligned split at \(take.end), not on the clock's boundary (\(first) + k·\(every))")
                } else {
                    check((take.end - chainStart) % every == 0, "take \(i + 1) was split by time at run frame \(take.end), not \(chainStart) + k·\(every)")
                    if rules.maxBytes == nil && chainPreRoll == 0 { check(length == every, "take \(i + 1) was split by time at \(length) frames, not \(every)") }
                }
            }
            if take.began == .markerSplit {
                check(take.markers.first?.frame == 0, "a take begun by a marker does not begin with it")
            }
            for marker in take.markers {
                check(marker.frame >= 0 && marker.frame <= length, "a marker at \(marker.frame) in a take of \(length) frames")
                if let asked = markers.first(where: { $0.label == marker.label }) {
                    check(asked.frame - take.offset == marker.frame || (marker.frame == length && asked.frame >= take.end),
                          "marker \(marker.label) asked for run frame \(asked.frame) sits at take frame \(marker.frame) of a take at \(take.offset)")
                }
            }
        }
        let labels = takes.flatMap { $0.markers.map(\.label) }
        check(Set(labels).count == labels.count, "a marker landed twice")
        // Every marker asked for lands in a take or is reported dropped (while the run waited),
        // unless the run ended while it waited with it.
        check(labels.count + dropped <= markers.count, "\(labels.count) markers landed and \(dropped) were dropped, of \(markers.count) asked for")
        if !plan.startsIdle && !plan.resume && lostAt == nil && !takes.contains(where: { $0.ended == .deviceLost || $0.waitsAfter }) {
            check(labels.count == markers.count, "\(labels.count) of \(markers.count) markers landed in a run that never waited")
        }
    }
}
