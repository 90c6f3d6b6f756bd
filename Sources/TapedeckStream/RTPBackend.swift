public import TapedeckCore
import Foundation
import TapedeckStreamFormats

/// `capture.backend: rtp`: an RTP audio stream (AES67 and other senders of L16/L24) recorded as
/// a device: from an SDP file as AES67 senders publish them (`sdp`), or an address with its
/// encoding (`-D rtp://239.69.1.1:5004`, `encoding: L24/48000/2`). `tapedeck devices --backend
/// rtp` lists the streams announced by SAP. Detection never picks it.
///
/// A value holding settings. - Thread: any; ``open(requested:chosen:makeRing:)`` on the device
/// thread, blocking until the first packet; ``devices()`` blocks while it listens for announcements.
public struct RTPBackend: RingBackend {
    public typealias Device = RTPDevice
    public static let name = "rtp"
    public static let summaries = (capture: "RTP audio streams: AES67 and other L16/L24 senders, by SDP file or address (SAP announcements listed)",
                                   playback: "")
    public static let deviceHelp = (capture: "The stream's address, rtp://ADDRESS:PORT (a multicast group or this machine's address); empty with sdp.",
                                    playback: "")
    static let sdp = Setting<String>.path("sdp",
        help: "A session description (SDP) file of the stream, as AES67 senders publish them: address, port, payload and encoding from it.")
    static let encoding = Setting<String>("encoding", default: "L24/48000/2",
        help: "Without sdp: the payload, L16 or L24/RATE/CHANNELS.")
    static let payloadType = Setting<Int>("payload-type", range: 0...127, default: 97, help: "Without sdp: the RTP payload type of the audio.")
    static let interface = Setting<String>("interface", default: "",
        help: "The network interface a multicast stream arrives on (e.g. eth1); empty for the system's choice.")
    static let jitterBuffer = Setting<String>("jitter-buffer", default: "20ms",
        help: "How long a missing packet is waited for before its frames become a hole (filled with silence, counted).")
    static let stallAfter = Setting<String>("stall-after", default: "5s",
        help: "No packets for this long is a lost stream: the take ends interrupted, and with --resume recording goes on when it is back.")
    static let sap = Setting<String>("sap", default: "239.255.255.255:9875",
        help: "Where devices listens for SAP announcements (AES67's discovery): ADDRESS:PORT.")
    public static let settings = [sdp.declaration, encoding.declaration, payloadType.declaration, interface.declaration,
                                  jitterBuffer.declaration, stallAfter.declaration, sap.declaration]

    public let section: DeviceSection

    public init(_ section: DeviceSection) { self.section = section }

    /// `capture.backend: rtp`; listed by `tapedeck devices` only when named (SAP discovery waits
    /// on the network). - Thread: any; `make` never blocks.
    public static var capture: CapturePlugin {
        var plugin = CapturePlugin.ring(Self.self, name: name, summary: summaries.capture)
        plugin.listsOnlyWhenNamed = true
        return plugin
    }

    /// The configured stream (if one is), then the streams SAP announces within
    /// two seconds. Blocks that long.
    public func devices() throws -> [AudioDevice] {
        var found: [AudioDevice] = []
        if let session = try? session(), !section.device.isEmpty || !section[Self.sdp].isEmpty {
            found.append(AudioDevice(name: "rtp://\(session.address):\(session.port)", description: "the configured stream: \(session.encoding)",
                                     canCapture: true, canPlay: false, isDefault: true))
        }
        let announced = try SAPListener(section[Self.sap], interface: section[Self.interface], key: section.key(Self.sap)).listen()
        return found + announced.filter { a in !found.contains { $0.name == a.name } }
    }

    public func open(format: AudioFormat, ring: DeviceRing) throws -> RTPDevice {
        try open(requested: format, chosen: .all) { _ in ring }.device
    }

