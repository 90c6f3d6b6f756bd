public import TapedeckCore
import Foundation
import Synchronization
import TapedeckStreamFormats

/// `capture.backend: stream`: an Icecast, Shoutcast or plain HTTP audio stream recorded as a
/// device. `device` (or `-D`) is the URL; the stream's own rate, channels and (for lossless
/// codecs) depth make the take's format unless the user chose them. No audio for `stall-after`
/// is a lost device: with `--resume` the run waits, reconnecting with back-off, and goes on in a
/// new take. Detection never picks it: a stream is only recorded when named.
///
/// A value holding settings and the reconnection back-off. - Thread: any; ``open(requested:chosen:makeRing:)``
/// on the device thread, blocking while it connects.
public struct StreamBackend: RingBackend {
    public typealias Device = StreamDevice
    public static let name = "stream"
    public static let summaries = (capture: "Icecast, Shoutcast or HTTP audio streams (Ogg Opus, Ogg Vorbis, Ogg FLAC, FLAC, MP3, WAV), decoded in-process",
                                   playback: "")
    public static let deviceHelp = (capture: "The stream's URL, http:// or https:// (a user and password in it are sent, never shown; see password-env).",
                                    playback: "")
    static let stallAfter = Setting<String>("stall-after", default: "5s",
        help: "No audio for this long (no bytes, or none that decode) is a lost stream: the take ends interrupted, and with --resume recording goes on when it is back.")
    static let reconnect = Setting<String>("reconnect", default: "1s..30s",
        help: "While a lost stream is awaited (--resume), the wait between tries: from the first to the second, doubling.")
    static let passwordEnv = Setting<String>("password-env", default: "",
        help: "The environment variable holding the stream's password (the user is the URL's, http://USER@host/…); never logged.")
    public static let settings = [stallAfter.declaration, reconnect.declaration, passwordEnv.declaration]
    /// The decoders' libraries, for `tapedeck --version`.
    public static var library: String { "libopusfile, libvorbisfile, libFLAC, libmpg123 (network streams)" }

    public let section: DeviceSection
    private let pacer = ReconnectPacer()

    public init(_ section: DeviceSection) { self.section = section }

    /// A stream has no device list: its URL is the device. Never blocks.
    public func devices() throws -> [AudioDevice] {
        section.device.isEmpty ? [] : [AudioDevice(name: (try? source().shown) ?? Credentials.hidden(in: section.device), description: "the configured stream",
                                                   canCapture: true, canPlay: false, isDefault: true)]
    }

    /// Opens the stream and records it in `format` exactly (converting to it).
    public func open(format: AudioFormat, ring: DeviceRing) throws -> StreamDevice {
        try open(requested: format, chosen: .all) { _ in ring }.device
    }

    /// Connects, reads the stream's header, and opens in the stream's own format where `chosen`
    /// leaves it open. Blocks up to `stall-after` for the answer and again for audio.
    public func open(requested: AudioFormat, chosen: FormatChoice,
                     makeRing: (AudioFormat) throws -> DeviceRing) throws -> (device: StreamDevice, format: AudioFormat) {
        let limits = try self.limits()
        let source = try self.source()
        try pacer.check(source.shown)
        do {
            let opened = try StreamDevice.connect(source, limits: limits, requested: requested, chosen: chosen,
                                                  resampler: section.resampler, logger: section.logger, makeRing: makeRing)
            pacer.succeeded()
            return opened
        } catch {
            pacer.failed(limits.reconnect)
            throw error
        }
    }

    private func source() throws -> StreamSource {
        let variable = section[Self.passwordEnv]
        var password: String?
        if !variable.isEmpty {
            guard let value = ProcessInfo.processInfo.environment[variable] else {
                throw TapedeckError(.configuration, "\(section.key(Self.passwordEnv)) names \(variable), which is not set. Export it (export \(variable)=…) or remove \(section.key(Self.passwordEnv)).")
            }
            password = value
        }
        return try StreamSource(section.device, password: password, key: section.deviceKey)
    }

    private func limits() throws -> StreamLimits {
        let stall = try section.seconds(Self.stallAfter)
        let text = section[Self.reconnect]
        let parts = text.components(separatedBy: "..")
        guard parts.count == 2, let low = try? DurationText.seconds(parts[0], flag: ""), let high = try? DurationText.seconds(parts[1], flag: ""),
              low <= high else {
            throw TapedeckError(.configuration, "\(section.key(Self.reconnect)) \(text): give the first and the longest wait as FIRST..LONGEST, for example 1s..30s.")
        }
        return StreamLimits(stallNanos: UInt64(stall * 1e9), reconnect: low...high)
    }
}

/// The stream's time limits, read from its settings. A plain value.
struct StreamLimits: Sendable {
    /// No audio for this long (from connecting: no answer, no bytes, nothing that decodes) is a lost stream.
    var stallNanos: UInt64
    var reconnect: ClosedRange<Double>
    var stall: Duration { .nanoseconds(Int64(stallNanos)) }
}

/// The back-off between tries to reach a lost stream. The recorder asks every second; a try
/// before the back-off is over is refused at once, without connecting. Any thread; never blocks.
final class ReconnectPacer: Sendable {
    private let state = Mutex<(delay: Double, next: UInt64)>((0, 0))

    func check(_ shown: String) throws {
        let (delay, next) = state.withLock { ($0.delay, $0.next) }
        let now = DispatchTime.now().uptimeNanoseconds
        if now < next {
            throw TapedeckError(.deviceUnavailable, "The stream \(shown) is not back; the next try is in \(Int((Double(next - now) / 1e9).rounded(.up))) s (after \(Int(delay)) s).")
        }
    }

    func failed(_ range: ClosedRange<Double>) {
        state.withLock {
            $0.delay = $0.delay == 0 ? range.lowerBound : min(range.upperBound, $0.delay * 2)
            $0.next = DispatchTime.now().uptimeNanoseconds + UInt64($0.delay * 1e9)
        }
    }

    func succeeded() { state.withLock { $0 = (0, 0) } }
}
