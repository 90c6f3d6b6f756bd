public import Foundation
import Crypto
public import TapedeckCore

/// What `tapedeck verify` finds of an audio file and its chain. A plain value.
public struct ChainVerdict: Sendable, Hashable {
    public enum Outcome: Sendable, Hashable {
        /// Every frame of the file is covered by a valid signature, and the take finished.
        case intact
        /// Checkpoints 1 through `checkpoint` (of `of`) are signed and match; what follows is not
        /// proven (a power loss, a process killed, a file cut short).
        case intactUpTo(checkpoint: Int, of: Int)
        /// Checkpoint `checkpoint`, frames `from..<to`, is signed and its audio does not match.
        case altered(checkpoint: Int, from: Int64, to: Int64)
        /// The chain itself does not hold: a line was changed, removed or replayed.
        case brokenChain(String)
        /// The chain is signed with a key other than the one given.
        case otherKey(String)
        /// There is no chain.
        case unsigned
    }

    public var outcome: Outcome
    /// The signing key (`ed25519:…`) and its fingerprint, as the chain names them.
    public var key: String?
    public var fingerprint: String?
    /// Whether the key was the one given (`--key`); `false`: the chain's own, not checked
    /// against a key the verifier trusts.
    public var keyGiven: Bool
    /// The take the chain is of, its checkpoints, and the frames its signatures cover.
    public var takeID: String?
    public var checkpoints: Int
    public var signedFrames: Int64
    public var fileFrames: Int64
    public var sampleRate: Int
    /// Whether the chain's `end` line is there, signed (the take finished).
    public var finished: Bool
    /// Whether the chain has an `end` line without a signature (written by a Tapedeck from
    /// before the end was signed): the take's end is then not proven.
    public var endUnsigned = false
    /// The frames the chain's checkpoints cover, signed or not.
    public var chainFrames: Int64 = 0
    /// The clock at the take's start and end, as the chain says.
    public var header: ProvenanceChain.Header?
    public var end: ProvenanceChain.End?
    /// The chain's time stamps, each checked: its token is the authority's signature over
    /// checkpoint `checkpoint`'s head (whether the authority is trusted is the caller's question:
    /// ``TimeStamp/Signed/trustProblem(roots:)``).
    public var stamps: [StampCheck] = []

    /// A time stamp that holds.
    public struct StampCheck: Sendable, Hashable {
        /// The checkpoint whose head it stamps, and whether it is the last (the take's end).
        public var checkpoint: Int
        /// The token, its signature checked.
        public var signed: TimeStamp.Signed
        /// The authority asked (its URL).
        public var tsa: String
        /// When the authority says it saw the head.
        public var time: Date { signed.token.time }
    }
}

/// Checks an audio file against its chain (``ProvenanceChain``): the chain's own arithmetic and
/// signatures first, then the file's frames, checkpoint by checkpoint.
/// - Thread: any; blocks while it reads the audio.
public enum ChainVerifier {
    /// Verifies the audio `reader` delivers against the sidecar text `chain` (`nil`: none), with
    /// `trusted` the key the caller trusts (`nil`: the chain's own).
    public static func verify(_ reader: any TakeReader, chain: Data?, trusted: DeviceKey.PublicKey?) throws -> ChainVerdict {
        var verdict = ChainVerdict(outcome: .unsigned, keyGiven: trusted != nil, checkpoints: 0, signedFrames: 0,
                                   fileFrames: reader.frameCount, sampleRate: reader.format.sampleRate, finished: false)
        guard let chain else { return verdict }
        let (lines, _) = ProvenanceChain.read(chain)
        guard case .header(let header)? = lines.first, header.version == ProvenanceChain.version else {
            // A power cut while the chain was being made, before any audio: nothing to prove.
            // (Its header is durable before the first frame is written, so audio without one is not that.)
            if lines.isEmpty, try hasNoAudio(reader) { return verdict }
            verdict.outcome = .brokenChain("The chain's first line is not its header (or a version this Tapedeck does not read).")
            return verdict
        }
        verdict.header = header
        (verdict.key, verdict.fingerprint, verdict.takeID) = (header.key, header.fingerprint, header.take)
        guard let key = try? DeviceKey.PublicKey(parsing: header.key) else {
            verdict.outcome = .brokenChain("The chain's key is not a public key.")
            return verdict
        }
        verdict.fingerprint = key.fingerprint
        if let trusted, trusted != key {
            verdict.outcome = .otherKey("The chain is signed with key \(key.fingerprint), not the one given (\(trusted.fingerprint)).")
            return verdict
        }
        guard header.format == ProvenanceChain.formatText(reader.format) else {
            verdict.outcome = .altered(checkpoint: 1, from: 0, to: reader.frameCount)
            return verdict
        }
        // The chain's arithmetic and signatures.
        var head = ProvenanceChain.genesis(takeID: header.take, format: reader.format, publicKey: key.raw)
        var marks: [(k: Int, from: Int64, to: Int64, hash: Data)] = []
        var heads: [Data] = []
        var lastSigned = 0
        for line in lines.dropFirst() {
            if case .stamp(let stamp) = line {
                // Tokens arrive when the authority answers: after their checkpoint, even after the end.
                do {
                    verdict.stamps.append(try check(stamp, heads: heads))
                } catch let error as TapedeckError {
                    verdict.outcome = .brokenChain("The time stamp of checkpoint \(stamp.k) does not verify: \(error.message)")
                    return verdict
                }
                continue
            }
            if verdict.end != nil {
                verdict.outcome = .brokenChain("The chain goes on after its end: a line was added.")
                return verdict
            }
            switch line {
            case .header:
                verdict.outcome = .brokenChain("The chain has a second header.")
                return verdict
            case .checkpoint(let c):
                let from = marks.last?.to ?? 0
                guard c.k == marks.count + 1, c.from == from, c.to >= c.from, verdict.end == nil, let hash = ProvenanceChain.unhex(c.hash), hash.count == 32,
                      let claimed = ProvenanceChain.unhex(c.head) else {
                    verdict.outcome = .brokenChain("Checkpoint \(c.k) does not follow checkpoint \(marks.count) (frames \(c.from)-\(c.to)).")
                    return verdict
                }
                head = ProvenanceChain.next(head: head, from: c.from, to: c.to, hash: hash)
                guard head == claimed else {
                    verdict.outcome = .brokenChain("Checkpoint \(c.k)'s head is not the chain's: a line before it was changed.")
                    return verdict
                }
                marks.append((c.k, c.from, c.to, hash))
                heads.append(head)
            case .signature(let s):
                guard s.k == marks.count, s.k > 0, s.to == marks[s.k - 1].to, let signature = Data(base64Encoded: s.sig),
                      key.isValid(signature, for: ProvenanceChain.signedMessage(checkpoint: s.k, frames: s.to, head: head)) else {
                    verdict.outcome = .brokenChain("The signature of checkpoint \(s.k) does not verify: it was changed, or taken from elsewhere.")
                    return verdict
                }
                lastSigned = s.k
            case .stamp: break
            case .end(let e):
                guard e.end == marks.count, e.frames == (marks.last?.to ?? 0), lastSigned == marks.count else {
                    verdict.outcome = .brokenChain("The chain's end does not match its last signed checkpoint.")
                    return verdict
                }
                if let sig = e.sig {
                    guard let signature = Data(base64Encoded: sig), key.isValid(signature, for: ProvenanceChain.endMessage(checkpoint: e.end, frames: e.frames, head: head)) else {
                        verdict.outcome = .brokenChain("The signature of the chain's end does not verify: the end was changed or added.")
                        return verdict
                    }
                } else {
                    verdict.endUnsigned = true
                }
                verdict.end = e
            }
        }
        verdict.checkpoints = marks.count
        verdict.chainFrames = marks.last?.to ?? 0
        // An end without its signature (an earlier Tapedeck's chain) does not prove the take finished.
        verdict.finished = verdict.end != nil && !verdict.endUnsigned
        // The audio, checkpoint by checkpoint.
        try checkAudio(reader, marks: marks, lastSigned: lastSigned, into: &verdict)
        return verdict
    }

