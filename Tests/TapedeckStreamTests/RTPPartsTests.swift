#if Streams
import Foundation
import Testing
@testable import TapedeckStream
import TapedeckCore

/// The RTP backend's parts that need no network: the SDP an AES67 sender writes, the jitter
/// buffer's order and holes, SAP packets.
@Suite struct RTPPartsTests {
    /// An SDP as AES67 senders publish it (the form of AES67-2018 annex and of the senders'
    /// web pages): multicast group with a TTL, L24, 1 ms packets, a PTP reference clock.
    static let aes67 = """
    v=0
    o=- 1311738121 1311738121 IN IP4 192.168.1.1
    s=Stage box 1-8
    c=IN IP4 239.69.83.133/32
    t=0 0
    a=keywds:Dante
    m=audio 5004 RTP/AVP 97
    i=8 channels: 1, 2, 3, 4, 5, 6, 7, 8
    a=recvonly
    a=rtpmap:97 L24/48000/8
    a=ptime:1
    a=ts-refclk:ptp=IEEE1588-2008:00-1D-C1-FF-FE-0E-10-C4:0
    a=mediaclk:direct=142633656
    a=source-filter: incl IN IP4 239.69.83.133 192.168.1.1
    """

    @Test func aes67SessionDescription() throws {
        let s = try SessionDescription(Self.aes67, path: "stage.sdp")
        #expect(s.name == "Stage box 1-8")
        #expect(s.address == "239.69.83.133" && s.port == 5004 && s.payloadType == 97)
        #expect(s.encoding == RTPEncoding("L24/48000/8"))
        #expect(s.packetMilliseconds == 1)
        #expect(s.clockReference == "ptp=IEEE1588-2008:00-1D-C1-FF-FE-0E-10-C4:0")
        #expect(s.mediaClockOffset == 142_633_656)
        #expect(s.source == "192.168.1.1")
        // CRLF line ends, as the RFC writes them, read the same.
        #expect(try SessionDescription(Self.aes67.replacingOccurrences(of: "\n", with: "\r\n"), path: "x") == s)
        let e = #expect(throws: TapedeckError.self) { try SessionDescription(Self.aes67.replacingOccurrences(of: "L24", with: "AM824"), path: "x.sdp") }
        #expect(e?.message.contains("L16 or L24") == true)
        let m = #expect(throws: TapedeckError.self) { try SessionDescription("v=0\nc=IN IP4 1.2.3.4\nm=audio x RTP/AVP 97", path: "bad.sdp") }
        #expect(m?.message.contains("bad.sdp, line 3") == true)
    }

    static func header(_ seq: UInt16, _ ts: UInt32) -> RTPHeader {
        var bytes: [UInt8] = [0x80, 97, UInt8(seq >> 8), UInt8(seq & 0xFF), UInt8(ts >> 24), UInt8((ts >> 16) & 0xFF),
                              UInt8((ts >> 8) & 0xFF), UInt8(ts & 0xFF), 0, 0, 0, 1]
        bytes += [0, 0, 0, 0]
        return bytes.withUnsafeBytes { RTPHeader($0)! }
    }

    /// Packets out of order come out in order; one missing past the delay is a hole of its
    /// frames; one arriving after that is late; sequence numbers and timestamps wrap.
    @Test func jitterBufferOrderHolesAndWrap() {
        var r = RTPReorder(delayNanos: 20_000_000, bytesPerFrame: 4, sampleRate: 48_000)
        let frames = 48, payload = [UInt8](repeating: 1, count: frames * 4)
        let seq0: UInt16 = 65_533, ts0: UInt32 = 4_294_967_200
        func packet(_ i: Int) -> RTPHeader { Self.header(seq0 &+ UInt16(i), ts0 &+ UInt32(i * frames)) }
        var out: [RTPReorder.Release] = []
        out += r.arrive(packet(0), payload: payload, now: 0)
        out += r.arrive(packet(2), payload: payload, now: 1_000_000)      // 1 is late
        out += r.arrive(packet(1), payload: payload, now: 2_000_000)      // in time: order restored
        out += r.arrive(packet(4), payload: payload, now: 3_000_000)      // 3 never comes
        #expect(out == [.audio(payload), .audio(payload), .audio(payload)])
        out = r.tick(now: 10_000_000)
        #expect(out.isEmpty, "still waiting for 3")
        out = r.tick(now: 24_000_000)
        #expect(out == [.lost(frames: frames), .audio(payload)])
        #expect(r.arrive(packet(3), payload: payload, now: 25_000_000).isEmpty, "too late: already a hole")
        #expect(r.lostPackets == 1 && r.latePackets == 1)
        #expect(r.arrive(packet(5), payload: payload, now: 26_000_000) == [.audio(payload)])
        // A sender that starts over far away is followed, with no hole.
        #expect(r.arrive(Self.header(30_000, 1_000_000_000), payload: payload, now: 27_000_000) == [.audio(payload)])
        #expect(r.restarts == 1)
    }

    @Test func sapAnnouncement() throws {
        var packet: [UInt8] = [0x20, 0, 0x12, 0x34, 192, 168, 1, 1]
        packet += Array("application/sdp".utf8) + [0] + Array(Self.aes67.utf8)
        let parsed = try #require(packet.withUnsafeBytes { SAPListener.parse($0) })
        #expect(parsed.origin == "192.168.1.1" && !parsed.deletes && parsed.sdp == Self.aes67)
        packet[0] |= 0x04
        #expect(packet.withUnsafeBytes { SAPListener.parse($0) }?.deletes == true)
        packet[0] |= 0x01   // compressed: not read
        #expect(packet.withUnsafeBytes { SAPListener.parse($0) } == nil)
    }
}
#endif
