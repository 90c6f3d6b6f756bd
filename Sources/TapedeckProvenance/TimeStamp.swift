public import Foundation
import TapedeckCore

/// RFC 3161 time stamps, the groundwork of `provenance.tsa` (not wired into recording yet): the
/// request a time-stamping authority takes for a SHA-256 digest (DER), and what its answer's
/// token says (the time, the digest it covers, the policy). The token's own signature (CMS
/// SignedData over the TSTInfo) is not checked here yet; `openssl ts -verify` checks it.
/// A namespace of pure functions; any thread; never blocks.
public enum TimeStamp {
    /// What a token says.
    public struct Token: Sendable, Hashable {
        /// The token as the authority gave it (a CMS ContentInfo, DER).
        public var der: Data
        /// When the authority says it saw the digest.
        public var time: Date
        /// The SHA-256 digest it covers.
        public var digest: Data
        /// The authority's policy (dotted OID).
        public var policy: String
    }

    static let sha256OID: [UInt8] = [0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01]

    /// A TimeStampReq for `digest` (32 bytes): version 1, SHA-256, the nonce when given, and the
    /// authority's certificate asked for.
    public static func request(digest: Data, nonce: UInt64? = nil) -> Data {
        let algorithm = tlv(0x30, sha256OID + [0x05, 0x00])
        let imprint = tlv(0x30, algorithm + tlv(0x04, Array(digest)))
        var body = tlv(0x02, [0x01]) + imprint
        if let nonce { body += tlv(0x02, unsignedInteger(nonce)) }
        body += tlv(0x01, [0xFF])
        return Data(tlv(0x30, body))
    }

    /// The token of a TimeStampResp, after its status says it was granted.
    /// - Throws: `.corruptFile` for an answer that is not one, `.io` for a refusal (with its status).
    public static func token(fromResponse response: Data) throws -> Token {
        var r = Reader(Array(response))
        var resp = try r.enter(0x30)
        var status = try resp.enter(0x30)
        let code = try status.integer()
        guard code == 0 || code == 1 else {
            throw TapedeckError(.io, "The time-stamping authority refused the request (PKIStatus \(code)).")
        }
        let token = try resp.whole(0x30)
        return try parse(token: Data(token))
    }

    /// What a token (ContentInfo → SignedData → TSTInfo) says.
    /// - Throws: `.corruptFile` when it is not a time-stamp token.
    public static func parse(token: Data) throws -> Token {
        var r = Reader(Array(token))
        var info = try r.enter(0x30)
        _ = try info.element(0x06)  // id-signedData
        var explicit = try info.enter(0xA0)
        var signed = try explicit.enter(0x30)
        _ = try signed.integer()
        _ = try signed.element(0x31)  // digestAlgorithms
        var encapsulated = try signed.enter(0x30)
        _ = try encapsulated.element(0x06)  // id-ct-TSTInfo
        var content = try encapsulated.enter(0xA0)
        var octets = Reader(try content.element(0x04))
        var tst = try octets.enter(0x30)
        _ = try tst.integer()
        let policy = oidText(try tst.element(0x06))
        var imprint = try tst.enter(0x30)
        _ = try imprint.element(0x30)
        let digest = Data(try imprint.element(0x04))
        _ = try tst.element(0x02)  // serialNumber
        let time = String(decoding: try tst.element(0x18), as: UTF8.self)
        guard let date = generalizedTime(time) else { throw corrupt("its time (\(time.prefix(40))) is not a GeneralizedTime") }
        return Token(der: token, time: date, digest: digest, policy: policy)
    }