    /// Listens for the stream and waits for its first packet (at most `stall-after`).
    public func open(requested: AudioFormat, chosen: FormatChoice,
                     makeRing: (AudioFormat) throws -> DeviceRing) throws -> (device: RTPDevice, format: AudioFormat) {
        let session = try self.session()
        let jitter = try section.seconds(Self.jitterBuffer)
        let stall = try section.seconds(Self.stallAfter)
        let native: SampleFormat = session.encoding.bits == 16 ? .s16 : .s24
        var format = AudioFormat(sampleRate: chosen.contains(.sampleRate) ? requested.sampleRate : session.encoding.sampleRate,
                                 channels: chosen.contains(.channels) ? requested.channels : session.encoding.channels,
                                 sampleFormat: chosen.contains(.sampleFormat) ? requested.sampleFormat : native)
        if format.channels == requested.channels { format.layout = requested.layout }
        var converter: (any SampleRateConverter)?
        if format.sampleRate != session.encoding.sampleRate {
            guard let resampler = section.resampler else {
                throw TapedeckError(.unsupportedFormat, "The stream is \(session.encoding.sampleRate) Hz and this build has no rate conversion. Record at the stream's rate (leave out -r).")
            }
            converter = try resampler.makeConverter(from: session.encoding.sampleRate, to: format.sampleRate, channels: format.channels)
        }
        let ring = try makeRing(format)
        let device = try RTPDevice(session: session, interface: section[Self.interface], jitterNanos: UInt64(jitter * 1e9),
                                   stallNanos: UInt64(stall * 1e9), format: format, converter: converter, ring: ring)
        if device.clockDisagrees {
            // Every take would be dated by arrival, not by the sender's clock: said whatever the log level.
            section.logger.warning("The RTP stream \(device.deviceName ?? section.device) names \(session.clockReference ?? "a reference clock") for its timestamps, but this machine's clock is more than \(Int(RTPClock.agreementSeconds)) s from it: takes are dated by the packets' arrival. Synchronise this machine to the same clock (ptp4l and phc2sys, or chrony).")
        }
        return (device, format)
    }

    /// The stream from the SDP file, or from `device` and the encoding settings.
    func session() throws -> SessionDescription {
        let path = section[Self.sdp]
        if !path.isEmpty {
            let text: String
            do { text = try String(contentsOfFile: path, encoding: .utf8) } catch {
                throw TapedeckError(.configuration, "\(section.key(Self.sdp)): cannot read \(path) (\((error as NSError).localizedDescription)). Name the SDP file the sender publishes.")
            }
            var session = try SessionDescription(text, path: path)
            if !section.device.isEmpty {
                let (address, port) = try Self.address(section.device, key: section.deviceKey)
                session.address = address
                session.port = port
            }
            return session
        }
        let (address, port) = try Self.address(section.device, key: section.deviceKey)
        guard let encoding = RTPEncoding(section[Self.encoding]) else {
            throw TapedeckError(.configuration, "\(section.key(Self.encoding)) \(section[Self.encoding]): give L16 or L24/RATE/CHANNELS, for example L24/48000/2.")
        }
        return SessionDescription(address: address, port: port, payloadType: section[Self.payloadType], encoding: encoding)
    }

    /// `rtp://ADDRESS:PORT` (or `ADDRESS:PORT`; `[IPv6]:PORT`; `@:PORT` for any address).
    static func address(_ text: String, key: String) throws -> (String, Int) {
        var rest = Substring(text)
        if rest.lowercased().hasPrefix("rtp://") { rest = rest.dropFirst(6) }
        if rest.hasPrefix("@") { rest = rest.dropFirst() }
        let example = "for example -D rtp://239.69.1.1:5004, or capture.rtp.sdp=FILE"
        guard let colon = rest.lastIndex(of: ":"), let port = Int(rest[rest.index(after: colon)...]), (1...65_535).contains(port) else {
            throw TapedeckError(.configuration, "\(key) \"\(text)\": name the stream's address and port (\(example)).")
        }
        var host = String(rest[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        return (host.isEmpty ? "0.0.0.0" : host, port)
    }
}
