import Foundation
import Synchronization
@testable import TapedeckCore
import Testing

/// ``ProgramCutter`` on frame numbers: random runs (blocks of any size, gaps, a programme
/// window anywhere around the run, padding, the clock anchor moved as after a device's return)
/// must give each programme take exactly the run's frames over its window: nothing lost,
/// doubled or shifted, begun at its first frame's time, ended once.
@Suite("Programme cutter")
struct ProgramCutterTests {
    static let rate = 1000
    static let format = AudioFormat(sampleRate: rate, channels: 1, sampleFormat: .s16)

    /// A writer that keeps what it is given.
    final class Kept: TakeWriter, @unchecked Sendable {
        var samples: [Int16] = []
        var began: Date?
        var checkpoints = 0
        var finished = false
        func write(_ buffer: UnsafeRawPointer, frames: Int) throws {
            samples.append(contentsOf: UnsafeBufferPointer(start: buffer.assumingMemoryBound(to: Int16.self), count: frames))
        }
        func checkpoint() throws { checkpoints += 1 }
        func finish() throws -> Int64 {
            finished = true
            return Int64(samples.count)
        }
        var verifiesOutput: Bool { false }
        var verification: String? { nil }
        func abandon() {}
        func began(at date: Date, preRollFrames: Int64) { began = date }
    }

    /// A sequence that makes kept writers, or refuses when told to.
    final class Sequence: TakeSequence, @unchecked Sendable {
        struct State {
            var made: [(window: ProgramWindow, writer: Kept, id: String)] = []
            var ended: [(EndedTake, ProgramWindow)] = []
            var discarded: [String] = []
        }
        let state = Mutex(State())
        let refuses: Bool
        init(refuses: Bool = false) { self.refuses = refuses }
        func prepareTake(index: Int, format: AudioFormat, start: Date) throws -> PreparedTake { throw TapedeckError(.internalError, "not here") }
        func takeBegan(_ take: PreparedTake, offset: Int64, reason: TakeBoundary) {}
        func takeEnded(_ take: EndedTake) {}
        func discard(_ take: PreparedTake) { state.withLock { $0.discarded.append(take.id) } }
        func prepareProgramTake(_ window: ProgramWindow, format: AudioFormat) throws -> PreparedTake {
            if refuses { throw TapedeckError(.diskFull, "No room.") }
            let writer = Kept(), id = UUID().uuidString
            state.withLock { $0.made.append((window, writer, id)) }
            return PreparedTake(index: 0, id: id, writer: writer, fileURL: nil)
        }
        func programTakeEnded(_ take: EndedTake, window: ProgramWindow) { state.withLock { $0.ended.append((take, window)) } }
    }

    static var utc: Calendar {
        var c = Calendar(identifier: .gregorian)
        c.timeZone = TimeZone(identifier: "UTC")!
        return c
    }

    /// The run's sample at frame `f`: never 0, so a gap's silence shows.
    static func sample(_ f: Int64) -> Int16 { Int16(f % 30_000 + 1) }

