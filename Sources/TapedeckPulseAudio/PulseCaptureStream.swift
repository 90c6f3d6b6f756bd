#if PulseAudio
import CPulse
import Logging
import TapedeckCore

/// A PulseAudio record stream on its own context and main loop, both run by the device thread.
///
/// - A read takes what has arrived, sleeps until the rest of its fragment is due (a sleep that
///   only the server hanging up ends early), takes what came meanwhile, and runs the connection's
///   main loop (a bounded `poll` on the server's socket) only when nothing at all has come, taking
///   data with `pa_stream_peek`/`pa_stream_drop`. The device thread is the only thread, so a
///   fragment costs one wake-up however the server splits it, with no mainloop thread to hand it
///   over and no lock to contend for. A fragment larger than the caller's buffer is not copied
///   aside: it stays peeked, and the next read continues at ``fragmentOffset`` (so there is no
///   staging buffer and nothing is allocated per period).
/// - A hole (`pa_stream_peek` giving no data but a length) is audio the server never delivered:
///   it is returned as ``CaptureRead/lostFramesBefore`` with the next data, and the engine fills
///   it with silence, so the take's timeline stays true. Holes are counted in ``holes``.
/// - Overflow: PulseAudio only sends overflow notifications for playback streams; a record stream
///   whose server-side queue (`maxlength`, 4 MiB by default: about 20 s at 48 kHz stereo s16)
///   fills drops data without telling the client and without a hole. Tapedeck's device thread
///   keeps reading even when its own ring is full (those frames become counted overruns), so
///   that queue only fills if the process is stopped for that long. The overflow callback is
///   still registered; what it counts is in ``overflows`` and logged at close, with 0 frames.
/// - The stream starts corked and is uncorked by the first read, so the take begins when the
///   engine starts reading, not when the device was opened.
final class PulseCaptureStream: CaptureStream {
    let format: AudioFormat
    let periodFrames: Int
    var isRealTime: Bool { true }
    /// The source the server connected, e.g. `null.monitor` for "the default".
    let deviceName: String?

    /// How long the server may deliver nothing while connected before the stream counts as lost.
    static let stallNanos: UInt64 = 5_000_000_000

    private let connection: PulseConnection
    private var stream: OpaquePointer?
    private let logger: Logger
    private let bytesPerFrame: Int
    private let fragmentNanos: UInt64
    /// Bytes of the currently peeked fragment already handed out.
    private var fragmentOffset = 0
    private var started = false
    /// When the stream was uncorked (the take's first instant), and frames delivered since
    /// (holes included), so a stop can wait for audio still in flight.
    private var startNanos: UInt64 = 0
    private var delivered: Int64 = 0
    /// Set at the first `drain`: the frames due up to the stop, and how long to wait for them.
    private var drainTarget: Int64?
    private var drainDeadline: UInt64 = 0
    /// The longest a stop waits for audio in flight (a sink's monitor can run seconds behind).
    static let drainLimitNanos: UInt64 = 3_000_000_000
    /// The steps of a read that is not yet full: take what has already arrived, then sleep until
    /// the rest is due, then (only when nothing at all has come) wait for the first piece.
    private enum Pace { case collectArrived, sleepUntilDue, waitForAny }
    /// Shorter waits than this are left to the main loop's poll.
    static let minimumSleepNanos: UInt64 = 5_000_000
    /// Times a read slept or waited for the server: about one per fragment (for tests).
    private(set) var waits = 0
    /// Holes seen, and the frames they covered.
    private(set) var holes = 0
    private(set) var holeFrames: Int64 = 0

    /// Overflow notifications received (see the type's documentation). - Thread: any.
    var overflows: Int { connection.events.overflows.load(ordering: .relaxed) }

