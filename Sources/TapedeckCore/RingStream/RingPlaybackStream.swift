import Dispatch
import Logging

/// A playback stream over any callback backend: writes fill a ``DeviceRing`` the device's
/// real-time callback pulls from, sleeping while it is full. The device plays silence until the
/// first write; silence played because the ring ran dry afterwards is returned as underrun (not
/// once the last write is in).
///
/// Thread: the device thread that opened it, for every member.
public final class RingPlaybackStream<Backend: RingBackend>: PlaybackStream {
    public let format: AudioFormat
    public let periodFrames: Int
    public var isRealTime: Bool { true }
    public var deviceName: String? { ends.device.deviceName }

    private let ends: RingEnds<Backend>
    private var ring: DeviceRing { ends.ring }
    private var device: Backend.Device { ends.device }
    private var staging: UnsafeMutablePointer<Float> { ends.staging }
    private let converter: SampleConverter
    private var closed = false
    private var underrunsReported: UInt64 = 0

    /// Opens the device with a ring of half a second or two writes. Blocks for the opening.
    init(backend: Backend, format: AudioFormat, periodFrames: Int) throws {
        let period = max(16, periodFrames)
        ends = try RingEnds(backend, .playback, format: format, periodFrames: period, ringFrames: max(2 * period, format.sampleRate / 2))
        self.format = format
        self.periodFrames = period
        converter = SampleConverter(from: format, to: .f32)
        ends.logger.info("\(ends.device.summary).")
    }

    /// Queues `frames` frames, sleeping while the ring is full. Blocks until they are queued
    /// (about one write's worth of audio when playing steadily); never allocates.
    /// - Returns: frames of silence the device played since the last write because the ring ran dry.
    /// - Throws: `.deviceLost` when the device went away or ran no cycle for 5 s.
    public func write(_ buffer: UnsafeRawPointer, frames: Int) throws -> Int64 {
        var done = 0
        while done < frames {
            let chunk = min(frames - done, periodFrames)
            converter.convert(buffer + done * format.bytesPerFrame, into: staging, frames: chunk)
            var queued = 0
            while queued < chunk {
                if ring.isClosed { throw device.lostError("playing") }
                queued += ring.write(staging + queued * format.channels, frames: chunk - queued)
                if !ring.isStarted && queued > 0 && (queued == chunk || ring.available == 0) { ring.start() }
                if queued < chunk { try waitForRoom(min(chunk - queued, ring.capacity / 2)) }
            }
            done += chunk
        }
        device.dispatchEvents()
        let underruns = ring.underrunFrames
        defer { underrunsReported = underruns }
        return Int64(underruns - underrunsReported)
    }

    private func waitForRoom(_ frames: Int) throws {
        var watch = StallWatch(ring)
        while ring.available < frames {
            if ring.isClosed { throw device.lostError("playing") }
            if ring.wait(frames: frames, nanoseconds: 500_000_000, otherFD: device.eventFD) == .otherFD { device.dispatchEvents() }
            if watch.stalled() { throw device.stallError("playing") }
        }
    }

    /// Waits until everything written has been played: the ring empty, then what the device
    /// needs to play its last cycle. Blocks for the audio queued (at most half a second) plus a
    /// few cycles.
    /// - Throws: `.deviceLost` when the device went away first.
    public func drain() throws {
        guard !closed else { return }
        if !ring.isStarted { ring.start() }
        ring.finish()
        try waitForRoom(ring.capacity)
        try device.finishPlaying()
    }

    /// Stops the callback and closes the device. Never blocks for long.
    public func close() {
        closed = true
        ends.close()
    }

}
