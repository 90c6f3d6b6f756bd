import Foundation
@testable import TapedeckCore
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The ring stream's shared ring (CRingStream through DeviceRing), without a device: capture
/// frames and holes come back where they happened, a full ring is a hole, playback counts
/// underruns only between start and finish, waits wake for frames, a close or another descriptor,
/// and a producer and a consumer on two threads lose and repeat nothing.
@Suite("Device ring")
struct DeviceRingTests {
    /// Frames whose one sample is their own frame number.
    static func frames(_ range: Range<Int>) -> [Float] { range.map(Float.init) }

    static func read(_ ring: DeviceRing, max: Int) -> (frames: [Float], lost: Int64) {
        var out = [Float](repeating: -1, count: max * ring.channels)
        let (n, lost) = out.withUnsafeMutableBufferPointer { ring.read(into: $0.baseAddress!, maxFrames: max) }
        return (Array(out.prefix(n * ring.channels)), lost)
    }

    @Test func captureKeepsFramesOnlyFromStartAndReadsThemBackInOrder() throws {
        let ring = try DeviceRing(.capture, channels: 1, frames: 64)
        #expect(Self.frames(0..<10).withUnsafeBufferPointer { ring.push($0.baseAddress!, frames: 10) } == 0)
        #expect(ring.available == 0)
        ring.start()
        #expect(Self.frames(0..<20).withUnsafeBufferPointer { ring.push($0.baseAddress!, frames: 20) } == 20)
        let r = Self.read(ring, max: 64)
        #expect(r.frames == Self.frames(0..<20) && r.lost == 0)
        #expect(ring.framesDone == 20)
    }

    @Test func aHoleComesBackJustBeforeTheFramesThatFollowIt() throws {
        let ring = try DeviceRing(.capture, channels: 2, frames: 64)
        ring.start()
        ring.lose(7)   // before any frame
        _ = Self.frames(0..<20).withUnsafeBufferPointer { ring.push($0.baseAddress!, frames: 10) }
        ring.lose(5)
        ring.lose(1)   // one hole of 6
        #expect(Self.read(ring, max: 64).lost == 7)
        #expect(Self.read(ring, max: 64).frames.isEmpty, "a hole with no frames after it is not reported yet")
        _ = Self.frames(20..<24).withUnsafeBufferPointer { ring.push($0.baseAddress!, frames: 2) }
        let r = Self.read(ring, max: 64)
        #expect(r.frames == Self.frames(20..<24) && r.lost == 6)
        #expect(ring.lostFrames == 13 && ring.framesDone == 25)
    }

    @Test func framesThatDoNotFitAreAHoleWhereTheyWere() throws {
        let ring = try DeviceRing(.capture, channels: 1, frames: 32)
        ring.start()
        #expect(Self.frames(0..<40).withUnsafeBufferPointer { ring.push($0.baseAddress!, frames: 40) } == 32)
        #expect(Self.read(ring, max: 100).frames == Self.frames(0..<32))
        _ = Self.frames(40..<44).withUnsafeBufferPointer { ring.push($0.baseAddress!, frames: 4) }
        let r = Self.read(ring, max: 100)
        #expect(r.frames == Self.frames(40..<44) && r.lost == 8)
        #expect(ring.lostFrames == 8 && ring.framesDone == 44)
    }

    @Test func moreHolesThanTheQueueHoldsStillCountEveryLostFrame() throws {
        let ring = try DeviceRing(.capture, channels: 1, frames: 1_024)
        ring.start()
        for i in 0..<100 {
            ring.lose(3)
            _ = [Float(i)].withUnsafeBufferPointer { ring.push($0.baseAddress!, frames: 1) }
        }
        var frames = 0
        var lost: Int64 = 0
        while true {
            let r = Self.read(ring, max: 1_024)
            if r.frames.isEmpty && r.lost == 0 { break }
            frames += r.frames.count
            lost += r.lost
        }
        #expect(frames == 100 && lost == 300)
    }

    @Test func playbackCountsUnderrunOnlyBetweenStartAndFinish() throws {
        let ring = try DeviceRing(.playback, channels: 1, frames: 16)
        var out = [Float](repeating: 0, count: 16)
        #expect(ring.available == 16)
        #expect(Self.frames(0..<10).withUnsafeBufferPointer { ring.write($0.baseAddress!, frames: 10) } == 10)
        #expect(out.withUnsafeMutableBufferPointer { ring.pull(into: $0.baseAddress!, frames: 4) } == 0, "nothing plays before start")
        ring.start()
        #expect(out.withUnsafeMutableBufferPointer { ring.pull(into: $0.baseAddress!, frames: 4) } == 4)
        #expect(Array(out.prefix(4)) == Self.frames(0..<4))
        #expect(out.withUnsafeMutableBufferPointer { ring.pull(into: $0.baseAddress!, frames: 10) } == 6)
        #expect(ring.underrunFrames == 4 && ring.framesDone == 10)
        ring.finish()
        #expect(out.withUnsafeMutableBufferPointer { ring.pull(into: $0.baseAddress!, frames: 10) } == 0)
        #expect(ring.underrunFrames == 4, "a ring running dry after finish is the end, not an underrun")
    }

