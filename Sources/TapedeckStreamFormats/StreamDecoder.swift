package import TapedeckCore

/// A decoder of one network stream's bytes into interleaved float frames, made by
/// ``StreamDecoders/open(_:contentType:)`` once it knows the stream's format.
///
/// Thread: the stream's decoding thread (and the device thread while it opens); blocks while the
/// bytes it needs have not arrived (``StreamBytes``).
package protocol StreamDecoder: AnyObject {
    /// What the stream is, for the log and the take: `Ogg Opus`, `MP3`.
    var codec: String { get }
    var sampleRate: Int { get }
    var channels: Int { get }
    /// The stream's own sample format when it is lossless (FLAC, WAV); nil for lossy codecs,
    /// whose decoded samples have no depth of their own.
    var nativeFormat: SampleFormat? { get }
    /// Decodes up to `maxFrames` frames of ``channels`` floats into `buffer`.
    /// - Returns: the frames decoded; 0 once the stream ended (``StreamBytes/end`` says why).
    func decode(into buffer: UnsafeMutablePointer<Float>, maxFrames: Int) -> Int
    /// Frees the decoder. Once.
    func close()
    /// The title of a new link of a chained stream (Ogg comments: `ARTIST - TITLE`), once, when
    /// the last ``decode(into:maxFrames:)`` began one; nil otherwise.
    func takeTitle() -> String?
}

extension StreamDecoder {
    package func takeTitle() -> String? { nil }
}

/// A stream title as a marker's label: `ARTIST - TITLE` (or either), without control
/// characters, at most ``TakeMarker/maxLabelBytes`` bytes (cut at a character).
package enum StreamTitle {
    package static func label(artist: String?, title: String?) -> String? {
        let parts = [artist, title].compactMap { $0 }.filter { !$0.isEmpty }
        return parts.isEmpty ? nil : label(parts.joined(separator: " - "))
    }

    package static func label(_ text: String) -> String? {
        var out = ""
        for c in text where !c.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
            if out.utf8.count + String(c).utf8.count > TakeMarker.maxLabelBytes { break }
            out.append(c)
        }
        return out.isEmpty ? nil : out
    }
}

/// Chooses the decoder for a stream from its first bytes (the container's magic), then from
/// the `Content-Type` the server sent. Any thread that may block.
package enum StreamDecoders {
    /// The decoder for the stream in `bytes`, its format known. Blocks until the headers came.
    /// - Throws: ``StreamEnd`` when the bytes are not audio Tapedeck decodes, or the stream ended first.
    package static func open(_ bytes: StreamBytes, contentType: String) throws -> any StreamDecoder {
        let head = bytes.peek(64)
        if head.isEmpty { throw bytes.end ?? StreamEnd(reason: "sent no audio") }
        let type = contentType.lowercased()
        if head.starts(with: Array("OggS".utf8)) {
            if Self.contains(head, "OpusHead") { return try OpusStreamDecoder(bytes) }
            if Self.contains(head, "\u{01}vorbis") { return try VorbisStreamDecoder(bytes) }
            if Self.contains(head, "\u{7F}FLAC") { return try FLACStreamDecoder(bytes, ogg: true) }
            throw StreamEnd(reason: "is an Ogg stream of a codec Tapedeck does not decode (it reads Opus, Vorbis and FLAC)")
        }
        if head.starts(with: Array("fLaC".utf8)) || Self.isFLACFrame(head) || type.contains("flac") {
            return try FLACStreamDecoder(bytes, ogg: false)
        }
        if (head.starts(with: Array("RIFF".utf8)) || head.starts(with: Array("RF64".utf8))) && head.count >= 12
            && Array(head[8..<12]) == Array("WAVE".utf8) {
            return try WAVStreamDecoder(bytes)
        }
        if head.starts(with: Array("ID3".utf8)) || Self.isMPEGFrame(head) || type.contains("mpeg") || type.contains("mp3") {
            return try MP3StreamDecoder(bytes)
        }
        let shown = type.isEmpty ? "no content type" : "content type \(contentType)"
        let hex = head.prefix(8).map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined(separator: " ")
        throw StreamEnd(reason: "sent bytes that are not audio Tapedeck decodes (\(shown), first bytes \(hex); it reads Ogg Opus, Ogg Vorbis, Ogg FLAC, FLAC, MP3 and WAV)")
    }

    package static func contains(_ bytes: [UInt8], _ text: String) -> Bool {
        let needle = Array(text.utf8)
        guard bytes.count >= needle.count else { return false }
        return (0...(bytes.count - needle.count)).contains { Array(bytes[$0..<($0 + needle.count)]) == needle }
    }

    /// An MPEG audio frame header: 11 sync bits, a layer, a bitrate and rate that are not reserved.
    package static func isMPEGFrame(_ b: [UInt8]) -> Bool {
        guard b.count >= 4, b[0] == 0xFF, b[1] & 0xE0 == 0xE0, b[1] & 0x06 != 0 else { return false }
        return b[2] & 0xF0 != 0xF0 && b[2] & 0x0C != 0x0C
    }

    /// A FLAC frame's sync code (a native stream joined after its header).
    package static func isFLACFrame(_ b: [UInt8]) -> Bool {
        b.count >= 2 && b[0] == 0xFF && (b[1] == 0xF8 || b[1] == 0xF9)
    }
}