    /// Connects and opens the record stream, corked.
    /// - Thread: the device thread. Blocks up to a few seconds.
    init(settings: PulseSettings, format: AudioFormat, logger: Logger) throws {
        let connection = try PulseConnection(settings: settings)
        let fragment = PulseFormat.bytes(milliseconds: settings.fragmentMilliseconds, format)
        let attributes = pa_buffer_attr(maxlength: UInt32.max, tlength: UInt32.max, prebuf: UInt32.max,
                                        minreq: UInt32.max, fragsize: fragment)
        let flags = pa_stream_flags_t(rawValue: PA_STREAM_ADJUST_LATENCY.rawValue | PA_STREAM_START_CORKED.rawValue)
        let stream: OpaquePointer
        do {
            stream = try connection.openStream(format: format, attributes: attributes, flags: flags)
        } catch {
            connection.close()
            throw error
        }
        let negotiated = pa_stream_get_buffer_attr(stream)?.pointee.fragsize ?? fragment
        let connected = pa_stream_get_device_name(stream).map { String(cString: $0) }
        let device = connected ?? settings.deviceLabel
        self.deviceName = connected
        self.connection = connection
        self.stream = stream
        self.format = format
        self.logger = logger
        self.bytesPerFrame = format.bytesPerFrame
        let frames = max(1, Int(negotiated) / format.bytesPerFrame)
        self.periodFrames = frames
        self.fragmentNanos = UInt64(frames) * 1_000_000_000 / UInt64(format.sampleRate)
        logger.info("PulseAudio capture from \(device) at \(settings.serverLabel): \(PulseFormat.describe(PulseFormat.sampleSpec(format))), fragment \(frames) frames (\(fragmentNanos / 1_000_000) ms; asked \(settings.fragmentMilliseconds) ms).")
    }

    /// Delivers up to `maxFrames` frames (one fragment: the engine asks for ``periodFrames``):
    /// at once when that much has arrived; otherwise after sleeping until the rest is due, what
    /// has come by then (fewer when the source runs a little behind, and fewer when a hole
    /// follows them or the server goes away after them). A fragment costs one wake-up however
    /// the server splits it.
    /// - Thread: the device thread. Blocks about one fragment; never allocates.
    /// - Throws: `.deviceLost` when the server or stream went away, or nothing arrived for 5 s.
    func read(into buffer: UnsafeMutableRawPointer, maxFrames: Int) throws -> CaptureRead {
        guard let stream else { throw TapedeckError(.internalError, "read(into:maxFrames:) after close().") }
        if !started { uncork(stream) }
        var lost: Int64 = 0
        var filled = 0
        var idleSince: UInt64 = 0
        var stage = Pace.collectArrived
        reading: while true {
            guard connection.streamIsGood(stream) else {
                if filled > 0 { break }
                throw connection.lostError("recording from")
            }
            let (frames, stoppedAtHole) = take(stream, into: buffer + filled * bytesPerFrame,
                                               maxFrames: maxFrames - filled, lost: &lost, holeAllowed: filled == 0)
            filled += frames
            if filled == maxFrames || stoppedAtHole { break }
            let now = PulseConnection.now()
            if frames > 0 || idleSince == 0 { idleSince = now }
            if now - idleSince > Self.stallNanos {
                if filled > 0 { break }
                throw TapedeckError(.deviceLost,
                    "PulseAudio delivered no audio from \(connection.settings.deviceLabel) for \(Self.stallNanos / 1_000_000_000) s although the server is connected (suspended or stalled source?).")
            }
            switch stage {
            case .collectArrived:
                // What the server sent while the engine handled the last read.
                stage = .sleepUntilDue
                connection.dispatchPending()
            case .sleepUntilDue:
                // The server passes audio on in the pieces its source hands over, which are much
                // smaller than a fragment when another client of the source asked for low latency.
                // Waking for each piece would cost a wake-up per piece; sleeping until the rest of
                // the buffer is due (a little longer, so a piece due then has come, but never past
                // one fragment, so a stop still comes at most one fragment late), then
                // taking everything that came, costs one. A read may then come back short; what
                // is missing comes with the next one. The server going away ends the sleep at once.
                stage = .waitForAny
                let due = UInt64(maxFrames - filled) * 1_000_000_000 / UInt64(format.sampleRate)
                if due >= Self.minimumSleepNanos {
                    waits += 1
                    connection.doze(nanoseconds: min(due + fragmentNanos / 50, fragmentNanos))
                    connection.dispatchPending()
                }
            case .waitForAny:
                // Nothing at all yet (a source running late, or one piece per fragment arriving
                // just after the sleep): wake for the first piece that comes.
                if filled > 0 { break reading }
                waits += 1
                connection.iterate(nanoseconds: 2 * fragmentNanos + 50_000_000)
            }
        }
        delivered += Int64(filled) + lost
        return CaptureRead(frames: filled, lostFramesBefore: lost)
    }

