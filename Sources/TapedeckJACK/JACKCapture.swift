#if JACK
import CJACKStream
import Dispatch
import Logging
public import TapedeckCore

/// Capture from a JACK server: `capture.backend: jack`. A value holding settings only; each
/// stream is a JACK client of its own, driven by the device thread that opened it.
public struct JACKCaptureBackend: CaptureBackend {
    public let name = "jack"
    let settings: JACKSettings
    let logger: Logger

    /// - Thread: any. Never blocks.
    init(settings: JACKSettings, logger: Logger) {
        self.settings = settings
        self.logger = logger
    }

    /// The server's clients with audio output ports (sources), physical ones first and default.
    /// - Thread: any that may block. Blocks for a few round trips to the server.
    /// - Throws: `.deviceUnavailable` naming the server when none runs.
    public func devices() throws -> [AudioDevice] {
        try JACKDeviceList.list(settings: settings)
    }

    /// Opens a JACK client with one input port per channel, connected as `device` says, in the
    /// server's rate (any other is refused: JACK does not convert rates) and any sample format
    /// (JACK's float samples are converted on the device thread). A read returns
    /// `options.periodFrames` frames, the stream's ``CaptureStream/periodFrames``.
    /// - Thread: the device thread that will read the stream. Blocks for a few round trips.
    /// - Throws: `.deviceUnavailable` (no server, no such port) or `.unsupportedFormat`.
    public func openCaptureStream(format: AudioFormat, options: CaptureOptions) throws -> any CaptureStream {
        try JACKCaptureStream(settings: settings, format: format, periodFrames: options.periodFrames, logger: logger)
    }
}

/// A JACK capture client. Reads wait on the semaphore JACK's process thread posts once the
/// frames asked for have arrived: one wake-up per read, however small JACK's buffer.
///
/// - Holes: frames JACK did not deliver (cycles the server skipped in an xrun, seen as jumps of
///   its frame time, or a ring the device thread let fill, about 2 s) are returned as
///   ``CaptureRead/lostFramesBefore`` where they happened, so the take's timeline stays true.
/// - The server shutting the client down (stopped, killed, or a client it dropped for being too
///   slow) ends the stream with `.deviceLost` once what arrived before is delivered.
/// - The ports discard audio until the first read, so the take begins when the engine starts
///   reading, not when the device was opened.
final class JACKCaptureStream: CaptureStream {
    let format: AudioFormat
    let periodFrames: Int
    var isRealTime: Bool { true }

    /// How long the server may run no cycle before the stream counts as lost (a server that
    /// hangs without closing the connection; JACK itself drops clients far sooner).
    static let stallNanos: UInt64 = 5_000_000_000

    private let client: JACKClient
    private let logger: Logger
    private let staging: UnsafeMutablePointer<Float>
    private let stagingFrames: Int
    private let converter: SampleConverter
    private var started = false
    private var closed = false
    /// Frames delivered (holes included) and, from the first drain, the frames due up to the stop.
    private var delivered: Int64 = 0
    private var drainTarget: Int64?
    private var drainDeadline: UInt64 = 0
    /// Lost frames not yet reported (a hole read with no frames after it yet).
    private var pendingLost: Int64 = 0

    /// - Thread: the device thread. Blocks for a few round trips to the server.
    init(settings: JACKSettings, format: AudioFormat, periodFrames: Int, logger: Logger) throws {
        let period = max(16, periodFrames)
        // A ring of at least 2 s and four reads: the device thread may be late by that much
        // before JACK's audio is dropped (and counted).
        let ring = max(4 * period, 2 * format.sampleRate)
        client = try JACKClient(settings: settings, format: format, ringFrames: ring)
        self.format = format
        self.periodFrames = period
        self.logger = logger
        stagingFrames = period
        staging = .allocate(capacity: period * format.channels)
        staging.initialize(repeating: 0, count: period * format.channels)
        converter = SampleConverter(from: format.with(sampleFormat: .f32), to: format.sampleFormat)
        logger.info("JACK capture on \(settings.serverLabel) as \(client.name): \(client.sampleRate) Hz, buffer \(client.bufferFrames) frames (\(String(format: "%.1f", Double(client.cycleNanos) / 1e6)) ms), \(format.channels) port(s) from \(client.connectionSummary); converted to \(format.sampleFormat).")
    }

