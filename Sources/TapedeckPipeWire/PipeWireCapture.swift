#if PipeWire
import CPipeWireStream
import Dispatch
import Logging
public import TapedeckCore

/// Capture from PipeWire: `capture.backend: pipewire`. A value holding settings only; each
/// stream is a connection and a stream of its own, driven by the device thread that opened it.
public struct PipeWireCaptureBackend: CaptureBackend {
    public let name = "pipewire"
    let settings: PipeWireSettings
    let logger: Logger

    /// - Thread: any. Never blocks.
    init(settings: PipeWireSettings, logger: Logger) {
        self.settings = settings
        self.logger = logger
    }

    /// The daemon's sources, duplex nodes and sinks (recording a sink records what it plays),
    /// the default source marked.
    /// - Thread: any that may block. Blocks for two round trips to the daemon.
    /// - Throws: `.deviceUnavailable` naming the socket when no daemon answers.
    public func devices() throws -> [AudioDevice] {
        try PipeWireDeviceList.list(settings: settings)
    }

    /// Opens a stream linked to the node `device` names, in `format` exactly: PipeWire converts
    /// the node's rate, sample format and channel positions to the take's. A read returns
    /// `options.periodFrames` frames, the stream's ``CaptureStream/periodFrames``.
    /// - Thread: the device thread that will read the stream. Blocks for a few round trips and
    ///   the linking (at most 5 s).
    /// - Throws: `.deviceUnavailable` (no daemon, no such node, not linked).
    public func openCaptureStream(format: AudioFormat, options: CaptureOptions) throws -> any CaptureStream {
        try PipeWireCaptureStream(settings: settings, format: format, periodFrames: options.periodFrames, logger: logger)
    }
}

/// A PipeWire capture stream. Reads run PipeWire's loop on the device thread until the frames
/// asked for have arrived; the stream's process callback (C, on this thread) copies each buffer
/// into the ring.
///
/// - Holes: audio PipeWire dropped because this thread fell behind (its buffers all waiting to
///   be read) shows as the graph clock running ahead of what arrived; it is returned as
///   ``CaptureRead/lostFramesBefore`` where it happened, so the take's timeline stays true.
/// - The daemon going away, the stream failing or the node being removed ends the stream with
///   `.deviceLost` once what arrived before is delivered; so does a graph that runs no cycle
///   for 5 s.
/// - Audio before the first read is discarded: the take begins when the engine starts reading.
final class PipeWireCaptureStream: CaptureStream {
    let format: AudioFormat
    let periodFrames: Int
    var isRealTime: Bool { true }

    private let link: PipeWireLink
    private let logger: Logger
    private let staging: UnsafeMutablePointer<Float>
    private let stagingFrames: Int
    private let converter: SampleConverter
    private var started = false
    private var closed = false
    private var delivered: Int64 = 0
    private var drainTarget: Int64?
    private var drainDeadline: UInt64 = 0
    private var pendingLost: Int64 = 0

    /// - Thread: the device thread. Blocks for a few round trips and the linking.
    init(settings: PipeWireSettings, format: AudioFormat, periodFrames: Int, logger: Logger) throws {
        let period = max(16, periodFrames)
        // Room for 2 s or four reads: more than one pass of the loop ever brings.
        let ring = max(4 * period, 2 * format.sampleRate)
        link = try PipeWireLink(settings: settings, format: format, ringFrames: ring)
        self.format = format
        self.periodFrames = period
        self.logger = logger
        stagingFrames = period
        staging = .allocate(capacity: period * format.channels)
        staging.initialize(repeating: 0, count: period * format.channels)
        converter = SampleConverter(from: format.with(sampleFormat: .f32), to: format.sampleFormat)
        logger.info("PipeWire capture from \(link.summary); converted to \(format.sampleFormat).")
    }

    /// Delivers ``periodFrames`` frames (fewer just before a hole), running PipeWire's loop
    /// until they have arrived.
    /// - Thread: the device thread. Blocks about one read's worth of audio.
    /// - Throws: `.deviceLost` (after what came before is delivered) as described above.
    func read(into buffer: UnsafeMutableRawPointer, maxFrames: Int) throws -> CaptureRead {
        if !started {
            started = true
            tapedeck_pw_stream_start(link.handle)
        }
        let want = min(maxFrames, stagingFrames)
        var lastCycles = link.cycles
        var idleSince = DispatchTime.now().uptimeNanoseconds
        while link.available < want {
            if link.isLost {
                if link.available > 0 { break }
                throw link.lostError("recording")
            }
            link.connection.iterate(milliseconds: 100)
            let cycles = link.cycles
            if cycles != lastCycles {
                lastCycles = cycles
                idleSince = DispatchTime.now().uptimeNanoseconds
            } else if DispatchTime.now().uptimeNanoseconds - idleSince > PipeWireLink.stallNanos {
                if link.available > 0 { break }
                throw link.stallError("recording")
            }
        }
        return take(maxFrames: want, into: buffer)
    }

    private func take(maxFrames: Int, into buffer: UnsafeMutableRawPointer) -> CaptureRead {
        var lost: UInt64 = 0
        let frames = Int(tapedeck_pw_stream_read(link.handle, staging, UInt32(maxFrames), &lost))
        pendingLost += Int64(lost)
        guard frames > 0 else { return CaptureRead(frames: 0) }
        converter.convert(staging, into: buffer, frames: frames)
        let reported = pendingLost
        pendingLost = 0
        delivered += Int64(frames) + reported
        return CaptureRead(frames: frames, lostFramesBefore: reported)
    }

    /// Delivers the audio captured up to the stop: what is in the ring, then the cycle under way,
    /// up to the graph clock's position at the first drain; audio past it is cut. Returns 0
    /// frames when the take is complete.
    /// - Thread: the device thread. Blocks at most two cycles and 100 ms over all calls.
    func drain(into buffer: UnsafeMutableRawPointer, maxFrames: Int) throws -> CaptureRead {
        guard started, !link.isLost else { return CaptureRead(frames: 0) }
        if drainTarget == nil {
            link.connection.iterate(milliseconds: 0)
            let elapsed = Int64(tapedeck_pw_stream_frames_elapsed(link.handle))
            drainTarget = max(elapsed, delivered + Int64(link.available))
            drainDeadline = DispatchTime.now().uptimeNanoseconds + 2 * link.cycleNanos + 100_000_000
        }
        let target = drainTarget!
        while delivered < target {
            let wanted = Int(min(Int64(min(maxFrames, stagingFrames)), target - delivered))
            if link.available > 0 {
                var read = take(maxFrames: wanted, into: buffer)
                if delivered > target {
                    let over = delivered - target
                    read.lostFramesBefore -= min(over, read.lostFramesBefore)
                    delivered = target
                }
                return read
            }
            let now = DispatchTime.now().uptimeNanoseconds
            guard now < drainDeadline, !link.isLost else { break }
            link.connection.iterate(milliseconds: Int32(max(1, (drainDeadline - now) / 1_000_000)))
        }
        return CaptureRead(frames: 0)
    }

    /// Destroys the stream and disconnects. - Thread: the device thread. Never blocks for long.
    func close() {
        guard !closed else { return }
        closed = true
        let lost = tapedeck_pw_stream_lost_frames(link.handle)
        link.close()
        staging.deallocate()
        if lost > 0 {
            logger.warning("PipeWire capture: \(lost) frame(s) dropped while Tapedeck fell behind (filled with silence).")
        }
    }

    deinit { close() }
}
#endif
