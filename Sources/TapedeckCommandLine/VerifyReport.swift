import Foundation
import TapedeckApp
import TapedeckCore
import TapedeckProvenance

/// What `tapedeck verify` says of one take or file: lines for a person, an exit status, JSON.
struct VerifyReport {
    var subject: String
    var audio: URL
    var chain: URL?
    var verdict: ChainVerdict
    /// An export's signed statement, when the file has one and no chain.
    var statement: StatementVerdict?
    /// For each of the verdict's time stamps: why its authority is not trusted (`nil`: trusted).
    var stampTrust: [String?] = []
    /// The frames the library says the take finished with (a finished take in the library).
    var libraryFrames: Int64?

    var status: Int32 {
        if let statement { return statement.problem == nil ? VerifyCommand.intact : VerifyCommand.failed }
        return switch verdict.outcome {
        case .intact: VerifyCommand.intact
        case .intactUpTo: VerifyCommand.partial
        case .unsigned: VerifyCommand.unsigned
        case .altered, .brokenChain, .otherKey: VerifyCommand.failed
        }
    }

    /// `0:12.500` at the file's rate.
    func time(_ frames: Int64) -> String {
        Terminal.clock(Double(frames) / Double(max(1, verdict.sampleRate)))
    }

    var result: String {
        if let statement { return statement.problem == nil ? "exported" : statement.problem!.contains("bytes") ? "altered" : "does-not-verify" }
        return switch verdict.outcome {
        case .intact: "intact"
        case .intactUpTo: "intact-up-to"
        case .altered: "altered"
        case .brokenChain: "does-not-verify"
        case .otherKey: "other-key"
        case .unsigned: "unsigned"
        }
    }

    /// The verdict in words, then who signed and what the clock said.
    var lines: [String] {
        if let statement { return statementLines(statement) }
        let v = verdict
        var out: [String]
        switch v.outcome {
        case .intact:
            out = ["\(subject): intact. Every frame (\(v.fileFrames), \(time(v.fileFrames))) is signed, in \(v.checkpoints) checkpoint\(v.checkpoints == 1 ? "" : "s"), and the take finished."]
        case .intactUpTo(let k, let n):
            out = [k == 0
                ? "\(subject): nothing is proven yet: no signed checkpoint covers its audio (of \(n) checkpoint\(n == 1 ? "" : "s"))."
                : "\(subject): intact up to checkpoint \(k) of \(n): frames 0-\(v.signedFrames) (\(time(v.signedFrames))) are as signed."]
            let unproven = v.fileFrames - v.signedFrames
            if let recorded = libraryFrames, recorded > v.signedFrames, v.chainFrames < recorded {
                out.append("  The library says this take finished with \(recorded) frames (\(time(recorded))), but its chain stops at \(v.chainFrames): the chain was cut back after recording.")
            } else if let recorded = libraryFrames, recorded > v.fileFrames {
                out.append("  The library says this take finished with \(recorded) frames (\(time(recorded))); its file holds \(v.fileFrames): it was cut short after recording.")
            }
            if v.endUnsigned {
                out.append("  Its end line is not signed (a chain from a Tapedeck before the end was signed, or an end added later): that the take finished is not proven.")
            } else if v.fileFrames < v.chainFrames {
                out.append("  The file ends \(v.chainFrames - v.fileFrames) frames (\(time(v.chainFrames - v.fileFrames))) before what its chain covers: it was cut short. The \(max(0, unproven)) frames it holds after checkpoint \(k) are not proven.")
            } else if v.fileFrames > v.chainFrames, v.finished {
                out.append("  The \(v.fileFrames - v.chainFrames) frames after the end of what was signed (\(time(v.fileFrames - v.chainFrames))) were added after the take finished.")
            } else if unproven > 0 || !v.finished {
                out.append("  The recording never finished (a power loss, a killed process): the \(unproven) frames (\(time(unproven))) after its last signature are not proven.")
            }
        case .altered(let k, let a, let b):
            out = ["\(subject): altered in frames \(a)-\(b) (\(time(a)) to \(time(b)), checkpoint \(k)): the audio there is not what was signed."]
        case .brokenChain(let why), .otherKey(let why):
            out = ["\(subject): does not verify: \(why.prefix(1).lowercased() + why.dropFirst())"]
        case .unsigned:
            out = ["\(subject): unsigned: there is no chain beside it (\(audio.lastPathComponent)\(ProvenanceChain.suffix))."]
        }
        if case .otherKey = v.outcome {} else if let fingerprint = v.fingerprint, v.outcome != .unsigned {
            out.append("  Key \(fingerprint)" + (v.keyGiven ? " (the key given)." : " (the chain's own: give --key to check it is the key you trust)."))
        }
        out += stampLines
        for (when, synced, error) in [("start", v.header?.clockSynchronized, v.header?.clockErrorSeconds), ("end", v.end?.clockSynchronized, v.end?.clockErrorSeconds)] {
            guard let synced else { continue }
            out.append("  Clock at the \(when): \(synced ? "synchronized" + (error.map { String(format: " (estimated error %.3f s)", $0) } ?? "") : "not synchronized: the time of day may be off").")
        }
        return out
    }