    /// Delivers ``periodFrames`` frames (fewer just before a hole), sleeping until JACK has
    /// delivered them.
    /// - Thread: the device thread. Blocks about one read's worth of audio; never allocates.
    /// - Throws: `.deviceLost` when the server shut the client down (after what came before is
    ///   delivered), or ran no cycle for 5 s.
    func read(into buffer: UnsafeMutableRawPointer, maxFrames: Int) throws -> CaptureRead {
        if !started {
            started = true
            tapedeck_jack_stream_start(client.handle)
        }
        let want = min(maxFrames, stagingFrames)
        var lastCycles = client.cycles
        var idleSince = DispatchTime.now().uptimeNanoseconds
        while true {
            if client.available >= want { break }
            if client.isShutDown {
                if client.available > 0 { break }
                throw client.lostError("recording")
            }
            if !client.wait(frames: want, nanoseconds: 500_000_000) {
                let cycles = client.cycles
                let now = DispatchTime.now().uptimeNanoseconds
                if cycles != lastCycles {
                    lastCycles = cycles
                    idleSince = now
                } else if now - idleSince > Self.stallNanos {
                    if client.available > 0 { break }
                    throw TapedeckError(.deviceLost, "\(client.settings.serverLabel.capitalizedFirst) ran no cycle for \(Self.stallNanos / 1_000_000_000) s (stopped in a debugger, or hung). Restart it and record again.")
                }
            }
        }
        return take(maxFrames: want, into: buffer)
    }

    /// Copies what is ready (up to a hole) and converts it into `buffer`.
    private func take(maxFrames: Int, into buffer: UnsafeMutableRawPointer) -> CaptureRead {
        var lost: UInt64 = 0
        let frames = Int(tapedeck_jack_stream_read(client.handle, staging, UInt32(maxFrames), &lost))
        pendingLost += Int64(lost)
        guard frames > 0 else { return CaptureRead(frames: 0) }
        converter.convert(staging, into: buffer, frames: frames)
        let reported = pendingLost
        pendingLost = 0
        delivered += Int64(frames) + reported
        return CaptureRead(frames: frames, lostFramesBefore: reported)
    }

    /// Delivers the audio captured up to the stop: what is in the ring, then the cycle under way
    /// (JACK hands a cycle's audio over at its end), up to the server's frame time at the first
    /// drain; audio past that point is cut. Returns 0 frames when the take is complete.
    /// - Thread: the device thread. Blocks at most two cycles and 100 ms over all calls.
    func drain(into buffer: UnsafeMutableRawPointer, maxFrames: Int) throws -> CaptureRead {
        guard started, !client.isShutDown else { return CaptureRead(frames: 0) }
        if drainTarget == nil {
            let now = tapedeck_jack_stream_frame_time(client.handle)
            let first = tapedeck_jack_stream_start_frame(client.handle)
            let done = Int64(tapedeck_jack_stream_frames_done(client.handle))
            let elapsed = done == 0 ? 0 : Int64(Int32(bitPattern: now &- first))
            drainTarget = max(elapsed, delivered + Int64(client.available))
            drainDeadline = DispatchTime.now().uptimeNanoseconds + 2 * client.cycleNanos + 100_000_000
        }
        let target = drainTarget!
        while delivered < target {
            let wanted = Int(min(Int64(min(maxFrames, stagingFrames)), target - delivered))
            if client.available > 0 {
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
            guard now < drainDeadline, !client.isShutDown else { break }
            _ = client.wait(frames: 1, nanoseconds: drainDeadline - now)
        }
        return CaptureRead(frames: 0)
    }

    /// Deactivates and closes the client. - Thread: the device thread. Never blocks for long.
    func close() {
        guard !closed else { return }
        closed = true
        let lost = tapedeck_jack_stream_lost_frames(client.handle)
        let xruns = client.xruns
        client.close()
        staging.deallocate()
        if lost > 0 || xruns > 0 {
            logger.warning("JACK capture: \(xruns) xrun(s) reported by the server; \(lost) frame(s) not delivered (filled with silence).")
        }
    }

    deinit { close() }
}
#endif
