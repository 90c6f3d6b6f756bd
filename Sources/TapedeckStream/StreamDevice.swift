public import TapedeckCore
import Foundation
import Logging
import Synchronization
import TapedeckStreamFormats

/// An open network stream: the connection, the decoder, and the thread that decodes what
/// arrives and pushes it into the `DeviceRing` (the ring stream's callback side), converted to
/// the take's channels and rate. The thread also keeps the liveness rule: no decoded audio for
/// `stall-after` closes the ring (a lost device), and so does the stream ending or failing.
///
/// Not real time: when the recorder is behind (a slow disk) the thread waits for room, which
/// slows the connection (the server waits on TCP), for up to 2 s; what
/// still does not fit is counted as lost where it was, never dropped silently.
///
/// Thread: the device thread that opened it, for every member.
public final class StreamDevice: RingDevice {
    /// Frames decoded per push.
    static let chunkFrames = 4096

    public let summary: String
    public let deviceName: String?
    public var cycleNanos: UInt64 { UInt64(Self.chunkFrames) * 1_000_000_000 / UInt64(decoded.sampleRate) }
    public var isRealTime: Bool { false }
    public var stallNanos: UInt64 { limits.stallNanos + 1_000_000_000 }
    /// The stream's title changes (ICY `StreamTitle`, Ogg comments of a new link), as markers.
    public let cues: CaptureCues? = CaptureCues()

    private let shown: String
    private let connection: HTTPStreamConnection
    private let decoder: any StreamDecoder
    private let decoded: AudioFormat
    private let limits: StreamLimits
    private let worker: Worker
    private let thread: Thread

    /// Connects to `source`, learns its format from its first bytes, makes the ring for the
    /// take's format and starts decoding into it. Blocks for the connection and the header.
    static func connect(_ source: StreamSource, limits: StreamLimits, requested: AudioFormat, chosen: FormatChoice,
                        resampler: (any SampleRateConversion)?, logger: Logger,
                        makeRing: (AudioFormat) throws -> DeviceRing) throws -> (device: StreamDevice, format: AudioFormat) {
        let connection = HTTPStreamConnection(connectTimeout: limits.stall)
        var decoder: (any StreamDecoder)?
        do {
            let head = try connection.open(source, timeout: limits.stall)
            guard (200..<300).contains(head.status) else {
                throw StreamEnd(reason: Self.refusal(head.status))
            }
            let bytes = StreamBytes(connection.queue, stallNanos: limits.stallNanos)
            let opened = try StreamDecoders.open(bytes, contentType: head.contentType)
            decoder = opened
            bytes.lastAudio = DispatchTime.now().uptimeNanoseconds
            var format = AudioFormat(sampleRate: chosen.contains(.sampleRate) ? requested.sampleRate : opened.sampleRate,
                                     channels: chosen.contains(.channels) ? requested.channels : opened.channels,
                                     sampleFormat: chosen.contains(.sampleFormat) ? requested.sampleFormat : opened.nativeFormat ?? requested.sampleFormat)
            if format.channels == requested.channels { format.layout = requested.layout }
            guard AudioFormat.sampleRateRange.contains(format.sampleRate), AudioFormat.channelRange.contains(format.channels) else {
                throw TapedeckError(.unsupportedFormat, "The stream \(source.shown) is \(opened.sampleRate) Hz with \(opened.channels) channels, which Tapedeck does not record. Choose a rate and channels to convert to (-r 48000 -c 2).")
            }
            var converter: (any SampleRateConverter)?
            if format.sampleRate != opened.sampleRate {
                guard let resampler else {
                    throw TapedeckError(.unsupportedFormat, "The stream \(source.shown) is \(opened.sampleRate) Hz and this build has no rate conversion for \(format.sampleRate) Hz. Record at the stream's rate (leave out -r and format.sample-rate).")
                }
                converter = try resampler.makeConverter(from: opened.sampleRate, to: format.sampleRate, channels: format.channels)
            }
            let ring = try makeRing(format)
            let device = StreamDevice(source: source, head: head, connection: connection, decoder: opened, bytes: bytes,
                                      format: format, converter: converter, limits: limits, ring: ring)
            return (device, format)
        } catch let end as StreamEnd {
            decoder?.close()
            connection.close()
            throw TapedeckError(.deviceUnavailable, "The stream \(source.shown) \(end.reason). Check the URL (or -D), that the server is up and the mount is live; --resume waits for it.")
        } catch {
            decoder?.close()
            connection.close()
            throw error
        }
    }

    private init(source: StreamSource, head: HTTPStreamConnection.Head, connection: HTTPStreamConnection, decoder: any StreamDecoder,
                 bytes: StreamBytes, format: AudioFormat, converter: (any SampleRateConverter)?, limits: StreamLimits, ring: DeviceRing) {
        shown = source.shown
        self.connection = connection
        self.decoder = decoder
        self.limits = limits
        decoded = AudioFormat(sampleRate: decoder.sampleRate, channels: decoder.channels, sampleFormat: .f32)
        let station = head.name.map { "; station \"\($0)\"" } ?? ""
        let conversion = decoded.sampleRate == format.sampleRate && decoded.channels == format.channels
            ? "" : ", converted to \(format.sampleRate) Hz \(format.channels) ch"
        summary = "Stream \(source.shown): \(decoder.codec), \(decoder.sampleRate) Hz, \(decoder.channels) ch\(conversion)\(station)"
        deviceName = source.shown
        let worker = Worker(ring: ring, decoder: decoder, bytes: bytes, connection: connection, format: format, converter: converter,
                            cues: cues!)
        self.worker = worker
        thread = Thread { worker.run() }
        thread.name = "tapedeck-stream"
        thread.start()
    }