    /// Whether `reader` delivers no frame at all.
    static func hasNoAudio(_ reader: any TakeReader) throws -> Bool {
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: max(1, reader.format.bytesPerFrame), alignment: 16)
        defer { buffer.deallocate() }
        return try reader.read(into: buffer, maxFrames: 1) == 0
    }

    /// Hashes the audio `reader` delivers checkpoint by checkpoint up to the last signed one,
    /// counts the frames after it, and sets the verdict's outcome.
    static func checkAudio(_ reader: any TakeReader, marks: [(k: Int, from: Int64, to: Int64, hash: Data)], lastSigned: Int,
                           into verdict: inout ChainVerdict) throws {
        let bytesPerFrame = reader.format.bytesPerFrame
        let chunk = 16_384
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: chunk * bytesPerFrame, alignment: 16)
        defer { buffer.deallocate() }
        var provenUpTo = 0
        var read: Int64 = 0
        var ranOut = false
        for mark in marks where mark.k <= lastSigned {
            var hasher = SHA256()
            var left = mark.to - mark.from
            while left > 0 {
                let n = try reader.read(into: buffer, maxFrames: Int(min(left, Int64(chunk))))
                if n == 0 { break }
                hasher.update(bufferPointer: UnsafeRawBufferPointer(start: buffer, count: n * bytesPerFrame))
                left -= Int64(n)
                read += Int64(n)
            }
            if left > 0 {
                ranOut = true
                break
            }
            guard Data(hasher.finalize()) == mark.hash else {
                verdict.outcome = .altered(checkpoint: mark.k, from: mark.from, to: mark.to)
                return
            }
            provenUpTo = mark.k
            verdict.signedFrames = mark.to
        }
        // Frames after the last signed checkpoint: counted, not proven.
        if !ranOut {
            while true {
                let n = try reader.read(into: buffer, maxFrames: chunk)
                if n == 0 { break }
                read += Int64(n)
            }
        }
        verdict.fileFrames = read
        if verdict.finished, provenUpTo == marks.count, read == verdict.signedFrames {
            verdict.outcome = .intact
        } else {
            verdict.outcome = .intactUpTo(checkpoint: provenUpTo, of: marks.count)
        }
    }

    /// Checks a `timestamp` line against the heads read so far: its checkpoint is one of them,
    /// its token is signed (CMS) and covers that head.
    static func check(_ stamp: ProvenanceChain.Stamp, heads: [Data]) throws -> ChainVerdict.StampCheck {
        guard stamp.k >= 1, stamp.k <= heads.count, ProvenanceChain.unhex(stamp.head) == heads[stamp.k - 1] else {
            throw TapedeckError(.corruptFile, "it names a head the chain does not have there.")
        }
        guard let der = Data(base64Encoded: stamp.token) else { throw TapedeckError(.corruptFile, "its token is not base64.") }
        let signed = try TimeStamp.checkSignature(of: der)
        guard signed.token.digest == heads[stamp.k - 1] else {
            throw TapedeckError(.corruptFile, "its token stamps another digest than the checkpoint's head.")
        }
        return ChainVerdict.StampCheck(checkpoint: stamp.k, signed: signed, tsa: stamp.tsa)
    }
}
