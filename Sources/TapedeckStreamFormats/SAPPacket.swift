/// A SAP announcement (RFC 2974), as AES67 senders send one to 239.255.255.255:9875 with an SDP
/// body. A namespace of pure functions; any thread.
package enum SAPPacket {
    /// A SAP packet's SDP, whether it deletes its session, and its originating source; nil when
    /// it is not SAP version 1, is encrypted or compressed, or carries something other than SDP.
    package static func parse(_ packet: UnsafeRawBufferPointer) -> (sdp: String, deletes: Bool, origin: String)? {
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
