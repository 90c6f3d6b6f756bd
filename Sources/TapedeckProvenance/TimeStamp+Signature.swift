public import Foundation
import Crypto
@_spi(FixedExpiryValidationTime) public import X509
import SwiftASN1
import TapedeckCore

extension TimeStamp {
    /// A token whose CMS signature was checked: the authority's certificate signed exactly this
    /// TSTInfo. Whether that authority is one to trust is ``trustProblem(roots:)``'s question.
    public struct Signed: Sendable, Hashable {
        /// What the token says.
        public var token: Token
        /// The certificate whose key made the signature, and every certificate the token carries.
        public var signer: Certificate
        public var certificates: [Certificate]

        /// The authority's name (its certificate's subject), e.g. `CN=Example TSA,O=Example`.
        public var authority: String { signer.subject.description }
    }

    static let signedAttributesTag: UInt8 = 0xA0
    static let messageDigestOID: [UInt8] = [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x09, 0x04]
    static let tstInfoOID: [UInt8] = [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x09, 0x10, 0x01, 0x04]

    /// Checks the token's CMS SignedData (RFC 5652 §5.4, RFC 3161 §2.4.2): the signed
    /// attributes' message digest is the digest of the TSTInfo, and their DER is signed by the
    /// key of a certificate the token carries. Pure; any thread; never blocks.
    /// - Throws: `.corruptFile` saying what does not hold.
    public static func checkSignature(of tokenDER: Data) throws -> Signed {
        let token = try parse(token: tokenDER)
        var r = Reader(Array(tokenDER))
        var info = try r.enter(0x30)
        _ = try info.element(0x06)
        var explicit = try info.enter(0xA0)
        var signed = try explicit.enter(0x30)
        _ = try signed.integer()
        _ = try signed.element(0x31)
        var encapsulated = try signed.enter(0x30)
        guard try encapsulated.element(0x06) == tstInfoOID else { throw corrupt("its content is not a TSTInfo") }
        var content = try encapsulated.enter(0xA0)
        let tstInfo = try content.element(0x04)
        // [0] certificates, [1] CRLs (optional), then the SignerInfos.
        var certificates: [Certificate] = []
        var element = try signed.next()
        if element.tag == 0xA0 {
            var certs = Reader(Array(signed.bytes[element.range]))
            while certs.at < certs.bytes.count {
                let der = try certs.whole(0x30)
                guard let certificate = try? Certificate(derEncoded: der) else { throw corrupt("a certificate it carries cannot be read") }
                certificates.append(certificate)
            }
            element = try signed.next()
        }
        if element.tag == 0xA1 { element = try signed.next() }
        guard element.tag == 0x31 else { throw corrupt("it has no signer") }
        var signers = Reader(Array(signed.bytes[element.range]))
        var signer = try signers.enter(0x30)
        _ = try signer.integer()
        let identifier = try signer.next()  // issuerAndSerialNumber, or [0] subjectKeyIdentifier
        var digestAlgorithm = try signer.enter(0x30)
        let digestOID = try digestAlgorithm.element(0x06)
        let begin = signer.at
        let attributes = try signer.next()
        guard attributes.tag == signedAttributesTag else { throw corrupt("its signer signed no attributes") }
        // The signature is over the attributes' DER as a SET (tag 0x31), not as [0] IMPLICIT.
        var signedBytes = Array(signer.bytes[begin..<signer.at])
        signedBytes[0] = 0x31
        var signatureAlgorithm = try signer.enter(0x30)
        let signatureOID = try signatureAlgorithm.element(0x06)
        let signature = try signer.element(0x04)

        guard let claimed = try messageDigest(in: Array(signer.bytes[attributes.range])) else {
            throw corrupt("its signed attributes have no message digest")
        }
        guard let actual = digest(tstInfo, oid: digestOID) else { throw corrupt("its digest algorithm (\(oidText(digestOID))) is not one Tapedeck checks") }
        guard actual == claimed else { throw corrupt("its signed message digest is not the digest of its TSTInfo: the token was changed") }
        guard let algorithm = signatureAlgorithmOf(signatureOID, digest: digestOID) else {
            throw corrupt("its signature algorithm (\(oidText(signatureOID))) is not one Tapedeck checks")
        }
        // issuerAndSerialNumber: the serial must match; a key identifier: any carried certificate may be it.
        let serial = identifier.tag == 0x30 ? serialNumber(in: Array(signer.bytes[identifier.range])) : nil
        let candidates = certificates.filter { certificate in
            guard let serial else { return true }
            return Array(certificate.serialNumber.bytes).drop { $0 == 0 } == serial.drop { $0 == 0 }
        }
        guard let by = candidates.first(where: { $0.publicKey.isValidSignature(signature, for: signedBytes, signatureAlgorithm: algorithm) }) else {
            throw corrupt(certificates.isEmpty ? "it carries no certificate to check its signature with"
                                                : "its signature does not verify with the authority's certificate: the token was changed")
        }
        return Signed(token: token, signer: by, certificates: certificates)
    }

