import Crypto
import Foundation
@testable import TapedeckProvenance
import TapedeckCore
import Testing
import TapedeckTesting
import Logging

/// RFC 3161 requests and tokens against a time-stamping authority made with `openssl ts` (a CA
/// and a TSA certificate made for the test): openssl reads the request, answers it, and verifies
/// the token; the token's time and digest read here are what openssl says.
@Suite("Time stamps (RFC 3161)")
struct TimeStampTests {
    @Test("openssl ts answers the request for a chain's head; the token's digest and time are read back; openssl ts -verify accepts it")
    func againstOpenSSL() throws {
        // The fixture's CA and authority; here openssl answers the request directly, from the file.
        let tsa = try TimeStampAuthority()
        defer { tsa.close() }
        let folder = tsa.folder
        // A chain's head, as the digest.
        let head = Data(SHA256.hash(data: Data("a chain's head".utf8)))
        try TimeStamp.request(digest: head, nonce: 0x1234_5678_9ABC).write(to: folder.appendingPathComponent("req.der"))
        let (q, query) = try TimeStampAuthority.run(["openssl", "ts", "-query", "-in", "req.der", "-text"], in: folder)
        #expect(q == 0 && query.contains("Hash Algorithm: sha256") && query.contains("Nonce: 0x123456789ABC"), "\(query)")
        let before = Date().addingTimeInterval(-2)
        let (a, answered) = try TimeStampAuthority.run(["openssl", "ts", "-reply", "-queryfile", "req.der", "-config", "tsa.cnf", "-out", "resp.der"], in: folder)
        try #require(a == 0, "\(answered)")
        let response = try Data(contentsOf: folder.appendingPathComponent("resp.der"))
        let token = try TimeStamp.token(fromResponse: response)
        #expect(token.digest == head)
        #expect(token.policy == "1.2.3.4.1")
        #expect(token.time >= before && token.time <= Date().addingTimeInterval(2), "\(token.time)")
        // The token alone, as a chain would keep it, is what openssl verifies for that digest.
        try token.der.write(to: folder.appendingPathComponent("token.der"))
        let hex = head.map { String(format: "%02x", $0) }.joined()
        let (v, verified) = try TimeStampAuthority.run(["openssl", "ts", "-verify", "-digest", hex, "-in", "token.der", "-token_in", "-CAfile", "ca.pem", "-untrusted", "tsa.pem"], in: folder)
        #expect(v == 0 && verified.contains("Verification: OK"), "\(verified)")
        // A refusal and a garbled answer are said, not misread.
        #expect(throws: TapedeckError.self) { try TimeStamp.token(fromResponse: Data([0x30, 0x05, 0x30, 0x03, 0x02, 0x01, 0x02])) }
        #expect(throws: TapedeckError.self) { try TimeStamp.parse(token: response.prefix(40)) }
    }

    @Test("a token's CMS signature is checked: openssl's token holds and its authority chains to the test CA; a changed token never reads as another time or digest; another CA does not vouch for it")
    func signatureAndTrust() async throws {
        let tsa = try TimeStampAuthority()
        defer { tsa.close() }
        let head = Data(SHA256.hash(data: Data("head".utf8)))
        let answer = try TimeStamper.post(TimeStamp.request(digest: head, nonce: 7), to: tsa.url, timeout: 20)
        let token = try TimeStamp.token(fromResponse: answer)
        let signed = try TimeStamp.checkSignature(of: token.der)
        #expect(signed.token.digest == head && signed.authority.contains("Tapedeck Test TSA"), "\(signed.authority)")
        let roots = try TimeStampRoots.load(file: tsa.caFile.path)
        #expect(await signed.trustProblem(roots: roots) == nil)
        // Another authority's CA (a second fixture) does not vouch for this one.
        let other = try TimeStampAuthority()
        defer { other.close() }
        let elsewhere = await signed.trustProblem(roots: try TimeStampRoots.load(file: other.caFile.path))
        #expect(elsewhere != nil)
        #expect(await signed.trustProblem(roots: TimeStampRoots(certificates: [])) != nil)
        // Bytes changed throughout the token (every 7th): whatever still reads says what the
        // authority signed, never another time, digest or policy.
        var forged = 0, refused = 0
        for at in stride(from: 0, to: token.der.count, by: 7) {
            var changed = token.der
            changed[at] ^= 0x01
            guard let s = try? TimeStamp.checkSignature(of: changed) else {
                refused += 1
                continue
            }
            if s.token.time != signed.token.time || s.token.digest != head || s.token.policy != signed.token.policy { forged += 1 }
        }
        #expect(forged == 0 && refused > token.der.count / 14, "\(forged) forged, \(refused) refused")
        // Not PEM: said.
        #expect(throws: TapedeckError.self) { try TimeStamp.certificates(pem: "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n") }
    }

