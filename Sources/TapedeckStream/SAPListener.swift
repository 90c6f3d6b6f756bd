import Dispatch
import Foundation
import NIOCore
import NIOPosix
import Synchronization
import TapedeckCore

/// Listens for SAP announcements (RFC 2974: how AES67 senders announce their streams, an SDP in
/// each packet, to 239.255.255.255:9875) for ``listenSeconds`` and lists the audio streams
/// announced, newest first; a deletion removes its stream.
///
/// Thread: any that may block: ``listen()`` blocks for the listening.
struct SAPListener {
    static let listenSeconds = 2.0
    let address: String
    let port: Int
    let interface: String

    /// - Throws: `.configuration` for an address that is not ADDRESS:PORT, naming `key`.
    init(_ text: String, interface: String, key: String) throws {
        (address, port) = try RTPBackend.address(text, key: key)
        self.interface = interface
    }

    func listen() throws -> [AudioDevice] {
        let collected = Collected()
        let group = try SocketAddress(ipAddress: address, port: port)
        let multicast = RTPDevice.isMulticast(group)
        let channel: any Channel
        do {
            channel = try DatagramBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .channelOption(.socketOption(.so_reuseaddr), value: 1)
                .channelOption(.recvAllocator, value: FixedSizeRecvByteBufferAllocator(capacity: 65_536))
                .channelInitializer { $0.pipeline.addHandler(SAPHandler(collected)) }
                .bind(host: multicast ? "0.0.0.0" : address, port: port).wait()
            if multicast, let multicastChannel = channel as? any MulticastChannel {
                try multicastChannel.joinGroup(group, device: try RTPDevice.device(named: interface)).wait()
            }
        } catch let error as TapedeckError {
            throw error
        } catch {
            throw TapedeckError(.deviceUnavailable, "Could not listen for SAP announcements on \(address):\(port): \(error). Check the interface allows multicast (capture.rtp.interface), or name a stream with -D rtp://ADDRESS:PORT or capture.rtp.sdp.")
        }
        Thread.sleep(forTimeInterval: Self.listenSeconds)
        _ = try? channel.close().wait()
        return collected.streams.withLock { streams in
            streams.values.sorted { $0.order > $1.order }.map { entry in
                let s = entry.session
                return AudioDevice(name: "rtp://\(s.address):\(s.port)",
                                   description: "\(s.name.isEmpty ? "an RTP stream" : s.name): \(s.encoding), payload type \(s.payloadType)\(s.clockReference == nil ? "" : ", PTP clock")",
                                   canCapture: true, canPlay: false, isDefault: false,
                                   details: ["origin": entry.origin, "clock": s.clockReference ?? "none in the SDP"])
            }
        }
    }

    /// The announcements heard so far, by stream. Any thread.
    final class Collected: Sendable {
        struct Entry: Sendable {
            var session: SessionDescription
            var text: String
            var origin: String
            var order: Int
        }
        let streams = Mutex<[String: Entry]>([:])
    }

    /// One packet: its header read, its SDP parsed; what does not parse is ignored. Event loop.
    final class SAPHandler: ChannelInboundHandler, Sendable {
        typealias InboundIn = AddressedEnvelope<ByteBuffer>
        let collected: Collected
        init(_ collected: Collected) { self.collected = collected }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let envelope = unwrapInboundIn(data)
            guard let announcement = envelope.data.withUnsafeReadableBytes({ SAPListener.parse($0) }),
                  let session = try? SessionDescription(announcement.sdp, path: "SAP") else { return }
            let key = "\(session.address):\(session.port)"
            collected.streams.withLock { streams in
                if announcement.deletes {
                    streams[key] = nil
                } else {
                    streams[key] = Collected.Entry(session: session, text: announcement.sdp, origin: announcement.origin, order: streams.count)
                }
            }
        }
    }

    /// A SAP packet's SDP, whether it deletes its session, and its originating source; nil when
    /// it is not SAP version 1, is encrypted or compressed, or carries something other than SDP.
    static func parse(_ packet: UnsafeRawBufferPointer) -> (sdp: String, deletes: Bool, origin: String)? {
        guard packet.count >= 8 else { return nil }
        let flags = packet[0]
        guard flags >> 5 == 1, flags & 0x03 == 0 else { return nil }  // version 1; neither encrypted nor compressed
        let ipv6 = flags & 0x10 != 0
        var at = 4
        let originLength = ipv6 ? 16 : 4
        guard packet.count >= at + originLength else { return nil }
        let origin = ipv6 ? "IPv6 origin" : (at..<(at + 4)).map { String(packet[$0]) }.joined(separator: ".")
        at += originLength + 4 * Int(packet[1])
        guard at < packet.count else { return nil }
        var body = Array(packet[at...])
        if !body.starts(with: Array("v=0".utf8)) {
            guard let end = body.firstIndex(of: 0) else { return nil }
            let type = String(decoding: body[..<end], as: UTF8.self)
            guard type == "application/sdp" else { return nil }
            body = Array(body[(end + 1)...])
        }
        guard let sdp = String(validating: body, as: UTF8.self) else { return nil }
        return (sdp, flags & 0x04 != 0, origin)
    }
}
