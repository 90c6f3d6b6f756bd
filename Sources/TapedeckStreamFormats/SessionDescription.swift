import TapedeckCore

/// An RTP audio stream as a session description (SDP, RFC 4566) says it, the way AES67 senders
/// (and `ffmpeg -f rtp -sdp_file`) write it: the connection address, the media port and payload
/// type, `rtpmap` (L16 or L24, rate, channels), `ptime`, and the clock the RTP timestamps follow
/// (`ts-refclk` and `mediaclk`, RFC 7273). A plain value; any thread.
package struct SessionDescription: Sendable, Hashable {
    /// The session's name (`s=`).
    package var name: String
    /// Where the audio is sent: a multicast group or a unicast address.
    package var address: String
    package var port: Int
    package var payloadType: Int
    package var encoding: RTPEncoding
    /// Milliseconds of audio per packet (`a=ptime`), when given.
    package var packetMilliseconds: Double?
    /// `a=ts-refclk` (e.g. `ptp=IEEE1588-2008:…:0`): the reference clock of the timestamps.
    package var clockReference: String?
    /// `a=mediaclk:direct=N`: the timestamp at the reference clock's epoch.
    package var mediaClockOffset: UInt32?
    /// The sender's address when `a=source-filter` names one.
    package var source: String?

    /// Parses `text`. - Throws: `.configuration` naming the line and what is wrong, for `path` (how the message names the file).
    package init(_ text: String, path: String) throws {
        var name = "", address: String?, port: Int?, types: [Int] = [], maps: [Int: RTPEncoding] = [:]
        var ptime: Double?, refclk: String?, mediaclk: UInt32?, source: String?
        var inAudio = false, sawMedia = false
        for (index, raw) in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).enumerated() {
            let line = raw.trimmingSpaces
            guard line.count >= 2, line.dropFirst().first == "=" else { continue }
            let value = String(line.dropFirst(2))
            let problem = { (what: String) in TapedeckError(.configuration, "\(path), line \(index + 1): \(what) (\(line)).") }
            switch line.first {
            case "s": name = value
            case "c":
                // c=IN IP4 239.69.1.1/32 (the TTL, and a number of addresses, after slashes)
                let parts = value.split(separator: " ")
                guard parts.count == 3, parts[0] == "IN", parts[1] == "IP4" || parts[1] == "IP6" else { throw problem("not a connection line Tapedeck reads (c=IN IP4 ADDRESS)") }
                if !sawMedia || inAudio { address = String(parts[2].split(separator: "/").first ?? "") }
            case "m":
                sawMedia = true
                let parts = value.split(separator: " ")
                inAudio = parts.first == "audio"
                guard inAudio else { continue }
                guard parts.count >= 4, let p = Int(parts[1].split(separator: "/").first ?? ""), (1...65_535).contains(p),
                      parts[2].hasPrefix("RTP/AVP") else { throw problem("not an RTP audio line (m=audio PORT RTP/AVP TYPE)") }
                if port == nil {
                    port = p
                    types = parts.dropFirst(3).compactMap { Int($0) }
                }
            case "a" where !sawMedia || inAudio:
                let (key, rest) = Self.attribute(value)
                switch key {
                case "rtpmap":
                    let fields = rest.split(separator: " ", maxSplits: 1)
                    guard fields.count == 2, let type = Int(fields[0]) else { throw problem("a malformed rtpmap") }
                    if let encoding = RTPEncoding(String(fields[1])) { maps[type] = encoding }
                case "ptime": ptime = Double(rest)
                case "ts-refclk": refclk = rest
                case "mediaclk":
                    if rest.hasPrefix("direct=") { mediaclk = UInt32(rest.dropFirst(7).split(separator: " ").first ?? "") }
                case "source-filter":
                    // a=source-filter: incl IN IP4 DEST SOURCE
                    let fields = rest.split(separator: " ")
                    if fields.count >= 5, fields[0] == "incl" { source = String(fields[4]) }
                default: break
                }
            default: break
            }
        }
        guard let port else { throw TapedeckError(.configuration, "\(path): no m=audio line: not an audio stream's session description.") }
        guard let address, !address.isEmpty else { throw TapedeckError(.configuration, "\(path): no c= line naming where the audio is sent.") }
        guard let type = types.first(where: { maps[$0] != nil }), let encoding = maps[type] else {
            throw TapedeckError(.configuration, "\(path): the stream's payload is not L16 or L24 (the uncompressed formats AES67 uses), so Tapedeck cannot record it.")
        }
        self.name = name
        self.address = address
        self.port = port
        payloadType = type
        self.encoding = encoding
        packetMilliseconds = ptime
        clockReference = refclk
        mediaClockOffset = mediaclk
        self.source = source
    }

    package init(address: String, port: Int, payloadType: Int, encoding: RTPEncoding) {
        name = ""
        self.address = address
        self.port = port
        self.payloadType = payloadType
        self.encoding = encoding
    }

    /// `key:value` of an `a=` line (a flag without a value has an empty one).
    package static func attribute(_ text: String) -> (String, String) {
        guard let colon = text.firstIndex(of: ":") else { return (text, "") }
        return (String(text[..<colon]), String(String(text[text.index(after: colon)...]).trimmingSpaces))
    }
}

/// An uncompressed RTP payload: `L16/48000/2`, `L24/48000/8` (RFC 3190; big-endian, interleaved).
package struct RTPEncoding: Sendable, Hashable, CustomStringConvertible {
    package var bits: Int
    package var sampleRate: Int
    package var channels: Int

    /// Parses `L24/48000/2` (channels default to 1, as RFC 3551 says). Nil for anything else.
    package init?(_ text: String) {
        let parts = text.split(separator: "/")
        guard (2...3).contains(parts.count), let rate = Int(parts[1]), AudioFormat.sampleRateRange.contains(rate) else { return nil }
        switch parts[0].uppercased() {
        case "L16": bits = 16
        case "L24": bits = 24
        default: return nil
        }
        let channels = parts.count == 3 ? Int(parts[2]) : 1
        guard let channels, AudioFormat.channelRange.contains(channels) else { return nil }
        sampleRate = rate
        self.channels = channels
    }

    package var description: String { "L\(bits)/\(sampleRate)/\(channels)" }
    package var bytesPerFrame: Int { bits / 8 * channels }
}
