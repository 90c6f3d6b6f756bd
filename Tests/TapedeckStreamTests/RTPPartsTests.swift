#if Streams
import Foundation
import Testing
@testable import TapedeckStream
@testable import TapedeckStreamFormats
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

    /// A sender whose timestamps run ahead of the packets' arrival (9 s a packet, a packet a
    /// millisecond) gets holes only up to the lead allowed, the rest counted as restarts: its
    /// packets never make hours of silence on disk. A real loss is still filled exactly.
    @Test func holesNeverRunAheadOfTime() {
        var r = RTPReorder(delayNanos: 20_000_000, bytesPerFrame: 4, sampleRate: 48_000)
        let payload = [UInt8](repeating: 1, count: 48 * 4)
        var released = 0
        for i in 0..<1_000 {
            let out = r.arrive(Self.header(UInt16(i), UInt32(i * 9 * 48_000)), payload: payload, now: UInt64(i) * 1_000_000)
            for release in out {
                if case .lost(let frames) = release { released += frames }
                if case .audio(let bytes) = release { released += bytes.count / 4 }
            }
        }
        // One second of arrivals: at most 1.001 s + 20 ms + the 2 s lead, and the audio sent.
        #expect(released <= Int(48_000 * (0.999 * 1.001 + 0.020 + Double(RTPReorder.leadSeconds))) + 1_000 * 48)
        #expect(r.restarts > 900)
        var s = RTPReorder(delayNanos: 0, bytesPerFrame: 4, sampleRate: 48_000)
        #expect(s.arrive(Self.header(0, 0), payload: payload, now: 0) == [.audio(payload)])
        #expect(s.arrive(Self.header(2, 96), payload: payload, now: 2_000_000) == [.lost(frames: 48), .audio(payload)])
        #expect(s.restarts == 0)
    }

    /// RFC 7273: a timestamp on the PTP timescale (TAI, 37 s ahead of UTC) or NTP's (from 1900)
    /// is the time of its sample, when it is within a second of the arrival; not otherwise.
    @Test func rtpClockFromTimestamps() throws {
        var s = try SessionDescription(Self.aes67, path: "x")
        s.mediaClockOffset = 1_000
        let clock = try #require(RTPClock(s))
        #expect(clock.reference == .ptp)
        let arrival = Date(timeIntervalSince1970: 1_800_000_000.5)
        let sampleTime = arrival.timeIntervalSince1970 - 0.005  // sent 5 ms before it arrived
        let count = Int64(((sampleTime + 37) * 48_000).rounded(.down))
        let stamp = UInt32(truncatingIfNeeded: count + 1_000)
        let got = try #require(clock.date(of: stamp, arrivedAt: arrival))
        #expect(abs(got.date.timeIntervalSince1970 - Double(count) / 48_000 + 37) < 1e-6)
        #expect(abs(got.before - 0.005) < 1.0 / 48_000)
        #expect(clock.date(of: stamp &+ 48_000 * 3, arrivedAt: arrival) == nil, "3 s apart: not trusted")
        s.clockReference = "ntp=/traceable/"
        let ntp = try #require(RTPClock(s))
        let ntpCount = Int64(((sampleTime + 2_208_988_800) * 48_000).rounded(.down))
        let ntpGot = try #require(ntp.date(of: UInt32(truncatingIfNeeded: ntpCount + 1_000), arrivedAt: arrival))
        #expect(abs(ntpGot.date.timeIntervalSince1970 - sampleTime) < 1.0 / 48_000)
        s.clockReference = "localmac=00-11-22-33-44-55"
        #expect(RTPClock(s) == nil && RTPClock.unreadReference(s)?.contains("localmac") == true)
        s.mediaClockOffset = nil
        s.clockReference = "ptp=IEEE1588-2008:00-11-22-FF-FE-33-44-55:0"
        #expect(RTPClock(s) == nil && RTPClock.unreadReference(s)?.contains("mediaclk") == true)
    }

    @Test func sapAnnouncement() throws {
        var packet: [UInt8] = [0x20, 0, 0x12, 0x34, 192, 168, 1, 1]
        packet += Array("application/sdp".utf8) + [0] + Array(Self.aes67.utf8)
        let parsed = try #require(packet.withUnsafeBytes { SAPPacket.parse($0) })
        #expect(parsed.origin == "192.168.1.1" && !parsed.deletes && parsed.sdp == Self.aes67)
        packet[0] |= 0x04
        #expect(packet.withUnsafeBytes { SAPPacket.parse($0) }?.deletes == true)
        packet[0] |= 0x01   // compressed: not read
        #expect(packet.withUnsafeBytes { SAPPacket.parse($0) } == nil)
    }
}
#endif
