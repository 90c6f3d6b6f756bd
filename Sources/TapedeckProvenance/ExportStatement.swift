public import Foundation
import Crypto
public import TapedeckCore

/// A signed statement that an exported file was made from signed takes (`OUTPUT.statement`,
/// written beside the export): which takes (each with its chain's last signed head), with which
/// settings, producing which bytes (size and SHA-256), signed with the exporting machine's key.
/// A file sent on (an MP3 to a newsroom) can so be traced to its signed originals. A plain value.
public struct ExportStatement: Codable, Sendable, Hashable {
    public var type = "tapedeck-export-statement"
    public var version = 1
    public struct Source: Codable, Sendable, Hashable {
        /// The take's id, its chain's key and the head and frames of its last signature.
        public var take: String
        public var key: String
        public var head: String
        public var frames: Int64
        public var checkpoint: Int
    }
    public struct Output: Codable, Sendable, Hashable {
        public var name: String
        public var size: Int64
        public var sha256: String
    }
    public var sources: [Source]
    public var settings: [String: String]
    public var output: Output
    public var created: String
    /// The exporting machine's key and its signature over the statement without `sig`.
    public var key: String
    public var sig: String = ""

    /// The statement's suffix beside the export.
    public static let suffix = ".statement"

    /// What the signature signs: the context, "statement", and the statement's JSON (sorted
    /// keys, no spaces) with `sig` empty.
    func message() throws -> Data {
        var unsigned = self
        unsigned.sig = ""
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return Data(ProvenanceChain.context + Array("\u{0}statement\u{0}".utf8)) + (try encoder.encode(unsigned))
    }

    /// The SHA-256 (hex) and size of the file at `url`, read in pieces. Blocks.
    static func digest(of url: URL) throws -> (String, Int64) {
        let handle = try FileHandle(forReadingFrom: url)
        defer { try? handle.close() }
        var hasher = SHA256()
        var size: Int64 = 0
        while let chunk = try handle.read(upToCount: 1 << 20), !chunk.isEmpty {
            hasher.update(data: chunk)
            size += Int64(chunk.count)
        }
        return (ProvenanceChain.hex(Data(hasher.finalize())), size)
    }

    /// The last signed checkpoint of the chain beside `audio`: its number, frames and head;
    /// `nil` when there is no chain or nothing of it is signed.
    static func lastSigned(beside audio: URL) -> (header: ProvenanceChain.Header, k: Int, frames: Int64, head: String)? {
        guard let data = try? Data(contentsOf: ProvenanceChain.sidecar(of: audio)) else { return nil }
        let (lines, _) = ProvenanceChain.read(data)
        guard case .header(let header)? = lines.first else { return nil }
        var heads: [Int: String] = [:]
        var best: (Int, Int64, String)?
        for line in lines {
            if case .checkpoint(let c) = line { heads[c.k] = c.head }
            if case .signature(let s) = line, let head = heads[s.k] { best = (s.k, s.to, head) }
        }
        return best.map { (header, $0.0, $0.1, $0.2) }
    }
}

extension ProvenanceSealer: ExportAttesting {
    public func attest(output: URL, sources: [URL], settings: [String: String]) throws -> URL? {
        let signed = sources.compactMap { ExportStatement.lastSigned(beside: $0) }
        guard !signed.isEmpty else { return nil }
        // Never vouch for audio that is not what was signed.
        for source in sources {
            guard let verdict = sourceCheck?(source) else { continue }
            switch verdict.outcome {
            case .altered(_, let a, let b):
                throw TapedeckError(.corruptFile, "the take's audio (\(source.lastPathComponent)) is not what was signed, in frames \(a)-\(b), so no statement was signed for this export. `tapedeck verify` on the take says more.")
            case .brokenChain(let why), .otherKey(let why):
                throw TapedeckError(.corruptFile, "the take's chain does not verify (\(TapedeckError.clause(why))), so no statement was signed for this export.")
            case .intact, .intactUpTo, .unsigned: continue
            }
        }
        let (sha, size) = try ExportStatement.digest(of: output)
        var statement = ExportStatement(
            sources: signed.map { .init(take: $0.header.take, key: $0.header.key, head: $0.head, frames: $0.frames, checkpoint: $0.k) },
            settings: settings, output: .init(name: output.lastPathComponent, size: size, sha256: sha),
            created: UTCTimestamp.format(Date()), key: key.publicKey.description)
        statement.sig = try key.sign(try statement.message()).base64EncodedString()
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
        let url = output.deletingLastPathComponent().appendingPathComponent(output.lastPathComponent + ExportStatement.suffix)
        try? FileManager.default.removeItem(at: url)
        try DurableFiles().writeNewFile(try encoder.encode(statement) + Data("\n".utf8), to: url)
        return url
    }
}

/// What `verify` finds of an exported file and its statement. A plain value.
public struct StatementVerdict: Sendable, Hashable {
    public var statement: ExportStatement?
    /// `nil`: the statement holds (signature valid, the file's bytes the ones it names); else why not.
    public var problem: String?
    public var fingerprint: String?
    public var keyGiven: Bool

    /// Checks the statement beside `file` (`nil` when there is none) with `trusted` as the key.
    public static func check(_ file: URL, trusted: DeviceKey.PublicKey?) -> StatementVerdict? {
        let url = file.deletingLastPathComponent().appendingPathComponent(file.lastPathComponent + ExportStatement.suffix)
        guard let data = try? Data(contentsOf: url) else { return nil }
        var verdict = StatementVerdict(keyGiven: trusted != nil)
        guard let statement = try? JSONDecoder().decode(ExportStatement.self, from: data), statement.type == "tapedeck-export-statement",
              statement.version == 1, let key = try? DeviceKey.PublicKey(parsing: statement.key) else {
            verdict.problem = "its statement is not one Tapedeck reads."
            return verdict
        }
        verdict.statement = statement
        verdict.fingerprint = key.fingerprint
        if let trusted, trusted != key {
            verdict.problem = "its statement is signed with key \(key.fingerprint), not the one given (\(trusted.fingerprint))."
            return verdict
        }
        guard let signature = Data(base64Encoded: statement.sig), let message = try? statement.message(), key.isValid(signature, for: message) else {
            verdict.problem = "its statement's signature does not verify: the statement was changed."
            return verdict
        }
        guard let (sha, size) = try? ExportStatement.digest(of: file), sha == statement.output.sha256, size == statement.output.size else {
            verdict.problem = "its bytes are not the ones the statement names: the file was changed after it was exported."
            return verdict
        }
        return verdict
    }
}
