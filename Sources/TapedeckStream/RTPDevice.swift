import Dispatch
import Foundation
import NIOCore
import NIOPosix
import Synchronization
public import TapedeckCore
import TapedeckStreamFormats

/// An open RTP audio stream (AES67, or any sender of L16/L24): a UDP socket on SwiftNIO (a
/// multicast group joined on the chosen interface), a jitter buffer that puts
/// packets back in order and gives up on a missing one after `jitter-buffer`, and the ring.
/// Packets run on the socket's event loop, which is the ring's one producer: a lost packet is a
/// hole where it was (from the RTP timestamps), counted; no packet for `stall-after` closes the
/// ring (a lost device). Real time: a full ring drops and counts, as a sound card's does.
///
/// Thread: the device thread that opened it, for every member.
public final class RTPDevice: RingDevice {
    public let summary: String
    public let deviceName: String?
    public let cycleNanos: UInt64
    public var stallNanos: UInt64 { receiver.stallNanos + 1_000_000_000 }
    /// The time of day of the first frame, by the RTP timestamps when the session names their clock.
    public var cues: CaptureCues? { receiver.cues }
    /// Whether this machine's clock disagrees with the clock the session names (take times are the arrival).
    var clockDisagrees: Bool { receiver.clockDisagrees }

    private let shown: String
    private let channel: any Channel
    private let receiver: RTPReceiver

    /// Binds, joins the group, waits for the first packet (at most `stall-after`) and starts
    /// filling `ring`. Blocks for that. - Throws: `.deviceUnavailable` naming what to check.
    init(session: SessionDescription, interface: String, jitterNanos: UInt64, stallNanos: UInt64, format: AudioFormat,
         converter: (any SampleRateConverter)?, ring: DeviceRing) throws {
        shown = "rtp://\(session.address):\(session.port)"
        let receiver = RTPReceiver(session: session, ring: ring, format: format, converter: converter,
                                   jitterNanos: jitterNanos, stallNanos: stallNanos)
        self.receiver = receiver
        let group = try? SocketAddress(ipAddress: session.address, port: session.port)
        let multicast = group.map(Self.isMulticast) ?? false
        do {
            let bootstrap = DatagramBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .channelOption(.socketOption(.so_reuseaddr), value: 1)
                .channelOption(.socketOption(.so_rcvbuf), value: 4 << 20)
                .channelOption(.recvAllocator, value: FixedSizeRecvByteBufferAllocator(capacity: 9216))
                .channelInitializer { $0.pipeline.addHandler(receiver) }
            channel = try bootstrap.bind(host: multicast ? "0.0.0.0" : session.address, port: session.port).wait()
        } catch {
            throw TapedeckError(.deviceUnavailable, "Could not listen for \(shown): \(error). Check the address (-D rtp://ADDRESS:PORT or the SDP file) names this machine or a multicast group, and that no other program holds the port.")
        }
        if multicast, let group {
            do {
                let device = try Self.device(named: interface)
                guard let multicastChannel = channel as? any MulticastChannel else { throw ChannelError.operationUnsupported }
                try multicastChannel.joinGroup(group, device: device).wait()
            } catch let error as TapedeckError {
                _ = try? channel.close().wait()
                throw error
            } catch {
                _ = try? channel.close().wait()
                throw TapedeckError(.deviceUnavailable, "Could not join the multicast group \(session.address)\(interface.isEmpty ? "" : " on \(interface)"): \(error). Name the interface the stream arrives on (capture.rtp.interface), and check it allows multicast (ip link show).")
            }
        }
        let loop = channel.eventLoop
        loop.execute { receiver.startTicking(on: loop) }
        guard receiver.waitForFirstPacket(nanoseconds: stallNanos) else {
            _ = try? channel.close().wait()
            throw TapedeckError(.deviceUnavailable, "No RTP packets of \(session.encoding) (payload type \(session.payloadType)) arrived at \(shown) within \(StreamBytes.seconds(stallNanos)). Check that the sender is on, the address and port\(multicast ? ", the interface (capture.rtp.interface) and that the network passes multicast" : ""); --resume waits for it.")
        }
        let clock = receiver.clockNote
        let packets = session.packetMilliseconds.map { ", \(String(format: "%g", $0)) ms packets" } ?? ""
        let sender = session.source.map { " from \($0)" } ?? ""
        summary = "RTP \(shown)\(sender): \(session.encoding), payload type \(session.payloadType)\(packets)\(session.name.isEmpty ? "" : " (\"\(session.name)\")"); \(clock)"
        deviceName = session.name.isEmpty ? shown : "\(shown) (\(session.name))"
        cycleNanos = max(1_000_000, jitterNanos / 2)
    }

