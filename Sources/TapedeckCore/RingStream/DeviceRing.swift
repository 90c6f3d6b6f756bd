internal import CRingStream
import Dispatch

/// The ring between a callback backend's real-time callback and Tapedeck's device thread: one
/// single-producer single-consumer ring of interleaved float frames with a queue of holes
/// (`CRingStream`, in C so the callback runs no Swift). JACK's process callback and PipeWire's
/// real-time process callback copy through it; a backend's own callback thread (a generated
/// backend, a network source) may use the Swift calls of the callback side below.
///
/// - Capture: the callback pushes what the device delivered and declares as lost what it did not;
///   the device thread reads frames back with the frames lost just before them
///   (``read(into:maxFrames:)``), so a take's timeline stays true. A full ring is a hole too.
/// - Playback: the device thread writes; the callback pulls, and a ring that runs dry after
///   ``start()`` and before ``finish()`` counts as underrun.
///
/// Thread: every member says which side calls it; none allocates or locks. Only ``wait(frames:nanoseconds:otherFD:)`` blocks.
public final class DeviceRing: @unchecked Sendable {
    public enum Direction: Sendable { case capture, playback }
    /// What ended a ``wait(frames:nanoseconds:otherFD:)``.
    public enum Wake: Sendable { case ready, timeout, otherFD }

    /// The C ring (`tapedeck_ring *`), for a backend's C shim, whose callback calls
    /// `tapedeck_ring_push`/`_pull`/`_lose`/`_cycle`/`_set_clock` on it.
    public let handle: OpaquePointer
    public let direction: Direction
    public let channels: Int
    public let capacity: Int

    /// Allocates a ring of `frames` frames (zeroed and locked in memory). - Thread: the device
    /// thread. - Throws: `.deviceUnavailable` when memory or file descriptors are short.
    public init(_ direction: Direction, channels: Int, frames: Int) throws {
        guard let handle = tapedeck_ring_create(direction == .capture ? Int32(TAPEDECK_RING_CAPTURE) : Int32(TAPEDECK_RING_PLAYBACK),
                                                UInt32(clamping: channels), UInt32(clamping: frames)) else {
            throw TapedeckError(.deviceUnavailable, "Could not allocate a \(frames)-frame \(channels)-channel device buffer (out of memory, or no file descriptors left). Close other programs (or raise the open-files limit, ulimit -n) and retry.")
        }
        self.handle = handle
        self.direction = direction
        self.channels = channels
        self.capacity = frames
    }

    deinit { tapedeck_ring_destroy(handle) }

    // MARK: The device thread

    /// Capture: keep pushed frames from now on. Playback: count a ring running dry as underrun from now on.
    public func start() { tapedeck_ring_start(handle) }
    /// Playback: the last frames are written; a ring running dry is now the end.
    public func finish() { tapedeck_ring_finish(handle) }
    /// The device went away: wakes a waiting reader or writer. Any thread, the callback's included.
    public func close() { tapedeck_ring_close(handle) }

    public var isStarted: Bool { tapedeck_ring_is_started(handle) != 0 }
    public var isClosed: Bool { tapedeck_ring_is_closed(handle) != 0 }
    /// Frames ready to read (capture) or room to write (playback).
    public var available: Int { Int(tapedeck_ring_available(handle)) }
    /// Callback cycles since the ring was made: what stall detection watches.
    public var cycles: UInt64 { tapedeck_ring_cycles(handle) }
    public var lostFrames: UInt64 { tapedeck_ring_lost_frames(handle) }
    public var underrunFrames: UInt64 { tapedeck_ring_underrun_frames(handle) }
    /// Capture: frames pushed since start, holes included. Playback: frames pulled.
    public var framesDone: UInt64 { tapedeck_ring_frames_done(handle) }

    /// Capture: copies up to `maxFrames` frames into `destination`, stopping before a hole.
    /// - Returns: the frames copied and the frames lost just before them.
    public func read(into destination: UnsafeMutablePointer<Float>, maxFrames: Int) -> (frames: Int, lostBefore: Int64) {
        var lost: UInt64 = 0
        let frames = tapedeck_ring_read(handle, destination, UInt32(clamping: maxFrames), &lost)
        return (Int(frames), Int64(lost))
    }

    /// Playback: copies up to `frames` frames in. - Returns: the frames copied.
    public func write(_ source: UnsafePointer<Float>, frames: Int) -> Int {
        Int(tapedeck_ring_write(handle, source, UInt32(clamping: frames)))
    }

    /// Sleeps until `frames` are available, the ring is closed, `otherFD` (a device's own event
    /// loop) is readable, or `nanoseconds` pass. Blocks.
    public func wait(frames: Int, nanoseconds: UInt64, otherFD: Int32 = -1) -> Wake {
        switch tapedeck_ring_wait(handle, UInt32(clamping: frames), nanoseconds, otherFD) {
        case Int32(TAPEDECK_RING_READY): .ready
        case Int32(TAPEDECK_RING_OTHER_FD): .otherFD
        default: .timeout
        }
    }

    /// Sleeps until the callback has run `count` more cycles (each about `cycleNanos`), at most
    /// four cycles and 200 ms in all. Blocks. - Returns: false when the ring was closed first.
    public func waitCycles(_ count: UInt64, cycleNanos: UInt64) -> Bool {
        let target = cycles + count
        let deadline = DispatchTime.now().uptimeNanoseconds + 4 * cycleNanos + 200_000_000
        while cycles < target && DispatchTime.now().uptimeNanoseconds < deadline {
            if isClosed { return false }
            _ = tapedeck_ring_wait(handle, UInt32.max, max(1_000_000, cycleNanos / 2), -1)
        }
        return !isClosed
    }

    /// The device clock extrapolated to now: frames since the first cycle after start, at
    /// `sampleRate`; nil when the callback never set it.
    public func clockNow(sampleRate: Int) -> Int64? {
        let frames = tapedeck_ring_clock_now(handle, UInt32(clamping: sampleRate))
        return frames < 0 ? nil : frames
    }

    // MARK: The callback side (a Swift callback thread; C callbacks call the C functions)

    /// Capture: copies `frames` interleaved frames in (the rest lost when full). - Returns: frames kept.
    @discardableResult
    public func push(_ source: UnsafePointer<Float>, frames: Int) -> Int {
        Int(tapedeck_ring_push(handle, source, UInt32(clamping: frames)))
    }
    /// Capture: frames the device never delivered, missing before the next ones pushed.
    public func lose(_ frames: Int) { tapedeck_ring_lose(handle, UInt64(max(0, frames))) }
    /// Playback: copies up to `frames` frames out. - Returns: the frames copied.
    @discardableResult
    public func pull(into destination: UnsafeMutablePointer<Float>, frames: Int) -> Int {
        Int(tapedeck_ring_pull(handle, destination, UInt32(clamping: frames)))
    }
    /// One cycle done: counts it and wakes the device thread when what it waits for is there.
    public func cycle() { tapedeck_ring_cycle(handle) }
    /// The device clock: `frames` since the first cycle after start, as of now.
    public func setClock(frames: Int64) { tapedeck_ring_set_clock(handle, UInt64(max(0, frames)), tapedeck_ring_now_ns()) }
}
