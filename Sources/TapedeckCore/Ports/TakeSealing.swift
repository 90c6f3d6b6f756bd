public import Foundation

/// Seals takes as they are recorded (`provenance: { sign: true }`): wraps a take's writer so
/// that what it writes is chained and signed into the take's sidecar beside its audio
/// (``TakeCompanions``). Made by the composition root from the machine's key; given to the
/// recorder, which seals every take it makes.
///
/// - Thread: any; ``seal(_:takeID:format:audioURL:)`` blocks briefly, creating the sidecar.
public protocol TakeSealing: Sendable {
    /// `writer`, for take `takeID` in `format`, whose audio is kept at `audioURL` (where its
    /// take's file is once finished; the sidecar is made beside it, at once).
    /// - Throws: when the sidecar cannot be made (the take is then not recorded: a recorder
    ///   asked to sign never records unsigned).
    func seal(_ writer: any TakeWriter, takeID: String, format: AudioFormat, audioURL: URL) throws -> any TakeWriter

    /// Who signs (a key's fingerprint), kept with each take it seals as the tag
    /// ``TakeCompanions/signedTag``: a take whose chain goes missing is then known to have had
    /// one. `nil` (the default): no tag.
    var signer: String? { get }
}

extension TakeSealing {
    public var signer: String? { nil }
}

/// Files a take keeps beside its audio, named after it (`TAKEFILE.chain`): stores delete them
/// with the audio, count them as the take's (never as files no take names), and remotes carry
/// them with it. A namespace of pure functions; any thread; never blocks.
public enum TakeCompanions {
    /// The tag a sealed take carries from its start: `SIGNED=FINGERPRINT` (``TakeSealing/signer``).
    /// Not carried into exports (an export is not the signed take; its statement is its proof).
    public static let signedTag = "SIGNED"

    /// The tags a take sealed by `sealer` starts with.
    public static func tags(sealedBy sealer: (any TakeSealing)?) -> [String: String] {
        sealer?.signer.map { [signedTag: $0] } ?? [:]
    }

    /// The suffixes of companion files: `.chain`, a take's signed hash chain.
    public static let suffixes = [".chain"]

    /// The companions `audio` may have (whether or not they exist).
    public static func urls(of audio: URL) -> [URL] {
        suffixes.map { audio.deletingLastPathComponent().appendingPathComponent(audio.lastPathComponent + $0) }
    }

    /// The audio file name `name` is a companion of, when it is one (`a.wav.chain` → `a.wav`).
    public static func audioName(of name: String) -> String? {
        for suffix in suffixes where name.hasSuffix(suffix) && name.count > suffix.count { return String(name.dropLast(suffix.count)) }
        return nil
    }
}

/// Signs statements of what an export was made from (`OUTPUT.statement`): the exporting
/// machine's key over the signed takes exported (their chains' last signed heads), the settings
/// and the exported bytes. Made by the composition root when the machine signs.
/// - Thread: any; blocks while it reads the output file.
public protocol ExportAttesting: Sendable {
    /// Writes the statement beside `output`, made from the takes whose audio files are `sources`
    /// (each with its chain beside it) with `settings`; returns its URL, `nil` when no source is signed.
    func attest(output: URL, sources: [URL], settings: [String: String]) throws -> URL?
}