    @Test("the stamper: a take's end is stamped and the token goes into its chain, verified; while the authority is down the request waits in the queue and is sent when it is back")
    func stamper() throws {
        let tsa = try TimeStampAuthority()
        defer { tsa.close() }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-stamps-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let stamper = TimeStamper(authority: tsa.url, every: 0, folder: folder.appendingPathComponent("queue"), logger: Logger(label: "test"))
        let key = ProvenanceChainTests.vectorKey
        func take(_ name: String) throws -> (URL, Data) {
            let memory = ProvenanceChainTests.Memory()
            let audio = folder.appendingPathComponent(name)
            let writer = try SealingWriter(memory, takeID: name, format: ProvenanceChainTests.format, sidecar: ProvenanceChain.sidecar(of: audio),
                                           key: key, signEvery: 2, stamper: stamper)
            let frames = (0..<4000).map { UInt8(truncatingIfNeeded: $0) }
            for _ in 0..<3 {
                try frames.withUnsafeBytes { try writer.write($0.baseAddress!, frames: 1000) }
                try writer.checkpoint()
            }
            _ = try writer.finish()
            return (audio, memory.bytes)
        }
        let (audio, bytes) = try take("a.wav")
        #expect(stamper.pending().count == 1)
        let round = stamper.sendQueued()
        #expect(round.sent == 1 && round.left == 0 && stamper.pending().isEmpty, "\(round)")
        let chain = try Data(contentsOf: ProvenanceChain.sidecar(of: audio))
        let verdict = try ChainVerifier.verify(ProvenanceChainTests.Reading(bytes), chain: chain, trusted: key.publicKey)
        #expect(verdict.outcome == .intact && verdict.stamps.count == 1 && verdict.stamps.first?.checkpoint == 3, "\(verdict.outcome)")
        // openssl agrees: the stored token stamps the head of the chain's last checkpoint.
        let lines = ProvenanceChain.read(chain).lines
        guard case .stamp(let stamp)? = lines.last else { Issue.record("no timestamp line"); return }
        let (status, said) = try tsa.opensslVerify(token: try #require(Data(base64Encoded: stamp.token)), digest: stamp.head)
        #expect(status == 0 && said.contains("Verification: OK"), "\(said)")

        // The authority down: the request waits; back: it is sent.
        tsa.stop()
        let (audio2, bytes2) = try take("b.wav")
        let down = stamper.sendQueued(timeout: 2)
        #expect(down.sent == 0 && down.left == 1 && (down.problem ?? "").contains("could not be reached"), "\(down)")
        try tsa.start()
        #expect(stamper.sendQueued().sent == 1)
        let v2 = try ChainVerifier.verify(ProvenanceChainTests.Reading(bytes2), chain: try Data(contentsOf: ProvenanceChain.sidecar(of: audio2)), trusted: nil)
        #expect(v2.outcome == .intact && v2.stamps.count == 1)

        // A token moved onto another chain, or its head changed: the chain does not verify.
        var text = try String(contentsOf: ProvenanceChain.sidecar(of: audio2), encoding: .utf8)
        let moved = text.split(separator: "\n").last.map(String.init) ?? ""
        text = try String(contentsOf: ProvenanceChain.sidecar(of: audio), encoding: .utf8) + moved + "\n"
        let mixed = try ChainVerifier.verify(ProvenanceChainTests.Reading(bytes), chain: Data(text.utf8), trusted: nil)
        if case .brokenChain(let why) = mixed.outcome { #expect(why.contains("time stamp")) } else { Issue.record("\(mixed.outcome)") }
    }

    @Test("a long take's head is stamped every so often as well as at its end; each token verifies for its own checkpoint")
    func stampedEverySoOften() throws {
        let tsa = try TimeStampAuthority()
        defer { tsa.close() }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-stamps-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let stamper = TimeStamper(authority: tsa.url, every: 1, folder: folder.appendingPathComponent("queue"), logger: Logger(label: "test"))
        let memory = ProvenanceChainTests.Memory()
        let audio = folder.appendingPathComponent("long.wav")
        let writer = try SealingWriter(memory, takeID: "long", format: ProvenanceChainTests.format, sidecar: ProvenanceChain.sidecar(of: audio),
                                       key: ProvenanceChainTests.vectorKey, signEvery: 1, stamper: stamper)
        let frames = [UInt8](repeating: 7, count: 4000)
        for _ in 0..<6 {
            try frames.withUnsafeBytes { try writer.write($0.baseAddress!, frames: 1000) }
            try writer.checkpoint()
            Thread.sleep(forTimeInterval: 0.45)
        }
        _ = try writer.finish()
        let asked = stamper.pending().map(\.k)
        #expect(asked.count >= 2 && asked.last == 6 && asked.dropLast().allSatisfy { $0 < 6 }, "\(asked)")
        #expect(stamper.sendQueued().left == 0)
        let verdict = try ChainVerifier.verify(ProvenanceChainTests.Reading(memory.bytes), chain: try Data(contentsOf: ProvenanceChain.sidecar(of: audio)), trusted: nil)
        #expect(verdict.outcome == .intact && verdict.stamps.map(\.checkpoint) == asked, "\(verdict.outcome) \(verdict.stamps.map(\.checkpoint))")
    }
}
