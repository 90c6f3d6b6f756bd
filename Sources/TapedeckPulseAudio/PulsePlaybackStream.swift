#if PulseAudio
import CPulse
import Logging
import TapedeckCore

/// A PulseAudio playback stream on its own context and main loop, both run by the device thread.
///
/// `write` runs the main loop (each wait bounded) until the server wants data, then copies with
/// `pa_stream_write`. Underflows (the server ran dry and
/// played silence) are counted by the underflow callback; since PulseAudio does not say how
/// long each lasted, a write reports one period of silence per underflow seen since the last
/// write, an estimate. `drain` is `pa_stream_drain`, waited for at most the queued duration
/// (the target latency) plus 2 s.
final class PulsePlaybackStream: PlaybackStream {
    let format: AudioFormat
    /// The sink the server connected, e.g. `alsa_output.pci-…` for "the default".
    let deviceName: String?
    let periodFrames: Int
    var isRealTime: Bool { true }

    /// How long the server may take no data while connected before the stream counts as lost.
    static let stallNanos: UInt64 = 5_000_000_000

    private let connection: PulseConnection
    private var stream: OpaquePointer?
    private let logger: Logger
    private let bytesPerFrame: Int
    private let latencyNanos: UInt64
    private var underflowsReported = 0

    /// Underflows seen so far. - Thread: any.
    var underflows: Int { connection.events.underflows.load(ordering: .relaxed) }

    /// Connects and opens the playback stream with `fragment-ms` as its target latency.
    /// - Thread: the device thread. Blocks up to a few seconds.
    init(settings: PulseSettings, format: AudioFormat, options: PlaybackOptions, logger: Logger) throws {
        let connection = try PulseConnection(settings: settings)
        let target = PulseFormat.bytes(milliseconds: settings.fragmentMilliseconds, format)
        let attributes = pa_buffer_attr(maxlength: UInt32.max, tlength: target, prebuf: UInt32.max,
                                        minreq: UInt32.max, fragsize: UInt32.max)
        let stream: OpaquePointer
        do {
            stream = try connection.openStream(format: format, attributes: attributes, flags: PA_STREAM_ADJUST_LATENCY)
        } catch {
            connection.close()
            throw error
        }
        let attr = pa_stream_get_buffer_attr(stream)?.pointee
        let connected = pa_stream_get_device_name(stream).map { String(cString: $0) }
        let device = connected ?? settings.deviceLabel
        self.deviceName = connected
        self.connection = connection
        self.stream = stream
        self.format = format
        self.logger = logger
        self.bytesPerFrame = format.bytesPerFrame
        let tlength = Int(attr?.tlength ?? target)
        let minreq = Int(attr?.minreq ?? target)
        self.periodFrames = max(1, minreq / format.bytesPerFrame)
        self.latencyNanos = UInt64(max(1, tlength / format.bytesPerFrame)) * 1_000_000_000 / UInt64(format.sampleRate)
        logger.info("PulseAudio playback to \(device) at \(settings.serverLabel): \(PulseFormat.describe(PulseFormat.sampleSpec(format))), target latency \(latencyNanos / 1_000_000) ms (asked \(settings.fragmentMilliseconds) ms), request size \(periodFrames) frames.")
    }

    /// Blocks until all `frames` are queued on the server.
    /// - Thread: the device thread. Blocks about one period; never allocates.
    /// - Returns: estimated frames of silence played since the last write (underflows × period).
    /// - Throws: `.deviceLost` when the server or stream went away or took nothing for 5 s.
    func write(_ buffer: UnsafeRawPointer, frames: Int) throws -> Int64 {
        guard let stream else { throw TapedeckError(.internalError, "write(_:frames:) after close().") }
        let total = frames * bytesPerFrame
        var offset = 0
        var idleSince: UInt64 = 0
        while offset < total {
            guard connection.streamIsGood(stream) else { throw connection.lostError("playing to") }
            let writable = pa_stream_writable_size(stream)
            // (size_t)-1, an error, imports as -1.
            if writable >= bytesPerFrame {
                let n = min(writable, total - offset) / bytesPerFrame * bytesPerFrame
                let rc = pa_stream_write(stream, buffer + offset, n, nil, 0, PA_SEEK_RELATIVE)
                if rc < 0 { throw connection.lostError("playing to") }
                offset += n
                idleSince = 0
                continue
            }
            let now = PulseConnection.now()
            if idleSince == 0 { idleSince = now }
            if now - idleSince > Self.stallNanos {
                throw TapedeckError(.deviceLost,
                    "PulseAudio took no audio for \(connection.settings.deviceLabel) for \(Self.stallNanos / 1_000_000_000) s although the server is connected (suspended or stalled sink?). Playback stopped.")
            }
            connection.iterate(nanoseconds: 2 * latencyNanos + 50_000_000)
        }
        // pa_stream_write only queues; the main loop sends. Send now rather than at the next wait.
        connection.iterate(nanoseconds: 0)
        let seen = underflows
        let fresh = seen - underflowsReported
        underflowsReported = seen
        return Int64(fresh) * Int64(periodFrames)
    }

    /// Plays out everything queued (`pa_stream_drain`), waiting at most the queued duration + 2 s.
    /// - Thread: the device thread. Blocks while the queue plays.
    /// - Throws: `.deviceLost` when the server went away or the drain did not finish in time.
    func drain() throws {
        guard let stream else { return }
        let events = connection.events
        guard connection.streamIsGood(stream) else { throw connection.lostError("draining") }
        events.drainState.store(0, ordering: .relaxed)
        let op = pa_stream_drain(stream, PulseEvents.drainDone, events.userdata)
        let bound = latencyNanos + 2_000_000_000
        let finished = connection.finish(op, nanoseconds: bound)
        guard finished, events.drainState.load(ordering: .acquiring) == 1 else {
            throw connection.streamIsGood(stream)
                ? TapedeckError(.deviceLost, "PulseAudio did not finish playing \(connection.settings.deviceLabel) within \(bound / 1_000_000) ms. The end of the audio may be cut.")
                : connection.lostError("draining")
        }
    }

    /// Disconnects the stream and the context and frees the main loop.
    /// - Thread: the device thread. Never blocks.
    func close() {
        guard let stream else { return }
        self.stream = nil
        connection.closeStream(stream)
        connection.close()
        if underflows > 0 {
            logger.debug("PulseAudio playback: \(underflows) underflow(s).")
        }
    }

    deinit { close() }
}
#endif