    @Test("random runs: each programme take is exactly the run's frames over its padded window")
    func randomRuns() throws {
        var rng = SystemRandomNumberGenerator()
        let day = Date(timeIntervalSince1970: 1_800_000_000 - 1_800_000_000.truncatingRemainder(dividingBy: 86_400))
        for _ in 0..<120 {
            // The run: 60 s from 08:00:00 (+ a random fraction); the programme somewhere from 07:59 to 08:01.
            let t0 = day.addingTimeInterval(8 * 3600 + Double(Int.random(in: 0..<1000, using: &rng)) / 1000)
            let runFrames = Int64(60 * Self.rate)
            let startSecond = 8 * 3600 + Int.random(in: -20...70, using: &rng)
            let length = Int.random(in: 1...30, using: &rng)
            let pad = Double(Int.random(in: 0...3, using: &rng))
            let rule = ProgramRule(name: "P", start: startSecond, end: startSecond + length, padSeconds: pad)
            // After a device's return the anchor moves: frames from here on are later on the clock.
            let shiftAt: Int64? = Bool.random(using: &rng) ? Int64.random(in: 1..<runFrames, using: &rng) : nil
            let shift = Double(Int.random(in: 0...5, using: &rng))
            let sequence = Sequence()
            let queue = DispatchQueue(label: "takes")
            let cutter = ProgramCutter(rules: [rule], sequence: sequence, format: Self.format, queue: queue,
                                       logger: .init(label: "test"), calendar: Self.utc)
            cutter.anchored((0, t0))
            var at: Int64 = 0
            var gaps: [Range<Int64>] = []
            while at < runFrames {
                let n = min(runFrames - at, Int64.random(in: 1...700, using: &rng))
                if let s = shiftAt, at <= s, s < at + n, at != s {
                    // Blocks end where the device was lost.
                    let m = s - at
                    feed(cutter, at, m, gap: false)
                    at += m
                    continue
                }
                if let s = shiftAt, at == s { cutter.anchored((s, t0.addingTimeInterval(Double(s) / Double(Self.rate) + shift))) }
                let gap = Int.random(in: 0..<10, using: &rng) == 0
                if gap { gaps.append(at..<(at + n)) }
                feed(cutter, at, n, gap: gap)
                at += n
                if Int.random(in: 0..<20, using: &rng) == 0 { cutter.checkpoint() }
            }
            cutter.finishAll(.stopped)
            queue.sync {}
            // Where the window is on the run's frames, by the anchor in force at each frame.
            func clock(_ f: Int64) -> Double {
                let base = t0.timeIntervalSince(day) + Double(f) / Double(Self.rate)
                return shiftAt.map { f >= $0 ? base + shift : base } ?? base
            }
            let from = Double(startSecond) - pad, to = Double(startSecond + length) + pad
            let inside = (0..<runFrames).filter { f in
                // A frame's time, to the rounding the cutter places windows with.
                let t = clock(f)
                return t >= from - 0.0005 && t < to - 0.0005
            }
            let state = sequence.state.withLock { $0 }
            guard let first = inside.first else {
                #expect(state.ended.isEmpty, "no frame of the run is in the window, so no take: \(rule)")
                continue
            }
            try #require(state.ended.count == 1, "one take, ended once: \(rule), shift \(shiftAt.map { "\(shift) s at \($0)" } ?? "none"), \(state.ended.count) ended")
            let (ended, _) = state.ended[0]
            let made = try #require(state.made.first { $0.id == ended.id })
            let expected = inside.map { f in gaps.contains { $0.contains(f) } ? Int16(0) : Self.sample(f) }
            #expect(ended.offset == first && ended.frames == Int64(inside.count), "\(rule): offset \(ended.offset) (\(first)), \(ended.frames) frames (\(inside.count))")
            let got = made.writer.samples
            let wrong = (0..<min(got.count, expected.count)).first { got[$0] != expected[$0] }
            #expect(wrong == nil && got.count == expected.count,
                    "\(rule): the take's samples are the run's over its window; first wrong at \(wrong.map(String.init) ?? "none"), \(got.count) of \(expected.count)")
            #expect(made.writer.finished && ended.writerFinished)
            #expect(abs((made.writer.began ?? .distantPast).timeIntervalSince(t0.addingTimeInterval(clock(first) - t0.timeIntervalSince(day)))) < 0.002)
            #expect(ended.overruns.reduce(0) { $0 + $1.frames } == Int64(expected.filter { $0 == 0 }.count))
        }
    }

    @Test("a take that cannot be made: said, and the run goes on; none is made again for that window")
    func refused() {
        let t0 = Date(timeIntervalSince1970: 1_800_000_000 - 1_800_000_000.truncatingRemainder(dividingBy: 86_400) + 8 * 3600)
        let sequence = Sequence(refuses: true)
        let queue = DispatchQueue(label: "takes")
        let cutter = ProgramCutter(rules: [ProgramRule(name: "P", start: 8 * 3600 + 2, end: 8 * 3600 + 4)], sequence: sequence, format: Self.format,
                                   queue: queue, logger: .init(label: "test"), calendar: Self.utc)
        cutter.anchored((0, t0))
        for block in 0..<10 { feed(cutter, Int64(block * 1000), 1000, gap: false) }
        cutter.finishAll(.stopped)
        queue.sync {}
        #expect(sequence.state.withLock { $0.ended.isEmpty && $0.made.isEmpty })
    }

    func feed(_ cutter: ProgramCutter, _ at: Int64, _ n: Int64, gap: Bool) {
        if gap {
            cutter.feed(nil, n, at: at, gap: "device")
            return
        }
        let samples = (at..<(at + n)).map(Self.sample)
        samples.withUnsafeBytes { cutter.feed($0.baseAddress!, n, at: at, gap: nil) }
    }
}
