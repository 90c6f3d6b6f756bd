public import Foundation
public import TapedeckCore
import TapedeckApp
public import TapedeckProvenance

extension Studio {
    /// The signing key's file: `provenance.key`, or `$XDG_CONFIG_HOME/tapedeck/signing-key`.
    /// - Thread: any. Never blocks.
    public func signingKeyFile(environment: [String: String] = ProcessInfo.processInfo.environment) -> URL {
        let paths = UserPaths(environment: environment)
        let named = ProvenanceSettings(configuration.provenanceSettings).key.trimmingCharacters(in: .whitespaces)
        return named.isEmpty ? paths.signingKeyFile : URL(fileURLWithPath: paths.expandingTilde(named))
    }

    /// The sealer of a recorder on a machine that signs (`provenance.sign`), with its key loaded;
    /// `nil` when it does not sign.
    /// - Throws: when the key is missing or unreadable: a recorder asked to sign never records
    ///   unsigned. - Thread: any. Blocks briefly, reading the key.
    public func makeSealer() throws -> (any TakeSealing)? {
        let settings = ProvenanceSettings(configuration.provenanceSettings)
        guard settings.sign else { return nil }
        let file = signingKeyFile()
        do {
            var sealer = ProvenanceSealer(key: try DeviceKey.load(at: file), signEvery: settings.signEvery)
            sealer.stamper = try makeTimeStamper()
            return sealer
        } catch let error as TapedeckError where error.code != .configuration {
            throw TapedeckError(error.code, "provenance.sign is on, so takes are signed, but the signing key cannot be used: \(error.message.prefix(1).lowercased() + error.message.dropFirst()) Nothing was recorded.")
        }
    }

    /// The time-stamp sender (made once): new requests go to `provenance.tsa` (`nil` authority
    /// when unset; queued requests are still sent to theirs). Its queue is
    /// `$XDG_STATE_HOME/tapedeck/timestamps`.
    /// - Throws: `.configuration` when `provenance.tsa` is not an http(s) URL. - Thread: main actor; never blocks.
    public func makeTimeStamper() throws -> TimeStamper {
        if let timeStamper { return timeStamper }
        let settings = ProvenanceSettings(configuration.provenanceSettings)
        if let problem = settings.tsaProblem { throw TapedeckError(.configuration, problem) }
        let authority = settings.tsa.isEmpty ? nil : settings.tsa
        let stamper = TimeStamper(authority: authority, every: settings.tsaEveryMinutes * 60,
                                  folder: paths.timeStampQueueFolder, logger: logger)
        timeStamper = stamper
        return stamper
    }

    /// Checks an audio file against its chain beside it with this build's decoders: `nil` when it
    /// is intact (or has no chain), else the verdict in a sentence. Any thread; blocks reading it.
    public func makeChainCheck() -> @Sendable (URL) -> String? {
        let verdictOf = makeChainVerdict()
        return { audio in
            guard FileManager.default.fileExists(atPath: ProvenanceChain.sidecar(of: audio).path) else { return nil }
            guard let verdict = verdictOf(audio) else { return "its audio cannot be read." }
            switch verdict.outcome {
            case .intact, .unsigned: return nil
            case .intactUpTo(let k, let n): return "it is intact only up to checkpoint \(k) of \(n)."
            case .altered(_, let a, let b): return "its audio differs from what was signed in frames \(a)-\(b)."
            case .brokenChain(let why), .otherKey(let why): return why
            }
        }
    }

    /// What the chain beside an audio file says of it, with this build's decoders; `nil` when
    /// it has no chain or cannot be read. Any thread; blocks reading it.
    func makeChainVerdict() -> @Sendable (URL) -> ChainVerdict? {
        let decoders = decoders
        return { audio in
            guard let chain = try? Data(contentsOf: ProvenanceChain.sidecar(of: audio)),
                  let decoder = decoders.first(where: { $0.canRead(audio) }), let reader = try? decoder.openReader(at: audio) else { return nil }
            defer { reader.close() }
            return try? ChainVerifier.verify(reader, chain: chain, trusted: nil)
        }
    }

    /// The attester of a machine that signs, checking each export's takes against their chains
    /// first; `nil` when it does not sign or its key cannot be used (the export goes on unsigned).
    func makeAttester() -> (any ExportAttesting)? {
        guard var sealer = (try? makeSealer()) as? ProvenanceSealer else { return nil }
        sealer.sourceCheck = makeChainVerdict()
        return sealer
    }
}
