import Dispatch
import Logging

/// A capture stream over any callback backend: the device's real-time callback pushes into a
/// ``DeviceRing``; reads sleep on the ring (and on the device's own event loop, when it has one)
/// until the frames asked for have arrived, one wake-up per read however small the device's cycle.
///
/// - Holes: frames the device did not deliver (cycles it skipped, a graph clock ahead of the
///   audio, or a ring the device thread let fill: ``RingStreams/captureSeconds``) come back as
///   ``CaptureRead/lostFramesBefore`` where they happened, so the take's timeline stays true.
/// - The device going away (the ring closed) ends the stream with `.deviceLost` once what arrived
///   before is delivered; so does a device that runs no cycle for ``RingStreams/stallNanos``.
/// - Audio before the first read is discarded: the take begins when the engine starts reading.
///
/// Thread: the device thread that opened it, for every member.
public final class RingCaptureStream<Backend: RingBackend>: CaptureStream {
    public let format: AudioFormat
    public let periodFrames: Int
    public var isRealTime: Bool { device.isRealTime }
    public var deviceName: String? { device.deviceName }
    public var cues: CaptureCues? { device.cues }

    private let ends: RingEnds<Backend>
    private var ring: DeviceRing { ends.ring }
    private var device: Backend.Device { ends.device }
    private var staging: UnsafeMutablePointer<Float> { ends.staging }
    private let converter: SampleConverter
    /// Frames delivered (holes included) and, from the first drain, the frames due up to the stop.
    private var delivered: Int64 = 0
    private var drainTarget: Int64?
    private var drainDeadline: UInt64 = 0
    /// Lost frames read but not yet reported (a hole with no frames after it yet).
    private var pendingLost: Int64 = 0

    /// Opens the device with a ring of ``RingStreams/captureSeconds``. Blocks for the opening.
    /// `chosen` says which parts of `format` the device must keep (see ``RingBackend/open(requested:chosen:makeRing:)``).
    init(backend: Backend, format requested: AudioFormat, periodFrames: Int, chosen: FormatChoice = .all) throws {
        let period = max(16, periodFrames)
        ends = try RingEnds(backend, .capture, requested: requested, chosen: chosen, periodFrames: period) {
            max(4 * period, RingStreams.captureSeconds * $0.sampleRate)
        }
        let format = ends.format
        self.format = format
        self.periodFrames = period
        converter = SampleConverter(from: format.with(sampleFormat: .f32), to: format.sampleFormat)
        ends.logger.info("\(ends.device.summary); converted to \(format.sampleFormat).")
    }

    /// Delivers ``periodFrames`` frames (fewer just before a hole), sleeping until they arrived.
    /// Blocks about one read's worth of audio; never allocates.
    /// - Throws: `.deviceLost` as described above.
    public func read(into buffer: UnsafeMutableRawPointer, maxFrames: Int) throws -> CaptureRead {
        if !ring.isStarted { ring.start() }
        let want = min(maxFrames, periodFrames)
        var watch = StallWatch(ring, limit: device.stallNanos)
        while ring.available < want {
            if ring.isClosed {
                if ring.available > 0 { break }
                throw device.lostError("recording")
            }
            if ring.wait(frames: want, nanoseconds: 500_000_000, otherFD: device.eventFD) == .otherFD { device.dispatchEvents() }
            if watch.stalled() {
                if ring.available > 0 { break }
                throw device.stallError("recording")
            }
        }
        return take(maxFrames: want, into: buffer)
    }

    /// Copies what is ready (up to a hole) and converts it into `buffer`.
    private func take(maxFrames: Int, into buffer: UnsafeMutableRawPointer) -> CaptureRead {
        let (frames, lost) = ring.read(into: staging, maxFrames: maxFrames)
        pendingLost += lost
        guard frames > 0 else { return CaptureRead(frames: 0) }
        converter.convert(staging, into: buffer, frames: frames)
        let reported = pendingLost
        pendingLost = 0
        delivered += Int64(frames) + reported
        return CaptureRead(frames: frames, lostFramesBefore: reported)
    }