    /// The serial number of an issuerAndSerialNumber's content.
    static func serialNumber(in issuerAndSerial: [UInt8]) -> [UInt8]? {
        var r = Reader(issuerAndSerial)
        guard (try? r.element(0x30)) != nil else { return nil }
        return try? r.element(0x02)
    }

    /// The messageDigest attribute's value in signed attributes' content.
    static func messageDigest(in attributes: [UInt8]) throws -> [UInt8]? {
        var r = Reader(attributes)
        while r.at < attributes.count {
            var attribute = try r.enter(0x30)
            let oid = try attribute.element(0x06)
            var values = try attribute.enter(0x31)
            if oid == messageDigestOID { return try values.element(0x04) }
        }
        return nil
    }

    /// The digest of `bytes` by the algorithm `oid` names (SHA-1, SHA-256, SHA-384, SHA-512).
    static func digest(_ bytes: [UInt8], oid: [UInt8]) -> [UInt8]? {
        switch oidText(oid) {
        case "2.16.840.1.101.3.4.2.1": Array(SHA256.hash(data: bytes))
        case "2.16.840.1.101.3.4.2.2": Array(SHA384.hash(data: bytes))
        case "2.16.840.1.101.3.4.2.3": Array(SHA512.hash(data: bytes))
        case "1.3.14.3.2.26": Array(Insecure.SHA1.hash(data: bytes))
        default: nil
        }
    }

    /// The certificate signature algorithm a SignerInfo's signature and digest algorithms make
    /// (CMS often names plain rsaEncryption and the digest apart).
    static func signatureAlgorithmOf(_ oid: [UInt8], digest: [UInt8]) -> Certificate.SignatureAlgorithm? {
        let digestName = oidText(digest)
        switch oidText(oid) {
        case "1.2.840.113549.1.1.1":
            switch digestName {
            case "2.16.840.1.101.3.4.2.1": return .sha256WithRSAEncryption
            case "2.16.840.1.101.3.4.2.2": return .sha384WithRSAEncryption
            case "2.16.840.1.101.3.4.2.3": return .sha512WithRSAEncryption
            case "1.3.14.3.2.26": return .sha1WithRSAEncryption
            default: return nil
            }
        case "1.2.840.113549.1.1.11": return .sha256WithRSAEncryption
        case "1.2.840.113549.1.1.12": return .sha384WithRSAEncryption
        case "1.2.840.113549.1.1.13": return .sha512WithRSAEncryption
        case "1.2.840.113549.1.1.5": return .sha1WithRSAEncryption
        case "1.2.840.10045.4.3.2": return .ecdsaWithSHA256
        case "1.2.840.10045.4.3.3": return .ecdsaWithSHA384
        case "1.2.840.10045.4.3.4": return .ecdsaWithSHA512
        case "1.3.101.112": return .ed25519
        default: return nil
        }
    }