    static func refusal(_ status: Int) -> String {
        switch status {
        case 401, 403: "refused the request (HTTP \(status)): it needs a user and password (in the URL, http://USER@host/…, with the password from password-env)"
        case 404: "has no such mount (HTTP 404)"
        default: "answered HTTP \(status) instead of audio"
        }
    }

    public func lostError(_ doing: String) -> TapedeckError {
        TapedeckError(.deviceLost, "The stream \(shown) \(worker.endReason ?? "ended") while \(doing).")
    }

    public func stallError(_ doing: String) -> TapedeckError {
        TapedeckError(.deviceLost, "The stream \(shown) stalled while \(doing): no audio for \(StreamBytes.seconds(limits.stallNanos)).")
    }

    public func finishPlaying() throws {}

    public func closingReport(lostFrames: UInt64) -> String? {
        lostFrames == 0 ? nil : "The stream \(shown) lost \(lostFrames) frames the recorder had no room for (shown as gaps)."
    }

    /// Stops the decoding thread (ending the connection) and waits for it. Blocks briefly.
    public func close() {
        worker.stop()
        connection.close()
        worker.finished.wait()
        decoder.close()
    }
}

/// The decoding thread's work: decode, convert, push, watch.
/// Thread: its own thread, but ``stop()`` and ``endReason`` (any thread).
private final class Worker: @unchecked Sendable {
    let decoder: any StreamDecoder
    let bytes: StreamBytes
    let connection: HTTPStreamConnection
    let pusher: FramePusher
    let cues: CaptureCues
    let finished = DispatchSemaphore(value: 0)
    private let stopped = Atomic<Bool>(false)
    private let reason = Mutex<String?>(nil)
    /// ICY titles not yet placed (their bytes not yet read by the decoder).
    private var titles: [IcyDemuxer.Title] = []
    private var ring: DeviceRing { pusher.ring }

    init(ring: DeviceRing, decoder: any StreamDecoder, bytes: StreamBytes, connection: HTTPStreamConnection, format: AudioFormat,
         converter: (any SampleRateConverter)?, cues: CaptureCues) {
        self.decoder = decoder
        self.bytes = bytes
        self.connection = connection
        self.cues = cues
        pusher = FramePusher(ring: ring, inputChannels: decoder.channels, inputRate: decoder.sampleRate, format: format,
                             converter: converter, waitsForRoom: true, chunk: StreamDevice.chunkFrames)
    }

    var endReason: String? { reason.withLock { $0 } }
    func stop() { stopped.store(true, ordering: .releasing) }

    func run() {
        defer { finished.signal() }
        // Nothing is decoded before the recorder starts reading: the connection waits meanwhile.
        while !ring.isStarted && !ring.isClosed && !stopped.load(ordering: .acquiring) { usleep(2_000) }
        let chunk = StreamDevice.chunkFrames
        var input = [Float](repeating: 0, count: chunk * decoder.channels)
        var decodedTotal: Int64 = 0
        while !stopped.load(ordering: .acquiring) {
            let n = input.withUnsafeMutableBufferPointer { decoder.decode(into: $0.baseAddress!, maxFrames: chunk) }
            if stopped.load(ordering: .acquiring) { break }
            guard n > 0 else { return end(bytes.end?.reason ?? "ended") }
            bytes.lastAudio = DispatchTime.now().uptimeNanoseconds
            placeTitles(decodedBefore: decodedTotal)
            decodedTotal += Int64(n)
            do {
                try input.withUnsafeBufferPointer {
                    try pusher.push($0.baseAddress!, frames: n) {
                        // Waiting on the recorder is not a stall.
                        bytes.lastAudio = DispatchTime.now().uptimeNanoseconds
                        return stopped.load(ordering: .acquiring)
                    }
                }
            } catch {
                return end("could not be converted: \(error)")
            }
        }
    }

    private func end(_ why: String) {
        reason.withLock { $0 = why }
        ring.close()
    }

    /// Posts the titles that begin in the audio just decoded, which goes into the ring from
    /// ``FramePusher/pushed``: a new Ogg link's there; an ICY title at its byte offset, as a frame
    /// estimated from the bytes read per frame so far (the decoder reads a little ahead, so once
    /// it has read past the title's offset, the title is placed within the chunk).
    private func placeTitles(decodedBefore: Int64) {
        let pushed = pusher.pushed
        if let title = decoder.takeTitle() { cues.post(CaptureCues.Cue(frame: pushed, label: title)) }
        titles += connection.takeTitles()
        while let first = titles.first, first.offset <= bytes.consumed {
            titles.removeFirst()
            guard let label = StreamTitle.label(first.text) else { continue }
            let perByte = bytes.consumed > 0 ? Double(decodedBefore) / Double(bytes.consumed) : 0
            let frame = min(pushed, Int64((Double(first.offset) * perByte * pusher.rateRatio).rounded()))
            cues.post(CaptureCues.Cue(frame: max(0, frame), label: label))
        }
    }
}
