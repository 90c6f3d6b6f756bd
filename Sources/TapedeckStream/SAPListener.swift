import Dispatch
import Foundation
import NIOCore
import NIOPosix
import Synchronization
import TapedeckCore
import TapedeckStreamFormats

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
            guard let announcement = envelope.data.withUnsafeReadableBytes({ SAPPacket.parse($0) }),
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
}
