public import Foundation
import Crypto
public import TapedeckCore

/// The hash chain a signed take carries in its sidecar (`TAKEFILE.chain`): the format, the
/// arithmetic, and the text of each line. docs/PROVENANCE.md describes it for other
/// implementations, with a test vector. A namespace of pure functions; any thread; never blocks.
///
/// The sidecar is JSON Lines, appended as the take is recorded: a header, then one `checkpoint`
/// line per checkpoint (the frames it covers, the SHA-256 of their bytes, the new head), a
/// `signature` line every few checkpoints and at the end (Ed25519 over the head), and an `end`
/// line when the take finished. The audio hashed is the PCM frames as the recorder wrote them:
/// interleaved, little-endian, in the take's sample format (s24 as 3 bytes), so a file verifies
/// by decoding it, whatever lossless container holds it.
public enum ProvenanceChain {
    /// The sidecar's version and its name's suffix.
    public static let version = 1
    public static let suffix = ".chain"
    static let context = Array("tapedeck-provenance-v1".utf8)

    /// The sidecar of the audio file at `audio`.
    public static func sidecar(of audio: URL) -> URL {
        audio.deletingLastPathComponent().appendingPathComponent(audio.lastPathComponent + suffix)
    }

    /// The header of the chain beside the audio file `audio` (its first line only); `nil` when
    /// there is no chain or its first line is not a header. Blocks briefly, reading it.
    public static func header(beside audio: URL) -> Header? {
        guard let handle = try? FileHandle(forReadingFrom: sidecar(of: audio)) else { return nil }
        defer { try? handle.close() }
        guard let head = try? handle.read(upToCount: 4096), let end = head.firstIndex(of: 0x0A) else { return nil }
        guard case .header(let h)? = read(head[head.startIndex...end]).lines.first else { return nil }
        return h
    }

    /// The chain's first head: binds it to the take, its format and the key.
    public static func genesis(takeID: String, format: AudioFormat, publicKey: Data) -> Data {
        var h = SHA256()
        h.update(data: context)
        h.update(data: Array("\u{0}genesis\u{0}\(takeID)\u{0}\(formatText(format))\u{0}".utf8))
        h.update(data: publicKey)
        return Data(h.finalize())
    }

    /// head_n = SHA-256(head_{n-1} ‖ from ‖ to ‖ SHA-256 of the frames' bytes), the frames as
    /// 64-bit big-endian numbers.
    public static func next(head: Data, from: Int64, to: Int64, hash: Data) -> Data {
        var h = SHA256()
        h.update(data: head)
        h.update(data: bigEndian(from))
        h.update(data: bigEndian(to))
        h.update(data: hash)
        return Data(h.finalize())
    }

    /// What a signature signs: the context, "sign", the checkpoint's number, the frames it
    /// covers up to, and its head.
    public static func signedMessage(checkpoint: Int, frames: Int64, head: Data) -> Data {
        Data(context + Array("\u{0}sign\u{0}".utf8) + bigEndian(Int64(checkpoint)) + bigEndian(frames)) + head
    }

    /// What the `end` line's signature signs: the context, "end", the last checkpoint's number,
    /// the take's frames, and the last head. It tells a take that finished from one cut back to
    /// an earlier signature with an `end` line added.
    public static func endMessage(checkpoint: Int, frames: Int64, head: Data) -> Data {
        Data(context + Array("\u{0}end\u{0}".utf8) + bigEndian(Int64(checkpoint)) + bigEndian(frames)) + head
    }

    /// `s16/48000/2`: the format as the genesis binds it.
    public static func formatText(_ format: AudioFormat) -> String {
        "\(format.sampleFormat.rawValue)/\(format.sampleRate)/\(format.channels)"
    }

    static func bigEndian(_ v: Int64) -> [UInt8] {
        withUnsafeBytes(of: v.bigEndian) { Array($0) }
    }

    // MARK: lines

    /// The header: what the chain is of and who signs it.
    public struct Header: Codable, Sendable, Hashable {
        public var type = "header"
        public var chain = "tapedeck-provenance"
        public var version = ProvenanceChain.version
        public var take: String
        public var format: String
        public var key: String
        public var fingerprint: String
        public var created: String
        /// Whether this machine's clock was synchronised (NTP) when the take began, and its
        /// estimated error in seconds; `nil` when the kernel does not say.
        public var clockSynchronized: Bool?
        public var clockErrorSeconds: Double?
        /// The time-stamping authority the recorder asks for tokens (`provenance.tsa`), when one.
        public var tsa: String?
    }

