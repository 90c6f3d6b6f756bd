import Crypto
import Foundation
@testable import TapedeckProvenance
import TapedeckCore
import Testing

/// The chain's arithmetic against the test vector docs/PROVENANCE.md gives, and random takes
/// sealed and verified in memory: whatever is written, checkpointed and signed verifies intact;
/// any changed byte of audio is found in the checkpoint that holds it.
@Suite("Provenance chain")
struct ProvenanceChainTests {
    static let format = AudioFormat(sampleRate: 48_000, channels: 2, sampleFormat: .s16)
    static let vectorKey = DeviceKey(key: try! Curve25519.Signing.PrivateKey(rawRepresentation: Data((1...32).map { UInt8($0) })))
    static let vectorTake = "00000000-0000-4000-8000-000000000001"

    /// A writer that keeps its bytes in memory.
    final class Memory: TakeWriter {
        var bytes = Data()
        func write(_ buffer: UnsafeRawPointer, frames: Int) throws { bytes.append(buffer.assumingMemoryBound(to: UInt8.self), count: frames * 4) }
        func checkpoint() throws {}
        func finish() throws -> Int64 { Int64(bytes.count / 4) }
        var verifiesOutput: Bool { false }
        var verification: String? { nil }
        func abandon() {}
    }

    /// A reader of bytes in memory, in `format`.
    final class Reading: TakeReader {
        let bytes: Data
        var at = 0
        init(_ bytes: Data) { self.bytes = bytes }
        var format: AudioFormat { ProvenanceChainTests.format }
        var frameCount: Int64 { Int64(bytes.count / 4) }
        func read(into buffer: UnsafeMutableRawPointer, maxFrames: Int) throws -> Int {
            let n = min(maxFrames, (bytes.count - at) / 4)
            bytes.withUnsafeBytes { buffer.copyMemory(from: $0.baseAddress! + at, byteCount: n * 4) }
            at += n * 4
            return n
        }
        func close() {}
    }

    static func folder() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-chain-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    @Test("the test vector of docs/PROVENANCE.md")
    func vector() throws {
        let key = Self.vectorKey
        #expect(key.publicKey.description == "ed25519:ebVWLo/mVPlAeLES6KmLp5AfhTrmlb7X4OORC60ElmQ=")
        let genesis = ProvenanceChain.genesis(takeID: Self.vectorTake, format: Self.format, publicKey: key.publicKey.raw)
        // Four frames: the bytes 0, 1, 2, … 15.
        let frames = Data((0..<16).map { UInt8($0) })
        let hash = Data(SHA256.hash(data: frames))
        let head = ProvenanceChain.next(head: genesis, from: 0, to: 4, hash: hash)
        let signature = try key.sign(ProvenanceChain.signedMessage(checkpoint: 1, frames: 4, head: head))
        #expect(ProvenanceChain.hex(genesis) == "954cfff3f0e0ad2171654a3d8907402ffe79b66fbc190bb0c5df255f699e0696")
        #expect(ProvenanceChain.hex(hash) == "be45cb2605bf36bebde684841a28f0fd43c69850a3dce5fedba69928ee3a8991")
        #expect(ProvenanceChain.hex(head) == "7350d456c2d547fe17694015c1d665e66935766c7a83707efac128fd3236fbda")
        #expect(signature.base64EncodedString() == "CTz/DcqLF5ArGOXuZcD3Gm1i9ILsWPkLs14bWCMTNqiouCOTcxEmhKTx4EisTnAO5hfpzA75UO+wFHaXOGhXAg==")
        let end = try key.sign(ProvenanceChain.endMessage(checkpoint: 1, frames: 4, head: head))
        #expect(end.base64EncodedString() == "RaRuxHM+mlkrRRM5d6dAmhqN4Sv7VKH1rtKI6zuCajTolJ7g6X9znEb53b1FrkawMg66b3sUHZT8NlUpwCEwAA==")
    }