    static func isMulticast(_ address: SocketAddress) -> Bool {
        guard let ip = address.ipAddress else { return false }
        if ip.contains(":") { return ip.lowercased().hasPrefix("ff") }
        return (224...239).contains(Int(ip.split(separator: ".").first ?? "") ?? 0)
    }

    /// The network device called `name`, or nil (the system's choice) when `name` is empty.
    static func device(named name: String) throws -> NIONetworkDevice? {
        guard !name.isEmpty else { return nil }
        let devices = try System.enumerateDevices()
        guard let device = devices.first(where: { $0.name == name && $0.address?.protocol == .inet }) ?? devices.first(where: { $0.name == name }) else {
            let names = Set(devices.map(\.name)).sorted().joined(separator: ", ")
            throw TapedeckError(.deviceUnavailable, "No network interface is called \(name). This machine has: \(names). Set capture.rtp.interface to one of them.")
        }
        return device
    }

    public func lostError(_ doing: String) -> TapedeckError {
        TapedeckError(.deviceLost, "The RTP stream \(shown) \(receiver.endReason ?? "ended") while \(doing).")
    }

    public func stallError(_ doing: String) -> TapedeckError {
        TapedeckError(.deviceLost, "The RTP stream \(shown) stalled while \(doing): no packets for \(StreamBytes.seconds(receiver.stallNanos)).")
    }

    public func finishPlaying() throws {}

    public func closingReport(lostFrames: UInt64) -> String? {
        let counts = receiver.counts
        guard lostFrames > 0 || counts.late > 0 || counts.restarts > 0 else { return nil }
        return "The RTP stream \(shown): \(counts.lost) packets lost (\(lostFrames) frames filled with silence where they were), \(counts.late) came too late for the jitter buffer\(counts.restarts > 0 ? ", the sender started over \(counts.restarts) times" : "")."
    }

    /// Leaves the group and closes the socket. Blocks briefly.
    public func close() {
        _ = try? channel.close().wait()
    }
}

