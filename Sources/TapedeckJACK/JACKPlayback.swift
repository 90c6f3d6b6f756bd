#if JACK
import CJACKStream
import Foundation
import Logging
public import TapedeckCore

/// Play to a JACK server: `playback.backend: jack`. A value holding settings only; each stream
/// is a JACK client of its own, driven by the device thread that opened it.
public struct JACKPlaybackBackend: PlaybackBackend {
    public let name = "jack"
    let settings: JACKSettings
    let logger: Logger

    /// - Thread: any. Never blocks.
    init(settings: JACKSettings, logger: Logger) {
        self.settings = settings
        self.logger = logger
    }

    /// The server's clients with audio input ports (sinks), physical ones first and default.
    /// - Thread: any that may block. Blocks for a few round trips to the server.
    /// - Throws: `.deviceUnavailable` naming the server when none runs.
    public func devices() throws -> [AudioDevice] {
        try JACKDeviceList.list(settings: settings)
    }

    /// Opens a JACK client with one output port per channel, connected as `device` says, in the
    /// server's rate (any other is refused) and any sample format (converted to JACK's floats on
    /// the device thread).
    /// - Thread: the device thread that will write the stream. Blocks for a few round trips.
    /// - Throws: `.deviceUnavailable` (no server, no such port) or `.unsupportedFormat`.
    public func openPlaybackStream(format: AudioFormat, options: PlaybackOptions) throws -> any PlaybackStream {
        try JACKPlaybackStream(settings: settings, format: format, periodFrames: options.periodFrames, logger: logger)
    }
}

/// A JACK playback client. Writes fill the ring, sleeping on the semaphore JACK's process thread
/// posts when room frees; the ports play silence until the first write, and silence played
/// because the ring ran dry afterwards is counted as underrun (not once the last write is in).
final class JACKPlaybackStream: PlaybackStream {
    let format: AudioFormat
    let periodFrames: Int
    var isRealTime: Bool { true }

    private let client: JACKClient
    private let logger: Logger
    private let staging: UnsafeMutablePointer<Float>
    private let stagingFrames: Int
    private let converter: SampleConverter
    private var started = false
    private var closed = false
    private var underrunsReported: UInt64 = 0

    /// - Thread: the device thread. Blocks for a few round trips to the server.
    init(settings: JACKSettings, format: AudioFormat, periodFrames: Int, logger: Logger) throws {
        let period = max(16, periodFrames)
        // Half a second or two writes queued ahead of JACK: what a late device thread can afford.
        let ring = max(2 * period, format.sampleRate / 2)
        client = try JACKClient(settings: settings, format: format, ringFrames: ring)
        self.format = format
        self.periodFrames = period
        self.logger = logger
        stagingFrames = period
        staging = .allocate(capacity: period * format.channels)
        staging.initialize(repeating: 0, count: period * format.channels)
        converter = SampleConverter(from: format, to: .f32)
        logger.info("JACK playback on \(settings.serverLabel) as \(client.name): \(client.sampleRate) Hz, buffer \(client.bufferFrames) frames, \(format.channels) port(s) to \(client.connectionSummary).")
    }

    /// Queues `frames` frames, sleeping while the ring is full.
    /// - Thread: the device thread. Blocks until the frames are queued (about one write's worth
    ///   of audio when playing steadily); never allocates.
    /// - Returns: frames of silence JACK played since the last write because the ring ran dry.
    /// - Throws: `.deviceLost` when the server shut the client down.
    func write(_ buffer: UnsafeRawPointer, frames: Int) throws -> Int64 {
        var done = 0
        while done < frames {
            let chunk = min(frames - done, stagingFrames)
            converter.convert(buffer + done * format.bytesPerFrame, into: staging, frames: chunk)
            var queued = 0
            while queued < chunk {
                if client.isShutDown { throw client.lostError("playing") }
                let n = Int(tapedeck_jack_stream_write(client.handle, staging + queued * format.channels, UInt32(chunk - queued)))
                queued += n
                if !started && queued > 0 && (queued == chunk || client.available == 0) {
                    started = true
                    tapedeck_jack_stream_start(client.handle)
                }
                if queued < chunk {
                    try waitForRoom(min(chunk - queued, client.ringFrames / 2))
                }
            }
            done += chunk
        }
        let underruns = tapedeck_jack_stream_underrun_frames(client.handle)
        defer { underrunsReported = underruns }
        return Int64(underruns - underrunsReported)
    }

    private func waitForRoom(_ frames: Int) throws {
        let deadline = DispatchTime.now().uptimeNanoseconds + JACKCaptureStream.stallNanos
        while client.available < frames {
            if client.isShutDown { throw client.lostError("playing") }
            if !client.wait(frames: frames, nanoseconds: 500_000_000) && DispatchTime.now().uptimeNanoseconds > deadline {
                throw TapedeckError(.deviceLost, "\(client.settings.serverLabel.capitalizedFirst) ran no cycle for \(JACKCaptureStream.stallNanos / 1_000_000_000) s (stopped in a debugger, or hung). Restart it and play again.")
            }
        }
    }

    /// Waits until everything written has been played: the ring empty, then two more cycles
    /// (the last one's audio handed to the ports and on to the server's outputs).
    /// - Thread: the device thread. Blocks for the audio queued (at most half a second) plus two cycles.
    /// - Throws: `.deviceLost` when the server shut the client down first.
    func drain() throws {
        guard !closed else { return }
        if !started {
            started = true
            tapedeck_jack_stream_start(client.handle)
        }
        tapedeck_jack_stream_finish(client.handle)
        try waitForRoom(client.ringFrames)
        let cycles = client.cycles
        let deadline = DispatchTime.now().uptimeNanoseconds + 4 * client.cycleNanos + 200_000_000
        while client.cycles < cycles + 2 && DispatchTime.now().uptimeNanoseconds < deadline {
            if client.isShutDown { throw client.lostError("playing") }
            usleep(useconds_t(max(1_000, client.cycleNanos / 2_000)))
        }
    }

    /// Deactivates and closes the client. - Thread: the device thread. Never blocks for long.
    func close() {
        guard !closed else { return }
        closed = true
        let xruns = client.xruns
        client.close()
        staging.deallocate()
        if xruns > 0 { logger.warning("JACK playback: \(xruns) xrun(s) reported by the server.") }
    }

    deinit { close() }
}
#endif