    /// The time stamps: when each authority saw which head, and whether it is one to trust.
    var stampLines: [String] {
        let v = verdict
        guard v.outcome != .unsigned, statement == nil else { return [] }
        var out: [String] = []
        for (i, stamp) in v.stamps.enumerated() {
            let which = stamp.checkpoint == v.checkpoints && v.finished ? "its end (checkpoint \(stamp.checkpoint))" : "checkpoint \(stamp.checkpoint) of \(v.checkpoints)"
            let problem = i < stampTrust.count ? stampTrust[i] : "not checked"
            out.append("  Time-stamped: \(which) existed by \(UTCTimestamp.seconds(stamp.time)), says \(stamp.signed.authority)"
                       + (problem.map { " (\($0): give the authority's CA certificate with --tsa-ca FILE)." } ?? ", a trusted authority."))
        }
        if let tsa = v.header?.tsa, v.finished, !v.stamps.contains(where: { $0.checkpoint == v.checkpoints }) {
            out.append("  Its end has no time stamp yet: the recorder asks \(tsa); a request may wait in that machine's queue (`tapedeck keys stamp` sends it).")
        }
        return out
    }

    /// An export's statement in words: what it was made from, by which key, and whether the file is as exported.
    func statementLines(_ s: StatementVerdict) -> [String] {
        guard let st = s.statement, s.problem == nil else { return ["\(subject): does not verify: \(s.problem ?? "")"] }
        var out = ["\(subject): exported from \(st.sources.count == 1 ? "a signed take" : "\(st.sources.count) signed takes"), and byte for byte as exported (\(st.output.size) bytes, SHA-256 \(st.output.sha256.prefix(16))…)."]
        for src in st.sources {
            out.append("  From take \(src.take): its chain signed up to checkpoint \(src.checkpoint) (\(src.frames) frames), head \(src.head.prefix(16))…, key \((try? DeviceKey.PublicKey(parsing: src.key))?.fingerprint ?? src.key).")
        }
        if !st.settings.isEmpty { out.append("  Settings: " + st.settings.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ", ") + ".") }
        out.append("  Statement signed by key \(s.fingerprint ?? "")" + (s.keyGiven ? " (the key given)." : " (its own: give --key to check it is the key you trust)."))
        out.append("  Check a source with `tapedeck verify` on the take's own file, against the same key.")
        return out
    }

    var json: VerifyJSON {
        var j = VerifyJSON(subject: subject, file: audio.path, chain: chain?.path, result: result, message: lines.first ?? "",
                           checkpoints: verdict.checkpoints, signedFrames: verdict.signedFrames, fileFrames: verdict.fileFrames,
                           key: verdict.key, fingerprint: verdict.fingerprint, keyGiven: verdict.keyGiven, takeID: verdict.takeID,
                           finished: verdict.finished, clockSynchronized: verdict.header?.clockSynchronized,
                           clockErrorSeconds: verdict.header?.clockErrorSeconds, exitStatus: status)
        j.timestamps = verdict.stamps.enumerated().map { i, stamp in
            let problem = i < stampTrust.count ? stampTrust[i] : "not checked"
            return VerifyJSON.Stamp(checkpoint: stamp.checkpoint, time: UTCTimestamp.format(stamp.time), authority: stamp.signed.authority,
                                    tsa: stamp.tsa, policy: stamp.signed.token.policy, trusted: problem == nil, trustProblem: problem)
        }
        if let st = statement?.statement {
            j.exportedFrom = st.sources
            j.key = st.key
            j.fingerprint = statement?.fingerprint
            j.keyGiven = statement?.keyGiven ?? false
        }
        switch verdict.outcome {
        case .intactUpTo(let k, _): j.provenCheckpoint = k
        case .intact: j.provenCheckpoint = verdict.checkpoints
        case .altered(let k, let a, let b):
            j.alteredCheckpoint = k
            j.alteredFrames = [a, b]
        default: break
        }
        return j
    }
}

/// `verify --json`: one take or file (docs/JSON.md, `verification`).
struct VerifyJSON: Encodable {
    var kind = "verification"
    var schema = JSONSchema.version
    var subject: String
    var file: String
    var chain: String?
    var result: String
    var message: String
    var checkpoints: Int
    var provenCheckpoint: Int?
    var alteredCheckpoint: Int?
    var alteredFrames: [Int64]?
    var signedFrames: Int64
    var fileFrames: Int64
    var key: String?
    var fingerprint: String?
    var keyGiven: Bool
    var takeID: String?
    var finished: Bool
    var clockSynchronized: Bool?
    var clockErrorSeconds: Double?
    var exitStatus: Int32
    /// An export's statement: the signed takes it was made from.
    var exportedFrom: [ExportStatement.Source]?
    /// The chain's RFC 3161 time stamps, each one whose token holds.
    var timestamps: [Stamp] = []

    struct Stamp: Encodable {
        var checkpoint: Int
        var time: String
        var authority: String
        var tsa: String
        var policy: String
        var trusted: Bool
        var trustProblem: String?
    }
}