    /// Delivers the audio the source captured up to the stop: everything that has already arrived,
    /// then what is still in flight (the server sends whole fragments, and a monitor of a sink can
    /// run behind), until the frames delivered reach the wall time from the first read to the
    /// first drain; a piece that arrives later and crosses that point is cut there. The stop is
    /// when the device thread acts on it, after the read in progress (at most one fragment after
    /// the request). Returns 0 frames when the take is complete.
    /// - Thread: the device thread. Blocks at most ``drainLimitNanos`` (3 s) over all calls.
    func drain(into buffer: UnsafeMutableRawPointer, maxFrames: Int) throws -> CaptureRead {
        guard let stream, started else { return CaptureRead(frames: 0) }
        let now = PulseConnection.now()
        if drainTarget == nil {
            // Never cut audio that is already here: a source whose clock runs fast against this
            // machine's has delivered more than the wall time by the stop, and all of it came before.
            let readable = pa_stream_readable_size(stream)
            let arrived = readable > 0 ? Int64(max(0, readable - fragmentOffset) / bytesPerFrame) : 0
            let wall = Int64((now &- startNanos) / 1_000) * Int64(format.sampleRate) / 1_000_000
            drainTarget = max(wall, delivered + arrived)
            drainDeadline = now + Self.drainLimitNanos
        }
        let target = drainTarget!
        var lost: Int64 = 0
        while delivered < target {
            guard connection.streamIsGood(stream) else { return CaptureRead(frames: 0) }
            let wanted = Int(min(Int64(maxFrames), target - delivered))
            let frames = take(stream, into: buffer, maxFrames: wanted, lost: &lost, holeAllowed: true).frames
            if frames > 0 || lost > 0 {
                // A hole comes before the frames copied after it; whatever reaches past the stop is cut.
                let remaining = target - delivered
                let keptLost = min(lost, remaining)
                let keptFrames = Int(min(Int64(frames), remaining - keptLost))
                holeFrames -= lost - keptLost
                delivered += Int64(keptFrames) + keptLost
                return CaptureRead(frames: keptFrames, lostFramesBefore: keptLost)
            }
            guard PulseConnection.now() < drainDeadline else { break }
            connection.iterate(nanoseconds: 2 * fragmentNanos)
        }
        return CaptureRead(frames: 0)
    }

    /// Copies as much as is readable, up to `maxFrames`, across fragments. Holes are
    /// skipped and added to `lost` only before the first frame copied (`holeAllowed`) — a hole
    /// after copied frames belongs to the next read, so it is left in place and reported by
    /// `stoppedAtHole`.
    private func take(_ stream: OpaquePointer, into buffer: UnsafeMutableRawPointer, maxFrames: Int,
                      lost: inout Int64, holeAllowed: Bool) -> (frames: Int, stoppedAtHole: Bool) {
        var copied = 0
        while copied < maxFrames {
            var data: UnsafeRawPointer?
            var length = 0
            guard pa_stream_peek(stream, &data, &length) == 0, length > 0 else { break }
            guard let data else {
                if copied > 0 || !holeAllowed { return (copied, true) }
                let frames = Int64(length / bytesPerFrame)
                lost += frames
                holes += 1
                holeFrames += frames
                pa_stream_drop(stream)
                fragmentOffset = 0
                continue
            }
            let available = length - fragmentOffset
            let bytes = min(available / bytesPerFrame, maxFrames - copied) * bytesPerFrame
            guard bytes > 0 else {
                // A partial frame cannot be delivered; PulseAudio does not produce these.
                pa_stream_drop(stream)
                fragmentOffset = 0
                continue
            }
            (buffer + copied * bytesPerFrame).copyMemory(from: data + fragmentOffset, byteCount: bytes)
            copied += bytes / bytesPerFrame
            fragmentOffset += bytes
            if length - fragmentOffset < bytesPerFrame {
                pa_stream_drop(stream)
                fragmentOffset = 0
            }
        }
        return (copied, false)
    }

    private func uncork(_ stream: OpaquePointer) {
        started = true
        startNanos = PulseConnection.now()
        if let op = pa_stream_cork(stream, 0, nil, nil) {
            pa_operation_unref(op)
        }
    }

    /// Disconnects the stream and the context and frees the main loop.
    /// - Thread: the device thread. Never blocks.
    func close() {
        guard let stream else { return }
        self.stream = nil
        connection.closeStream(stream)
        connection.close()
        if holes > 0 || overflows > 0 {
            logger.warning("PulseAudio capture: \(holes) hole(s) covering \(holeFrames) frames (filled with silence), \(overflows) overflow notification(s).")
        }
    }

    deinit { close() }
}
#endif
