import Foundation
import TapedeckCore
import TapedeckStreamFormats

/// The network sources' parsers as fuzz targets (see ``FuzzTargets``):
///
/// - `stream`: what an HTTP stream sends. The first byte chooses whether ICY metadata is
///   interleaved (bit 0) and the `Content-Type` the server claims (bits 1–2), the second the
///   metadata interval (16 × (1 + byte)); the rest is the stream, handed over in chunks of
///   varying size. ICY titles come at audio offsets in order and within the audio, and make
///   marker labels within the label rule; the decoder Tapedeck picks has a format a take can
///   have, decodes at most 65 535 frames per byte and never more than asked, and when it stops
///   the stream says why (the lost-device message's words). Read means some audio was decoded.
/// - `rtp`: an SDP text (up to the first zero byte), then packets, each a 16-bit length, a
///   byte of milliseconds since the previous packet's arrival, and the packet. Each packet is
///   read as SAP (its SDP read as a session description) and as RTP through the jitter buffer
///   of the session the SDP describes (L24/48000/2 when it is refused). A description read has
///   values a take can have; what the jitter buffer releases is whole frames, and its holes never
///   take it further ahead of the arrivals than its allowed lead.
extension FuzzTargets {
    static func stream(_ data: Data) throws -> Bool {
        guard data.count >= 2 else { return false }
        let flags = data[data.startIndex], metaint = 16 * (Int(data[data.startIndex + 1]) + 1)
        let contentType = ["", "audio/mpeg", "audio/flac", "application/ogg"][Int(flags >> 1) & 3]
        let body = data.dropFirst(2)
        let queue = ByteQueue()
        try queueStream(body, icy: flags & 1 != 0 ? metaint : nil, into: queue)
        queue.finish(StreamEnd(reason: "ended"))
        let bytes = StreamBytes(queue, stallNanos: 1_000_000_000)
        let decoder: any StreamDecoder
        do {
            decoder = try StreamDecoders.open(bytes, contentType: contentType)
        } catch is StreamEnd {
            return false
        } catch {
            throw Finding("opening the stream threw \(type(of: error)) (\(error)), not a StreamEnd")
        }
        defer { decoder.close() }
        guard AudioFormat.sampleRateRange.contains(decoder.sampleRate), AudioFormat.channelRange.contains(decoder.channels) else {
            throw Finding("the \(decoder.codec) decoder opened a stream of \(decoder.sampleRate) Hz, \(decoder.channels) channels")
        }
        let chunk = 4_096, limit = Int64(body.count) * 65_535
        var buffer = [Float](repeating: 0, count: chunk * decoder.channels)
        var total: Int64 = 0
        while true {
            let n = buffer.withUnsafeMutableBufferPointer { decoder.decode(into: $0.baseAddress!, maxFrames: chunk) }
            if n < 0 || n > chunk { throw Finding("the \(decoder.codec) decoder gave \(n) frames when asked for \(chunk)") }
            if n == 0 { break }
            total += Int64(n)
            if total > limit { throw Finding("the \(decoder.codec) decoder gave more than \(limit) frames from \(body.count) bytes") }
            if let title = decoder.takeTitle() { try checkLabel(title) }
        }
        if bytes.end == nil { throw Finding("the \(decoder.codec) decoder stopped without saying why") }
        return total > 0
    }

    /// Queues `body` as the connection would: through the ICY demuxer when `icy` is its
    /// interval, in chunks of 1, 7, 300 and 4 096 bytes in turn (every cut a network makes).
    private static func queueStream(_ body: Data, icy: Int?, into queue: ByteQueue) throws {
        var demuxer = icy.map { IcyDemuxer(metaint: $0) }
        var audio: Int64 = 0, lastOffset: Int64 = 0
        let sizes = [1, 7, 300, 4_096]
        var at = body.startIndex, turn = 0
        while at < body.endIndex {
            let end = min(body.endIndex, at + sizes[turn % sizes.count])
            turn += 1
            try body[at..<end].withUnsafeBytes { chunk in
                guard var d = demuxer else {
                    _ = queue.append(chunk) {}
                    return
                }
                let titles = d.demux(chunk) { piece in
                    audio += Int64(piece.count)
                    _ = queue.append(piece) {}
                }
                demuxer = d
                for title in titles {
                    if title.offset < lastOffset || title.offset > audio {
                        throw Finding("an ICY title came at audio offset \(title.offset), after \(lastOffset), with \(audio) audio bytes read")
                    }
                    lastOffset = title.offset
                    if let label = StreamTitle.label(title.text) { try checkLabel(label) }
                }
            }
            at = end
        }
    }