    @Test("the end is signed: a chain cut back to an earlier signature with an end line added does not verify; an end without its signature (an earlier Tapedeck's) is not proven")
    func signedEnd() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let memory = Memory()
        let audio = folder.appendingPathComponent("take.wav")
        let writer = try SealingWriter(memory, takeID: "t", format: Self.format, sidecar: ProvenanceChain.sidecar(of: audio), key: Self.vectorKey, signEvery: 1)
        let frames = [UInt8](repeating: 3, count: 4000)
        for _ in 0..<4 {
            try frames.withUnsafeBytes { try writer.write($0.baseAddress!, frames: 1000) }
            try writer.checkpoint()
        }
        _ = try writer.finish()
        let chain = try Data(contentsOf: ProvenanceChain.sidecar(of: audio))
        #expect(try ChainVerifier.verify(Reading(memory.bytes), chain: chain, trusted: nil).outcome == .intact)
        let lines = chain.split(separator: 0x0A).map { String(decoding: $0, as: UTF8.self) }
        // Cut back after checkpoint 2's signature, the audio with it, and the old end line's shape added.
        let keep = lines.prefix { !$0.contains("\"k\":3") }
        let forgedEnd = #"{"end":2,"frames":2000,"sig":"\#(lines.last!.split(separator: "\"sig\":\"").last!.prefix(88))","type":"end"}"#
        for end in [forgedEnd, #"{"end":2,"frames":2000,"type":"end"}"#] {
            let cut = Data((keep + [end]).joined(separator: "\n").utf8) + Data([0x0A])
            let v = try ChainVerifier.verify(Reading(memory.bytes.prefix(8000)), chain: cut, trusted: nil)
            if end == forgedEnd {
                if case .brokenChain(let why) = v.outcome { #expect(why.contains("end")) } else { Issue.record("\(v.outcome)") }
            } else {
                #expect(v.outcome == .intactUpTo(checkpoint: 2, of: 2) && v.endUnsigned && !v.finished, "\(v.outcome)")
            }
        }
    }

    @Test("random takes sealed and verified: intact as written; a changed byte is found in its checkpoint; cut short, intact up to a signed checkpoint")
    func randomTakes() throws {
        var rng = SystemRandomNumberGenerator()
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        for round in 0..<40 {
            let memory = Memory()
            let audio = folder.appendingPathComponent("take-\(round).wav")
            let every = Int.random(in: 1...4, using: &rng)
            let writer = try SealingWriter(memory, takeID: "take-\(round)", format: Self.format, sidecar: ProvenanceChain.sidecar(of: audio),
                                           key: Self.vectorKey, signEvery: every)
            var bounds: [Int64] = []
            for _ in 0..<Int.random(in: 1...12, using: &rng) {
                let frames = Int.random(in: 0...3000, using: &rng)
                let chunk = (0..<frames * 4).map { _ in UInt8.random(in: 0...255, using: &rng) }
                try chunk.withUnsafeBytes { try writer.write($0.baseAddress!, frames: frames) }
                if Bool.random(using: &rng) {
                    try writer.checkpoint()
                    bounds.append(Int64(memory.bytes.count / 4))
                }
            }
            _ = try writer.finish()
            let chain = try Data(contentsOf: ProvenanceChain.sidecar(of: audio))
            let intact = try ChainVerifier.verify(Reading(memory.bytes), chain: chain, trusted: Self.vectorKey.publicKey)
            #expect(intact.outcome == .intact, "round \(round): \(intact.outcome)")
            let total = memory.bytes.count / 4
            guard total > 0 else { continue }
            // One byte changed.
            var changed = memory.bytes
            let at = Int.random(in: 0..<changed.count, using: &rng)
            changed[at] ^= 0x80
            let altered = try ChainVerifier.verify(Reading(changed), chain: chain, trusted: nil)
            if case .altered(_, let a, let b) = altered.outcome {
                #expect(Int64(at / 4) >= a && Int64(at / 4) < b, "round \(round): byte \(at) in \(a)..<\(b)")
            } else {
                Issue.record("round \(round): a changed byte gives \(altered.outcome)")
            }
            // Cut short: never altered; proven up to a signed checkpoint within what is left.
            let keep = Int.random(in: 0..<total, using: &rng)
            let cut = try ChainVerifier.verify(Reading(memory.bytes.prefix(keep * 4)), chain: chain, trusted: nil)
            if case .intactUpTo = cut.outcome {
                #expect(cut.signedFrames <= Int64(keep))
            } else {
                Issue.record("round \(round): cut to \(keep) of \(total) frames gives \(cut.outcome)")
            }
        }
    }

    @Test("a chain is never written over: one left beside a file that is gone is refused, saying what to do")
    func neverOverwritten() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let audio = folder.appendingPathComponent("a.wav")
        try Data("earlier".utf8).write(to: ProvenanceChain.sidecar(of: audio))
        do {
            _ = try SealingWriter(Memory(), takeID: "t", format: Self.format, sidecar: ProvenanceChain.sidecar(of: audio), key: Self.vectorKey, signEvery: 1)
            Issue.record("an existing chain was written over")
        } catch let e as TapedeckError {
            #expect(e.code == .alreadyExists && e.message.contains("Move it away"), "\(e.message)")
        }
        #expect(try String(contentsOf: ProvenanceChain.sidecar(of: audio), encoding: .utf8) == "earlier")
    }

    @Test("a chain cut in the middle of a line (a process killed while writing it) reads up to the last whole line")
    func cutLine() throws {
        let text = Data("{\"type\":\"header\"}\n{\"type\":\"checkp".utf8)
        let (lines, cutShort) = ProvenanceChain.read(text)
        #expect(cutShort && lines.isEmpty)
    }
}