    /// `YYYYMMDDHHMMSS[.f…]Z`.
    static func generalizedTime(_ text: String) -> Date? {
        guard text.hasSuffix("Z"), text.count >= 15 else { return nil }
        let digits = Array(text.prefix(14))
        guard digits.allSatisfy(\.isNumber) else { return nil }
        let n = { (a: Int, b: Int) in Int(String(digits[a..<b]))! }
        var c = DateComponents(timeZone: TimeZone(identifier: "UTC"), year: n(0, 4), month: n(4, 6), day: n(6, 8), hour: n(8, 10), minute: n(10, 12), second: n(12, 14))
        c.calendar = Calendar(identifier: .gregorian)
        guard let whole = c.date else { return nil }
        let rest = text.dropFirst(14).dropLast()
        let fraction = rest.hasPrefix(".") ? Double("0" + rest) ?? 0 : 0
        return whole.addingTimeInterval(fraction)
    }

    static func oidText(_ bytes: [UInt8]) -> String {
        guard let first = bytes.first else { return "" }
        var parts = [Int(first) / 40, Int(first) % 40]
        var value = 0
        for b in bytes.dropFirst() {
            value = value << 7 | Int(b & 0x7F)
            if b & 0x80 == 0 {
                parts.append(value)
                value = 0
            }
        }
        return parts.map(String.init).joined(separator: ".")
    }

    static func corrupt(_ what: String) -> TapedeckError {
        TapedeckError(.corruptFile, "The time-stamp token does not hold: \(what).")
    }

    static func tlv(_ tag: UInt8, _ content: [UInt8]) -> [UInt8] {
        var out = [tag]
        if content.count < 0x80 { out.append(UInt8(content.count)) } else {
            let length = withUnsafeBytes(of: UInt32(content.count).bigEndian) { Array($0) }.drop { $0 == 0 }
            out.append(0x80 | UInt8(length.count))
            out += length
        }
        return out + content
    }

    static func unsignedInteger(_ v: UInt64) -> [UInt8] {
        var bytes = Array(withUnsafeBytes(of: v.bigEndian) { Array($0) }.drop { $0 == 0 })
        if bytes.isEmpty { bytes = [0] }
        if bytes[0] & 0x80 != 0 { bytes.insert(0, at: 0) }
        return bytes
    }

    /// A DER reader over bytes: each call takes the next element.
    struct Reader {
        let bytes: [UInt8]
        var at = 0
        init(_ bytes: [UInt8]) { self.bytes = bytes }

        /// The next element's tag, and its content's range.
        mutating func next() throws -> (tag: UInt8, range: Range<Int>) {
            guard at + 2 <= bytes.count else { throw TimeStamp.corrupt("it ends early") }
            let tag = bytes[at]
            var length = Int(bytes[at + 1])
            var start = at + 2
            if length & 0x80 != 0 {
                let n = length & 0x7F
                guard n >= 1, n <= 4, start + n <= bytes.count else { throw TimeStamp.corrupt("a length is not DER") }
                length = bytes[start..<start + n].reduce(0) { $0 << 8 | Int($1) }
                start += n
            }
            guard start + length <= bytes.count else { throw TimeStamp.corrupt("an element runs past its end") }
            at = start + length
            return (tag, start..<start + length)
        }

        /// The next element's content, which must have `tag`.
        mutating func element(_ tag: UInt8) throws -> [UInt8] {
            let (t, range) = try next()
            guard t == tag else { throw TimeStamp.corrupt("found tag \(t) where \(tag) belongs") }
            return Array(bytes[range])
        }

        /// The next element whole (tag and length too), which must have `tag`.
        mutating func whole(_ tag: UInt8) throws -> [UInt8] {
            let begin = at
            _ = try element(tag)
            return Array(bytes[begin..<at])
        }

        /// A reader of the next element's content, which must have `tag`.
        mutating func enter(_ tag: UInt8) throws -> Reader { Reader(try element(tag)) }

        mutating func integer() throws -> Int {
            let content = try element(0x02)
            guard content.count <= 8 else { throw TimeStamp.corrupt("an integer is too large") }
            return content.reduce(0) { $0 << 8 | Int($1) }
        }
    }
}