    @Test func waitWakesForFramesACloseOrAnotherDescriptorAndTimesOutOtherwise() throws {
        let ring = try DeviceRing(.capture, channels: 1, frames: 64)
        ring.start()
        #expect(ring.wait(frames: 8, nanoseconds: 20_000_000) == .timeout)
        let pusher = Thread {
            usleep(20_000)
            _ = Self.frames(0..<8).withUnsafeBufferPointer { ring.push($0.baseAddress!, frames: 8) }
            ring.cycle()
        }
        pusher.start()
        #expect(ring.wait(frames: 8, nanoseconds: 5_000_000_000) == .ready)
        #expect(ring.available == 8)
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        defer { close(fds[0]); close(fds[1]) }
        #expect(write(fds[1], "x", 1) == 1)
        #expect(ring.wait(frames: 100, nanoseconds: 5_000_000_000, otherFD: fds[0]) == .otherFD)
        ring.close()
        #expect(ring.wait(frames: 100, nanoseconds: 5_000_000_000) == .ready)
        #expect(ring.isClosed)
    }

    @Test func theClockIsExtrapolatedToNow() throws {
        let ring = try DeviceRing(.capture, channels: 1, frames: 64)
        #expect(ring.clockNow(sampleRate: 48_000) == nil)
        ring.setClock(frames: 48_000)
        usleep(10_000)
        let now = try #require(ring.clockNow(sampleRate: 48_000))
        #expect(now >= 48_000 + 480 && now < 48_000 + 48_000, "\(now)")
    }

    /// A producer thread pushes a counter in random blocks and declares random stretches lost; a
    /// consumer thread reads in random sizes. Each frame read must be the one its position says,
    /// every hole where it was, and the two together every frame pushed or lost.
    @Test func aProducerAndAConsumerOnTwoThreadsLoseAndRepeatNothing() throws {
        let seed = ProcessInfo.processInfo.environment["TAPEDECK_RING_SEED"].flatMap(UInt64.init) ?? UInt64.random(in: 1...UInt64.max)
        let ring = try DeviceRing(.capture, channels: 2, frames: 509)
        ring.start()
        let total = 400_000
        let producer = Thread {
            var random = SimulatedRun.Generator(state: seed)
            var next = 0
            var block = [Float](repeating: 0, count: 2 * 300)
            while next < total {
                if random.next() % 10 == 0 {
                    // Never past the end: a gap there would leave a negative block below.
                    let gap = min(Int(random.int(1...50)), total - next)
                    ring.lose(gap)
                    next += gap
                }
                let n = min(total - next, Int(random.int(1...300)))
                for i in 0..<n { block[2 * i] = Float(next + i); block[2 * i + 1] = -Float(next + i) }
                // A full ring loses the rest where it was: the counter goes on as a device's would.
                _ = block.withUnsafeBufferPointer { ring.push($0.baseAddress!, frames: n) }
                next += n
                ring.cycle()
                if random.next() % 50 == 0 { usleep(UInt32(random.int(0...300))) }
            }
            // The last frame publishes any hole before it, so it must fit: wait for room first.
            while ring.capacity - ring.available < 1 { usleep(100) }
            _ = [Float(total), -Float(total)].withUnsafeBufferPointer { ring.push($0.baseAddress!, frames: 1) }
            ring.cycle()
        }
        producer.start()
        var random = SimulatedRun.Generator(state: seed ^ 0xFFFF)
        var position = 0
        var lostSeen: Int64 = 0
        var wrong: [String] = []
        var buffer = [Float](repeating: 0, count: 2 * 400)
        let deadline = ContinuousClock.now + .seconds(60)
        while position <= total && wrong.isEmpty && ContinuousClock.now < deadline {
            let want = Int(random.int(1...400))
            let (n, lost) = buffer.withUnsafeMutableBufferPointer { ring.read(into: $0.baseAddress!, maxFrames: want) }
            position += Int(lost)
            lostSeen += lost
            for i in 0..<n where buffer[2 * i] != Float(position + i) || buffer[2 * i + 1] != -Float(position + i) {
                wrong.append("frame at \(position + i) holds \(buffer[2 * i]), \(buffer[2 * i + 1])")
                break
            }
            position += n
            if n == 0 && lost == 0 { _ = ring.wait(frames: 1, nanoseconds: 100_000_000) }
        }
        #expect(wrong.isEmpty, "seed \(seed) (TAPEDECK_RING_SEED=\(seed) replays it): \(wrong)")
        #expect(position == total + 1, "seed \(seed): read up to \(position) of \(total + 1)")
        #expect(UInt64(lostSeen) == ring.lostFrames, "seed \(seed)")
    }
}
