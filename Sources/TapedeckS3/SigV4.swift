public import Foundation
import Crypto
import TapedeckCore

/// An access key pair for an S3-compatible server, with the session token of temporary
/// credentials when there is one. Never printed: ``description`` names the key id only.
public struct S3Credentials: Sendable, Hashable, CustomStringConvertible {
    public let accessKeyID: String
    public let secretAccessKey: String
    public let sessionToken: String?

    public init(accessKeyID: String, secretAccessKey: String, sessionToken: String? = nil) {
        self.accessKeyID = accessKeyID
        self.secretAccessKey = secretAccessKey
        self.sessionToken = sessionToken
    }

    public var description: String { "access key \(accessKeyID)" }
}

/// AWS Signature Version 4 in the `Authorization` header, as S3 takes it: the canonical request
/// (method, path encoded once, sorted query, the signed headers, the payload's SHA-256), the
/// string to sign for the day's scope, and the HMAC-SHA256 key derived from the secret for that
/// day, region and service. A plain value: signs on any thread, never blocks.
public struct SigV4Signer: Sendable {
    public let credentials: S3Credentials
    public let region: String
    public let service: String

    /// SHA-256 of nothing: the payload hash of a request without a body.
    public static let emptyPayloadHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

    public init(credentials: S3Credentials, region: String, service: String = "s3") {
        self.credentials = credentials
        self.region = region
        self.service = service
    }

    /// A request as it is signed.
    public struct Request: Sendable {
        public var method: String
        /// The path as sent: each segment already encoded with ``SigV4Signer/encode(_:keepingSlash:)``.
        public var path: String
        /// Query parameters, not encoded; a parameter without a value has "".
        public var query: [(String, String)]
        /// Every header to send and sign, `host` among them (names in any case).
        public var headers: [(String, String)]

        public init(method: String, path: String, query: [(String, String)] = [], headers: [(String, String)]) {
            self.method = method
            self.path = path
            self.query = query
            self.headers = headers
        }
    }

    /// What the request must carry: its headers plus `x-amz-date` (and `x-amz-security-token`)
    /// when missing, and `Authorization`.
    /// - Parameters:
    ///   - request: the request to sign: its method, path, query and headers.
    ///   - payloadHash: the body's SHA-256 in lowercase hex (``emptyPayloadHash`` for none),
    ///     or `UNSIGNED-PAYLOAD`.
    ///   - date: the moment of signing; the server refuses a request more than 15 minutes off.
    public func sign(_ request: Request, payloadHash: String, date: Date) -> [(String, String)] {
        let amzDate = Self.amzDate(date)
        var headers = request.headers
        if !headers.contains(where: { $0.0.lowercased() == "x-amz-date" }) { headers.append(("x-amz-date", amzDate)) }
        if let token = credentials.sessionToken, !headers.contains(where: { $0.0.lowercased() == "x-amz-security-token" }) {
            headers.append(("x-amz-security-token", token))
        }
        let (canonical, signedHeaders) = Self.canonicalRequest(method: request.method, path: request.path, query: request.query,
                                                              headers: headers, payloadHash: payloadHash)
        let day = String(amzDate.prefix(8))
        let scope = "\(day)/\(region)/\(service)/aws4_request"
        let stringToSign = "AWS4-HMAC-SHA256\n\(amzDate)\n\(scope)\n\(Self.hex(SHA256.hash(data: Data(canonical.utf8))))"
        let signature = Self.hex(HMAC<SHA256>.authenticationCode(for: Data(stringToSign.utf8), using: signingKey(day: day)))
        headers.append(("Authorization", "AWS4-HMAC-SHA256 Credential=\(credentials.accessKeyID)/\(scope), SignedHeaders=\(signedHeaders), Signature=\(signature)"))
        return headers
    }

    /// The key for one day: HMAC chained over the day, the region, the service and `aws4_request`.
    func signingKey(day: String) -> SymmetricKey {
        var key = SymmetricKey(data: Data("AWS4\(credentials.secretAccessKey)".utf8))
        for part in [day, region, service, "aws4_request"] {
            key = SymmetricKey(data: Data(HMAC<SHA256>.authenticationCode(for: Data(part.utf8), using: key)))
        }
        return key
    }

    /// The canonical request and the signed headers' names.
    static func canonicalRequest(method: String, path: String, query: [(String, String)], headers: [(String, String)],
                                 payloadHash: String) -> (String, String) {
        let encoded: [(name: String, value: String)] = query.map { (encode($0.0, keepingSlash: false), encode($0.1, keepingSlash: false)) }
        let sorted = encoded.sorted { a, b in a.name == b.name ? a.value < b.value : a.name < b.name }
        let canonicalQuery = sorted.map { "\($0.name)=\($0.value)" }.joined(separator: "&")
        var byName: [String: [String]] = [:]
        for (name, value) in headers {
            let trimmed = value.trimmingCharacters(in: .whitespaces).split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ")
            byName[name.lowercased(), default: []].append(trimmed)
        }
        let names = byName.keys.sorted()
        let canonicalHeaders = names.map { "\($0):\(byName[$0]!.joined(separator: ","))\n" }.joined()
        let signed = names.joined(separator: ";")
        let canonicalPath = path.isEmpty ? "/" : path
        return ([method, canonicalPath, canonicalQuery, canonicalHeaders, signed, payloadHash].joined(separator: "\n"), signed)
    }

    /// URI encoding as SigV4 wants it: unreserved characters (A–Z a–z 0–9 - . _ ~) as they are,
    /// every other byte of the UTF-8 as %XX in upper case; `/` kept in paths.
    public static func encode(_ text: String, keepingSlash: Bool) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            case UInt8(ascii: "/") where keepingSlash:
                out.append("/")
            default:
                out += "%" + String(byte >> 4, radix: 16, uppercase: true) + String(byte & 0xF, radix: 16, uppercase: true)
            }
        }
        return out
    }

    /// `yyyyMMdd'T'HHmmss'Z'` in UTC.
    public static func amzDate(_ date: Date) -> String { UTCTimestamp.basic(date) }

    /// Lowercase hex of a digest or MAC.
    public static func hex<D: Sequence>(_ bytes: D) -> String where D.Element == UInt8 {
        bytes.map { String(format: "%02x", $0) }.joined()
    }
}