    private static func checkLabel(_ label: String) throws {
        if label.utf8.count > TakeMarker.maxLabelBytes || label.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
            throw Finding("a stream title made the marker label \(label.debugDescription)")
        }
    }

    static func rtp(_ data: Data) throws -> Bool {
        let split = data.firstIndex(of: 0) ?? data.endIndex
        let sdpRead = try typed("the SDP") {
            try checkSession(SessionDescription(String(decoding: data[..<split], as: UTF8.self), path: "fuzz.sdp"))
        }
        let session = (try? SessionDescription(String(decoding: data[..<split], as: UTF8.self), path: "fuzz.sdp"))
        let encoding = session?.encoding ?? RTPEncoding("L24/48000/2")!
        var reorder = RTPReorder(delayNanos: 20_000_000, bytesPerFrame: encoding.bytesPerFrame, sampleRate: encoding.sampleRate)
        var at = split < data.endIndex ? split + 1 : split
        var now: UInt64 = 0, first: UInt64?, received: Int64 = 0, released: Int64 = 0
        func hand(_ releases: [RTPReorder.Release]) throws {
            for release in releases {
                switch release {
                case .lost(let frames):
                    if frames <= 0 { throw Finding("the jitter buffer released a hole of \(frames) frames") }
                    released += Int64(frames)
                case .audio(let bytes):
                    if bytes.count % encoding.bytesPerFrame != 0 { throw Finding("the jitter buffer released \(bytes.count) bytes, not whole frames") }
                    released += Int64(bytes.count / encoding.bytesPerFrame)
                }
            }
        }
        while data.endIndex - at >= 3 {
            let length = Int(data[at]) << 8 | Int(data[at + 1])
            now += UInt64(data[at + 2]) * 1_000_000
            at += 3
            let packet = data[at..<min(data.endIndex, at + length)]
            at += packet.count
            try packet.withUnsafeBytes { raw in
                if let sap = SAPPacket.parse(raw) {
                    try typed("an SDP announced by SAP") { try checkSession(SessionDescription(sap.sdp, path: "SAP")) }
                }
                guard let header = RTPHeader(raw) else { return }
                if header.payload.lowerBound < 12 || header.payload.upperBound > raw.count {
                    throw Finding("an RTP header put the payload at \(header.payload) of a \(raw.count)-byte packet")
                }
                if first == nil { first = now }
                received += Int64(header.payload.count / encoding.bytesPerFrame)
                try hand(reorder.arrive(header, payload: Array(raw[header.payload]), now: now))
            }
            try hand(reorder.tick(now: now))
        }
        try hand(reorder.flushAll())
        if let first {
            let seconds = Double(now - first) * 1.001 / 1e9 + 0.020 + Double(RTPReorder.leadSeconds)
            let allowed = received + Int64(seconds * Double(encoding.sampleRate)) + 1
            if released > allowed {
                throw Finding("the jitter buffer released \(released) frames from \(received) frames sent over \(Double(now - first) / 1e9) s")
            }
        }
        return sdpRead
    }

    private static func checkSession(_ s: SessionDescription) throws {
        guard [16, 24].contains(s.encoding.bits), AudioFormat.sampleRateRange.contains(s.encoding.sampleRate),
              AudioFormat.channelRange.contains(s.encoding.channels), (1...65_535).contains(s.port), (0...127).contains(s.payloadType) else {
            throw Finding("a session description was read as \(s.encoding.bits)-bit, \(s.encoding.sampleRate) Hz, \(s.encoding.channels) channels, port \(s.port), payload type \(s.payloadType)")
        }
    }
}