    /// Delivers the audio captured up to the stop: what is in the ring, then the cycle under way
    /// (a callback hands a cycle's audio over at its end), up to the device clock at the first
    /// drain; audio past that point is cut. Returns 0 frames when the take is complete.
    /// Blocks at most two cycles and 100 ms over all calls.
    public func drain(into buffer: UnsafeMutableRawPointer, maxFrames: Int) throws -> CaptureRead {
        guard ring.isStarted, !ring.isClosed else { return CaptureRead(frames: 0) }
        if drainTarget == nil {
            device.dispatchEvents()
            let elapsed = ring.framesDone == 0 ? 0 : ring.clockNow(sampleRate: format.sampleRate) ?? 0
            drainTarget = max(elapsed, delivered + Int64(ring.available))
            drainDeadline = DispatchTime.now().uptimeNanoseconds + 2 * device.cycleNanos + 100_000_000
        }
        let target = drainTarget!
        while delivered < target {
            let wanted = Int(min(Int64(min(maxFrames, periodFrames)), target - delivered))
            if ring.available > 0 {
                var read = take(maxFrames: wanted, into: buffer)
                if delivered > target {
                    // A hole reaching past the stop: only its part before the stop counts.
                    let over = delivered - target
                    read.lostFramesBefore -= min(over, read.lostFramesBefore)
                    delivered = target
                }
                return read
            }
            let now = DispatchTime.now().uptimeNanoseconds
            guard now < drainDeadline, !ring.isClosed else { break }
            if ring.wait(frames: 1, nanoseconds: drainDeadline - now, otherFD: device.eventFD) == .otherFD { device.dispatchEvents() }
        }
        return CaptureRead(frames: 0)
    }

    /// Stops the callback and closes the device. Never blocks for long.
    public func close() { ends.close() }

}

/// What a ring stream of either direction holds: the ring, the open device, and one period of
/// float samples to convert through; closing stops the device before the ring can be freed.
/// Thread: the device thread that opened it.
final class RingEnds<Backend: RingBackend> {
    let ring: DeviceRing
    let device: Backend.Device
    /// The format the device opened in (the one asked for, or the source's own where it decides).
    let format: AudioFormat
    let staging: UnsafeMutablePointer<Float>
    let logger: Logger
    private var closed = false

    /// Makes the ring and opens the device on it. Blocks for the opening.
    init(_ backend: Backend, _ direction: DeviceRing.Direction, format: AudioFormat, periodFrames: Int, ringFrames: Int) throws {
        ring = try DeviceRing(direction, channels: format.channels, frames: ringFrames)
        device = try backend.open(format: format, ring: ring)
        self.format = format
        logger = backend.section.logger
        staging = .allocate(capacity: periodFrames * format.channels)
        staging.initialize(repeating: 0, count: periodFrames * format.channels)
    }

    /// Opens the device, which may decide the format (``RingBackend/open(requested:chosen:makeRing:)``),
    /// with a ring of `ringFrames(format)` frames. Blocks for the opening.
    init(_ backend: Backend, _ direction: DeviceRing.Direction, requested: AudioFormat, chosen: FormatChoice, periodFrames: Int,
         ringFrames: (AudioFormat) -> Int) throws {
        var made: DeviceRing?
        let (device, format) = try backend.open(requested: requested, chosen: chosen) { format in
            let ring = try DeviceRing(direction, channels: format.channels, frames: ringFrames(format))
            made = ring
            return ring
        }
        guard let ring = made, ring.channels == format.channels else {
            device.close()
            throw TapedeckError(.internalError, "The \(Backend.name) backend opened without a device buffer for \(format).")
        }
        self.ring = ring
        self.device = device
        self.format = format
        logger = backend.section.logger
        staging = .allocate(capacity: periodFrames * format.channels)
        staging.initialize(repeating: 0, count: periodFrames * format.channels)
    }

    /// Stops the callback, closes the device and logs its report (xruns, lost frames). Once.
    func close() {
        guard !closed else { return }
        closed = true
        device.close()
        staging.deallocate()
        let lost = ring.direction == .capture ? ring.lostFrames : 0
        if let report = device.closingReport(lostFrames: lost) { logger.warning("\(report)") }
    }

    deinit { close() }
}

/// The ring streams' limits. Plain constants; any thread.
public enum RingStreams {
    /// How far a capture's device thread may fall behind before audio is lost: the ring holds
    /// this many seconds (or four reads, if that is more).
    public static let captureSeconds = 5
    /// How long a device may run no cycle before the stream counts as lost (a server that hangs
    /// without closing the connection).
    public static let stallNanos: UInt64 = 5_000_000_000
}

/// Whether a device ran no cycle for ``RingStreams/stallNanos`` since the watch began or last saw one.
struct StallWatch {
    private let ring: DeviceRing
    private let limit: UInt64
    private var lastCycles: UInt64
    private var idleSince: UInt64

    init(_ ring: DeviceRing, limit: UInt64 = RingStreams.stallNanos) {
        self.ring = ring
        self.limit = limit
        lastCycles = ring.cycles
        idleSince = DispatchTime.now().uptimeNanoseconds
    }

    mutating func stalled() -> Bool {
        let cycles = ring.cycles
        let now = DispatchTime.now().uptimeNanoseconds
        if cycles != lastCycles {
            lastCycles = cycles
            idleSince = now
            return false
        }
        return now - idleSince > limit
    }
}
