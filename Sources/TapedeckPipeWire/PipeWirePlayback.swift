#if PipeWire
import CPipeWireStream
import Foundation
import Logging
public import TapedeckCore

/// Play to PipeWire: `playback.backend: pipewire`. A value holding settings only; each stream
/// is a connection and a stream of its own, driven by the device thread that opened it.
public struct PipeWirePlaybackBackend: PlaybackBackend {
    public let name = "pipewire"
    let settings: PipeWireSettings
    let logger: Logger

    /// - Thread: any. Never blocks.
    init(settings: PipeWireSettings, logger: Logger) {
        self.settings = settings
        self.logger = logger
    }

    /// The daemon's sinks and duplex nodes, the default sink marked.
    /// - Thread: any that may block. Blocks for two round trips to the daemon.
    /// - Throws: `.deviceUnavailable` naming the socket when no daemon answers.
    public func devices() throws -> [AudioDevice] {
        try PipeWireDeviceList.list(settings: settings)
    }

    /// Opens a stream linked to the sink `device` names, in `format` exactly (PipeWire converts
    /// to the sink's rate, format and positions).
    /// - Thread: the device thread that will write the stream. Blocks for a few round trips and
    ///   the linking (at most 5 s).
    /// - Throws: `.deviceUnavailable` (no daemon, no such node, not linked).
    public func openPlaybackStream(format: AudioFormat, options: PlaybackOptions) throws -> any PlaybackStream {
        try PipeWirePlaybackStream(settings: settings, format: format, periodFrames: options.periodFrames, logger: logger)
    }
}

/// A PipeWire playback stream. Writes fill the ring and hand it to PipeWire's free buffers,
/// running PipeWire's loop on the device thread while the ring is full. Silence the graph played
/// because the stream had nothing queued (the graph clock running ahead of what was played) is
/// returned as underrun, not once the last write is in.
final class PipeWirePlaybackStream: PlaybackStream {
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
    private var underrunsReported: UInt64 = 0

    /// - Thread: the device thread. Blocks for a few round trips and the linking.
    init(settings: PipeWireSettings, format: AudioFormat, periodFrames: Int, logger: Logger) throws {
        let period = max(16, periodFrames)
        // Half a second or two writes queued ahead of PipeWire's own buffers.
        let ring = max(2 * period, format.sampleRate / 2)
        link = try PipeWireLink(settings: settings, format: format, ringFrames: ring)
        self.format = format
        self.periodFrames = period
        self.logger = logger
        stagingFrames = period
        staging = .allocate(capacity: period * format.channels)
        staging.initialize(repeating: 0, count: period * format.channels)
        converter = SampleConverter(from: format, to: .f32)
        logger.info("PipeWire playback to \(link.summary).")
    }

    /// Queues `frames` frames, running PipeWire's loop while the ring is full.
    /// - Thread: the device thread. Blocks until the frames are queued.
    /// - Returns: frames of silence the graph played since the last write for want of audio.
    /// - Throws: `.deviceLost` when the daemon, stream or node went away, or no cycle ran for 5 s.
    func write(_ buffer: UnsafeRawPointer, frames: Int) throws -> Int64 {
        var done = 0
        while done < frames {
            let chunk = min(frames - done, stagingFrames)
            converter.convert(buffer + done * format.bytesPerFrame, into: staging, frames: chunk)
            var queued = 0
            while queued < chunk {
                if link.isLost { throw link.lostError("playing") }
                queued += Int(tapedeck_pw_stream_write(link.handle, staging + queued * format.channels, UInt32(chunk - queued)))
                if !started && queued > 0 {
                    started = true
                    tapedeck_pw_stream_start(link.handle)
                }
                if queued < chunk { try runLoop(until: { self.link.available >= min(chunk - queued, self.link.ringFrames / 2) }) }
            }
            done += chunk
        }
        link.connection.iterate(milliseconds: 0)
        let underruns = tapedeck_pw_stream_underrun_frames(link.handle)
        defer { underrunsReported = underruns }
        return Int64(underruns - underrunsReported)
    }

    /// Runs PipeWire's loop until `done` holds, throwing when the stream is lost or stalls.
    private func runLoop(until done: () -> Bool) throws {
        var lastCycles = link.cycles
        var idleSince = DispatchTime.now().uptimeNanoseconds
        while !done() {
            if link.isLost { throw link.lostError("playing") }
            link.connection.iterate(milliseconds: 100)
            let cycles = link.cycles
            if cycles != lastCycles {
                lastCycles = cycles
                idleSince = DispatchTime.now().uptimeNanoseconds
            } else if DispatchTime.now().uptimeNanoseconds - idleSince > PipeWireLink.stallNanos {
                throw link.stallError("playing")
            }
        }
    }

    /// Waits until everything written has been played: PipeWire reports the stream drained,
    /// then one more cycle passes for the last buffer to reach the node.
    /// - Thread: the device thread. Blocks for the audio queued (at most about half a second)
    ///   plus a few cycles.
    /// - Throws: `.deviceLost` when the stream went away first.
    func drain() throws {
        guard !closed else { return }
        tapedeck_pw_stream_finish(link.handle)
        try runLoop(until: { tapedeck_pw_stream_drained(self.link.handle) != 0 })
        let settle = DispatchTime.now().uptimeNanoseconds + link.cycleNanos
        while DispatchTime.now().uptimeNanoseconds < settle, !link.isLost {
            link.connection.iterate(milliseconds: Int32(max(1, link.cycleNanos / 1_000_000)))
        }
    }

    /// Destroys the stream and disconnects. - Thread: the device thread. Never blocks for long.
    func close() {
        guard !closed else { return }
        closed = true
        link.close()
        staging.deallocate()
    }

    deinit { close() }
}
#endif