/// The socket's handler: every packet through the jitter buffer into the ring, and a timer
/// that gives up on missing packets and watches for a stall. Runs on the channel's event loop,
/// but for ``waitForFirstPacket(nanoseconds:)``, ``endReason`` and ``counts`` (any thread).
final class RTPReceiver: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>

    let stallNanos: UInt64
    private let session: SessionDescription
    private let jitterNanos: UInt64
    private let pusher: FramePusher
    private let sample: PCMSample
    private var reorder: RTPReorder
    private var scratch: [Float]
    private var ssrc: UInt32?
    private var lastPacket = DispatchTime.now().uptimeNanoseconds
    private var tick: RepeatedTask?
    private let first = DispatchSemaphore(value: 0)
    private let clock: RTPClock?
    /// Where the take's time of day comes from: the first frame's, posted when the take's first packet came.
    let cues = CaptureCues()
    private var clockPosted = false
    private let note = Mutex<(text: String, disagrees: Bool)?>(nil)
    private let state = Mutex<(seenFirst: Bool, reason: String?, lost: Int, late: Int, restarts: Int)>((false, nil, 0, 0, 0))
    private var ring: DeviceRing { pusher.ring }

    init(session: SessionDescription, ring: DeviceRing, format: AudioFormat, converter: (any SampleRateConverter)?,
         jitterNanos: UInt64, stallNanos: UInt64) {
        self.session = session
        self.jitterNanos = jitterNanos
        self.stallNanos = stallNanos
        sample = PCMSample(bits: session.encoding.bits, float: false, bigEndian: true)!
        clock = RTPClock(session)
        reorder = RTPReorder(delayNanos: jitterNanos, bytesPerFrame: session.encoding.bytesPerFrame, sampleRate: session.encoding.sampleRate)
        scratch = [Float](repeating: 0, count: 8192 * session.encoding.channels)
        pusher = FramePusher(ring: ring, inputChannels: session.encoding.channels, inputRate: session.encoding.sampleRate, format: format,
                             converter: converter, waitsForRoom: false, chunk: 2048)
    }

    var endReason: String? { state.withLock { $0.reason } }

    /// What the log says of the stream's clock, from the first packet: the reference the session
    /// names and whether this machine's clock agrees with its timestamps.
    var clockNote: String { note.withLock { $0?.text } ?? "" }

    /// Whether the session names a clock this machine's clock does not follow (take times are
    /// then the arrival): worth a warning, not only the log at `-v`.
    var clockDisagrees: Bool { note.withLock { $0?.disagrees } ?? false }

    private func clockNote(for timestamp: UInt32, arrivedAt arrival: Date) -> (text: String, disagrees: Bool) {
        let named = session.clockReference.map { "timestamps on \($0)\(session.mediaClockOffset.map { ", mediaclk direct=\($0)" } ?? "")" }
            ?? "no reference clock in the session"
        guard let clock else {
            return (named + "; take times are the packets' arrival" + (RTPClock.unreadReference(session).map { " (\($0))" } ?? ""), false)
        }
        guard let first = clock.date(of: timestamp, arrivedAt: arrival) else {
            return (named + "; this machine's clock does not follow the sender's \(clock.reference.rawValue) clock (more than \(Int(RTPClock.agreementSeconds)) s apart), so take times are the packets' arrival (synchronise this machine to the same clock: ptp4l and phc2sys, or chrony)", true)
        }
        let ms = String(format: "%.1f", first.before * 1000)
        return (named + "; take times are the RTP timestamps on the \(clock.reference.rawValue) clock (the first packet's audio is \(ms) ms older than its arrival)", false)
    }

    var counts: (lost: Int, late: Int, restarts: Int) { state.withLock { ($0.lost, $0.late, $0.restarts) } }

    func waitForFirstPacket(nanoseconds: UInt64) -> Bool {
        first.wait(timeout: .now() + .nanoseconds(Int(nanoseconds))) == .success
    }

    func startTicking(on loop: any EventLoop) {
        let every = TimeAmount.nanoseconds(Int64(max(1_000_000, jitterNanos / 2)))
        tick = loop.scheduleRepeatedTask(initialDelay: every, delay: every) { [self] _ in
            let now = DispatchTime.now().uptimeNanoseconds
            guard ring.isStarted, !ring.isClosed else {
                lastPacket = now
                return
            }
            hand(reorder.tick(now: now))
            if now - lastPacket > stallNanos {
                end("stalled: no packets for \(StreamBytes.seconds(stallNanos))")
            }
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let envelope = unwrapInboundIn(data)
        let now = DispatchTime.now().uptimeNanoseconds
        let header = envelope.data.withUnsafeReadableBytes { RTPHeader($0) }
        guard let header, header.payloadType == session.payloadType else { return }
        let seenFirst = state.withLock { s -> Bool in
            defer { s.seenFirst = true }
            return s.seenFirst
        }
        if !seenFirst {
            note.withLock { $0 = clockNote(for: header.timestamp, arrivedAt: Date()) }
            first.signal()
        }
        guard ring.isStarted, !ring.isClosed else { return }  // before the take, packets are not kept
        lastPacket = now
        if !clockPosted {
            // The take's first frame is this packet's first sample: its time by the timestamps'
            // clock when they follow one this machine's clock agrees with, else its arrival.
            let arrival = Date()
            cues.post(CaptureCues.Clock(frame: 0, date: clock?.date(of: header.timestamp, arrivedAt: arrival)?.date ?? arrival))
            clockPosted = true
        }
        if let known = ssrc, known != header.ssrc {
            hand(reorder.flushAll())  // another sender: what is held goes first
        }
        ssrc = header.ssrc
        let payload = envelope.data.withUnsafeReadableBytes { Array($0[header.payload]) }
        hand(reorder.arrive(header, payload: payload, now: now))
    }

    /// Pushes what the jitter buffer released, in order.
    private func hand(_ releases: [RTPReorder.Release]) {
        guard !releases.isEmpty else { return }
        for release in releases {
            switch release {
            case .lost(let frames): pusher.lose(frames)
            case .audio(let bytes):
                let frames = bytes.count / session.encoding.bytesPerFrame
                if scratch.count < frames * session.encoding.channels { scratch = [Float](repeating: 0, count: frames * session.encoding.channels) }
                bytes.withUnsafeBytes { b in
                    scratch.withUnsafeMutableBufferPointer { sample.convert(b.baseAddress!, count: frames * session.encoding.channels, into: $0.baseAddress!) }
                }
                do {
                    try scratch.withUnsafeBufferPointer { try pusher.push($0.baseAddress!, frames: frames) }
                } catch {
                    end("could not be converted: \(error)")
                    return
                }
            }
        }
        state.withLock {
            $0.lost = reorder.lostPackets
            $0.late = reorder.latePackets
            $0.restarts = reorder.restarts
        }
    }

    private func end(_ why: String) {
        state.withLock { if $0.reason == nil { $0.reason = why } }
        tick?.cancel()
        ring.close()
    }

    func channelInactive(context: ChannelHandlerContext) {
        tick?.cancel()
    }
}