    /// One checkpoint: frames `from..<to`, their bytes' SHA-256, the new head.
    public struct Checkpoint: Codable, Sendable, Hashable {
        public var type = "checkpoint"
        public var k: Int
        public var from: Int64
        public var to: Int64
        public var hash: String
        public var head: String
    }

    /// A signature over checkpoint `k`'s head.
    public struct Signature: Codable, Sendable, Hashable {
        public var type = "signature"
        public var k: Int
        public var to: Int64
        public var sig: String
    }

    /// The take finished: its frames, the last checkpoint, the clock then, and the signature of
    /// ``ProvenanceChain/endMessage(checkpoint:frames:head:)`` (`nil` in chains of Tapedeck
    /// before it signed the end: such an end is not proven).
    public struct End: Codable, Sendable, Hashable {
        public var type = "end"
        public var end: Int
        public var frames: Int64
        public var clockSynchronized: Bool?
        public var clockErrorSeconds: Double?
        public var sig: String?
    }

    /// An RFC 3161 time stamp of checkpoint `k`'s head: the authority's token (DER, base64),
    /// the time it gives, and the authority asked. Appended when the token arrives, which may
    /// be after the `end` line (a token proves the head existed no later than its time).
    public struct Stamp: Codable, Sendable, Hashable {
        public var type = "timestamp"
        public var k: Int
        public var head: String
        public var time: String
        public var tsa: String
        public var token: String
    }

    /// A line of the sidecar, read.
    public enum Line: Sendable, Hashable {
        case header(Header)
        case checkpoint(Checkpoint)
        case signature(Signature)
        case end(End)
        case stamp(Stamp)
    }

    /// The lines of a sidecar's text, each by its `type`; reading stops at the first line that
    /// is not a whole line of a known type (a process killed while writing it), and `cutShort`
    /// says whether that happened.
    public static func read(_ data: Data) -> (lines: [Line], cutShort: Bool) {
        struct Kind: Decodable { var type: String }
        var lines: [Line] = []
        let decoder = JSONDecoder()
        var parts = data.split(separator: 0x0A, omittingEmptySubsequences: false)
        // The text ends with a newline: the part after it is empty. Without one, the last line is cut.
        let whole = parts.last?.isEmpty ?? true
        if whole, !parts.isEmpty { parts.removeLast() }
        for (i, part) in parts.enumerated() {
            if i == parts.count - 1 && !whole { return (lines, true) }
            let d = Data(part)
            guard let kind = try? decoder.decode(Kind.self, from: d) else { return (lines, true) }
            let line: Line?
            switch kind.type {
            case "header": line = (try? decoder.decode(Header.self, from: d)).map(Line.header)
            case "checkpoint": line = (try? decoder.decode(Checkpoint.self, from: d)).map(Line.checkpoint)
            case "signature": line = (try? decoder.decode(Signature.self, from: d)).map(Line.signature)
            case "end": line = (try? decoder.decode(End.self, from: d)).map(Line.end)
            case "timestamp": line = (try? decoder.decode(Stamp.self, from: d)).map(Line.stamp)
            default: line = nil
            }
            guard let line else { return (lines, true) }
            lines.append(line)
        }
        return (lines, false)
    }

    static func line<T: Encodable>(_ value: T) -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        var d = (try? encoder.encode(value)) ?? Data()
        d.append(0x0A)
        return d
    }

    static func hex(_ d: Data) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(d.count * 2)
        for b in d { out += [digits[Int(b >> 4)], digits[Int(b & 15)]] }
        return String(decoding: out, as: UTF8.self)
    }

    static func unhex(_ s: String) -> Data? {
        guard s.count % 2 == 0 else { return nil }
        var out = Data(capacity: s.count / 2)
        var i = s.startIndex
        while i < s.endIndex {
            let j = s.index(i, offsetBy: 2)
            guard let b = UInt8(s[i..<j], radix: 16) else { return nil }
            out.append(b)
            i = j
        }
        return out
    }
}
