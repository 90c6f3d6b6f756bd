import Crypto
import Foundation
@testable import TapedeckProvenance
import TapedeckCore
import Testing

/// RFC 3161 requests and tokens against a time-stamping authority made with `openssl ts` (a CA
/// and a TSA certificate made for the test): openssl reads the request, answers it, and verifies
/// the token; the token's time and digest read here are what openssl says.
@Suite("Time stamps (RFC 3161)")
struct TimeStampTests {
    static func run(_ args: [String], in folder: URL) throws -> (Int32, String) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = args
        p.currentDirectoryURL = folder
        let out = Pipe()
        p.standardOutput = out
        p.standardError = out
        try p.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return (p.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    @Test("openssl ts answers the request for a chain's head; the token's digest and time are read back; openssl ts -verify accepts it")
    func againstOpenSSL() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-tsa-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let setup = [
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-subj", "/CN=Test CA", "-days", "2",
             "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign"],
            ["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", "tsa.key", "-out", "tsa.csr", "-subj", "/CN=Test TSA"],
            ["openssl", "x509", "-req", "-in", "tsa.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out", "tsa.pem", "-days", "2", "-extfile", "ext.cnf"],
        ]
        try "extendedKeyUsage=critical,timeStamping\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n"
            .write(to: folder.appendingPathComponent("ext.cnf"), atomically: true, encoding: .utf8)
        try "01\n".write(to: folder.appendingPathComponent("tsaserial"), atomically: true, encoding: .utf8)
        try """
            [ tsa ]
            default_tsa = tsa1
            [ tsa1 ]
            dir = \(folder.path)
            serial = $dir/tsaserial
            signer_cert = $dir/tsa.pem
            certs = $dir/ca.pem
            signer_key = $dir/tsa.key
            signer_digest = sha256
            default_policy = 1.2.3.4.1
            other_policies = 1.2.3.4.5
            digests = sha256
            accuracy = secs:1
            ess_cert_id_alg = sha256
            """.write(to: folder.appendingPathComponent("tsa.cnf"), atomically: true, encoding: .utf8)
        for args in setup {
            let (status, said) = try Self.run(args, in: folder)
            try #require(status == 0, "\(args.joined(separator: " ")): \(said)")
        }
        // A chain's head, as the digest.
        let head = Data(SHA256.hash(data: Data("a chain's head".utf8)))
        try TimeStamp.request(digest: head, nonce: 0x1234_5678_9ABC).write(to: folder.appendingPathComponent("req.der"))
        let (q, query) = try Self.run(["openssl", "ts", "-query", "-in", "req.der", "-text"], in: folder)
        #expect(q == 0 && query.contains("Hash Algorithm: sha256") && query.contains("Nonce: 0x123456789ABC"), "\(query)")
        let before = Date().addingTimeInterval(-2)
        let (a, answered) = try Self.run(["openssl", "ts", "-reply", "-queryfile", "req.der", "-config", "tsa.cnf", "-out", "resp.der"], in: folder)
        try #require(a == 0, "\(answered)")
        let response = try Data(contentsOf: folder.appendingPathComponent("resp.der"))
        let token = try TimeStamp.token(fromResponse: response)
        #expect(token.digest == head)
        #expect(token.policy == "1.2.3.4.1")
        #expect(token.time >= before && token.time <= Date().addingTimeInterval(2), "\(token.time)")
        // The token alone, as a chain would keep it, is what openssl verifies for that digest.
        try token.der.write(to: folder.appendingPathComponent("token.der"))
        let hex = head.map { String(format: "%02x", $0) }.joined()
        let (v, verified) = try Self.run(["openssl", "ts", "-verify", "-digest", hex, "-in", "token.der", "-token_in", "-CAfile", "ca.pem", "-untrusted", "tsa.pem"], in: folder)
        #expect(v == 0 && verified.contains("Verification: OK"), "\(verified)")
        // A refusal and a garbled answer are said, not misread.
        #expect(throws: TapedeckError.self) { try TimeStamp.token(fromResponse: Data([0x30, 0x05, 0x30, 0x03, 0x02, 0x01, 0x02])) }
        #expect(throws: TapedeckError.self) { try TimeStamp.parse(token: response.prefix(40)) }
    }
}