    /// Certificates in PEM text (a CA bundle, as `openssl ts -verify -CAfile` takes).
    /// - Throws: `.corruptFile` when a block is not a certificate.
    public static func certificates(pem: String, skippingUnreadable: Bool = false) throws -> [Certificate] {
        var found: [Certificate] = []
        var rest = Substring(pem)
        let begin = "-----BEGIN CERTIFICATE-----", end = "-----END CERTIFICATE-----"
        while let b = rest.range(of: begin), let e = rest.range(of: end, range: b.upperBound..<rest.endIndex) {
            let body = rest[b.upperBound..<e.lowerBound].filter { !$0.isWhitespace }
            guard let der = Data(base64Encoded: String(body)), let certificate = try? Certificate(derEncoded: Array(der)) else {
                if skippingUnreadable {
                    rest = rest[e.upperBound...]
                    continue
                }
                throw TapedeckError(.corruptFile, "A certificate in the file is not one (PEM, BEGIN CERTIFICATE).")
            }
            found.append(certificate)
            rest = rest[e.upperBound...]
        }
        return found
    }
}

/// The certificates trusted to vouch for time-stamping authorities. A plain value; any thread.
public struct TimeStampRoots: Sendable {
    public var certificates: [Certificate]

    public init(certificates: [Certificate]) { self.certificates = certificates }

    /// The certificates `tapedeck verify` trusts to vouch for time-stamping authorities:
    /// `file` (`provenance.tsa-ca`, `verify --tsa-ca`), else the system's CA bundle; empty when none is found.
    /// - Throws: when the file named cannot be read or holds no certificate. - Thread: any; blocks reading it.
    public static func load(file: String?) throws -> TimeStampRoots {
        let named = file?.trimmingCharacters(in: .whitespaces) ?? ""
        let path = named.isEmpty ? ["/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt"].first { FileManager.default.fileExists(atPath: $0) } : named
        guard let path else { return TimeStampRoots(certificates: []) }
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw TapedeckError(.notFound, "\(path) cannot be read. Give a file of PEM certificates (BEGIN CERTIFICATE) that vouch for the time-stamping authority.")
        }
        // A system bundle may hold a certificate this reader does not take: it is skipped there.
        let roots = try TimeStamp.certificates(pem: text, skippingUnreadable: named.isEmpty)
        if roots.isEmpty, !named.isEmpty {
            throw TapedeckError(.corruptFile, "\(path) holds no PEM certificate (BEGIN CERTIFICATE). Give the authority's CA certificate, as `openssl ts -verify -CAfile` takes it.")
        }
        return TimeStampRoots(certificates: roots)
    }
}

extension TimeStamp.Signed {
    /// Why the authority is not one `roots` vouch for (`nil`: its certificate chains to one of
    /// them, was valid at the token's time, and may stamp time: extendedKeyUsage timeStamping).
    /// - Thread: any; runs on the caller's task; never blocks.
    public func trustProblem(roots: TimeStampRoots) async -> String? {
        guard !roots.certificates.isEmpty else { return "no trusted authority certificates were given" }
        var verifier = Verifier(rootCertificates: CertificateStore(roots.certificates)) {
            RFC5280Policy(fixedExpiryValidationTime: token.time)
            TimeStampingPolicy()
        }
        switch await verifier.validate(leaf: signer, intermediates: CertificateStore(certificates)) {
        case .validCertificate: return nil
        case .couldNotValidate(let failures):
            if failures.isEmpty { return "its certificate does not lead to a trusted authority certificate" }
            return "its certificate is not trusted: " + failures.map { "\($0.policyFailureReason)" }.joined(separator: "; ")
        }
    }
}

/// RFC 3161 §2.3: the authority's certificate says it stamps time (extendedKeyUsage
/// timeStamping, the only purpose, critical).
struct TimeStampingPolicy: VerifierPolicy {
    let verifyingCriticalExtensions: [ASN1ObjectIdentifier] = [.X509ExtensionID.extendedKeyUsage]

    func chainMeetsPolicyRequirements(chain: UnverifiedCertificateChain) async -> PolicyEvaluationResult {
        guard let usage = try? chain.leaf.extensions.extendedKeyUsage, usage.contains(.timeStamping) else {
            return .failsToMeetPolicy(reason: "the certificate is not for time stamping (no extendedKeyUsage timeStamping)")
        }
        return .meetsPolicy
    }
}
