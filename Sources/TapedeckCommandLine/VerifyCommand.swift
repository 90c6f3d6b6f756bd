import ArgumentParser
import Foundation
import TapedeckApp
import TapedeckAssembly
import TapedeckCore
import TapedeckProvenance

struct VerifyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Check that takes (or files with their .chain) are the audio their signed chain says.",
        discussion: """
            A take recorded with provenance: { sign: true } has a chain beside its audio \
            (TAKEFILE.chain): the SHA-256 of each second's frames, chained, signed by the machine's \
            key every few seconds and at the end. verify decodes the audio and says one of: intact \
            (every frame signed, the take finished); intact up to checkpoint K of N (what follows \
            is not proven: a power loss, a killed process, a file cut short); altered in frames A-B \
            (the first signed stretch whose audio differs); does not verify (the chain was changed, \
            or is another key's); unsigned. A file needs only its .chain beside it, not the library. \
            Give the signer's public key with --key (`tapedeck keys export` prints it on that \
            machine); without it the chain's own key is used, which proves the file is as that key \
            signed it, not who holds the key. Exit status: 0 intact, 1 intact up to a checkpoint, \
            2 unsigned, 65 altered or not verifying, 66 not found.
            """ + HelpExamples.text([
            "tapedeck verify last": "The newest take.",
            "tapedeck verify Logger/Take\\ 3 --key ed25519:…": "Against the key the signer gave you.",
            "tapedeck verify take.wav --key studio.pub --json": "A file given to you, and its take.wav.chain beside it.",
        ]))

    @Argument(help: ArgumentHelp("Takes (SESSION/TAKE, an id, `last`) or audio files (with FILE.chain beside each).", valueName: "take-or-file"))
    var items: [String]

    @Option(help: ArgumentHelp("The signer's public key (ed25519:…, or a file holding it, as `tapedeck keys export` prints it).", valueName: "key"))
    var key: String?

    @Option(name: .customLong("tsa-ca"), help: ArgumentHelp("PEM certificates trusted to vouch for time-stamping authorities (default: provenance.tsa-ca, else the system's CA bundle).", valueName: "file"))
    var tsaCA: String?

    @Flag(help: "Print JSON: an array of one object per take or file.")
    var json = false

    @OptionGroup var global: GlobalOptions

    /// Exit statuses, worst last.
    static let intact: Int32 = 0, partial: Int32 = 1, unsigned: Int32 = 2, failed: Int32 = 65

    @MainActor
    func run() async throws {
        var worst: Int32 = 0
        try await reportingErrors {
            let trusted = try key.map { try DeviceKey.PublicKey(parsing: $0) }
            // A file needs no library; a take does, opened once.
            var studio: Studio?
            var library: Studio?
            var reports: [VerifyReport] = []
            var roots: TimeStampRoots?
            for item in items {
                var isFolder: ObjCBool = false
                let report: VerifyReport
                let exists = FileManager.default.fileExists(atPath: item, isDirectory: &isFolder)
                if exists && isFolder.boolValue {
                    throw TapedeckError(.invalidArgument, "\(item) is a folder. Give audio files (each with its .chain beside it) or takes (SESSION/TAKE, an id, `last`).")
                }
                if !exists, Self.fileExtensions.contains((item as NSString).pathExtension.lowercased()) {
                    throw TapedeckError(.notFound, "\(item) does not exist. Give an audio file (its .chain is read from beside it), or a take (SESSION/TAKE, an id, `last`).")
                }
                if exists {
                    if studio == nil { studio = try global.makeStudioWithoutLibrary() }
                    report = try Self.verifyFile(URL(fileURLWithPath: item), subject: item, decoders: studio!.decoders, trusted: trusted)
                } else {
                    if library == nil { library = try await global.makeStudio() }
                    let (take, session) = try library!.store.resolveTake(item)
                    let url = try library!.store.storage.audioURL(for: take)
                    let decoders = library!.decoders.filter { $0.encodings.contains(take.encoding) } + library!.decoders
                    report = try Self.verifyFile(url, subject: "\(session.name)/\(take.name)", decoders: decoders, trusted: trusted, take: take)
                }
                var checked = report
                if !checked.verdict.stamps.isEmpty {
                    if roots == nil {
                        let configured = (studio ?? library).map { ProvenanceSettings($0.configuration.provenanceSettings).tsaCA }
                        roots = try TimeStampRoots.load(file: tsaCA ?? configured)
                    }
                    for stamp in checked.verdict.stamps { checked.stampTrust.append(await stamp.signed.trustProblem(roots: roots!)) }
                }
                worst = max(worst, checked.status)
                reports.append(checked)
                if !json { print(checked.lines.joined(separator: "\n")) }
            }
            if json { try Terminal.printJSON(reports.map(\.json)) }
        }
        if worst != 0 { throw ExitCode(worst) }
    }

    /// The frames `reader` delivers from where it is to the end. - Blocks: decodes them.
    static func countFrames(_ reader: any TakeReader) throws -> Int64 {
        let chunk = 16_384
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: chunk * reader.format.bytesPerFrame, alignment: 16)
        defer { buffer.deallocate() }
        var frames: Int64 = 0
        while case let n = try reader.read(into: buffer, maxFrames: chunk), n > 0 { frames += Int64(n) }
        return frames
    }

    /// Extensions that make an argument a file, not a take's name, when nothing is there.
    static let fileExtensions: Set<String> = ["wav", "flac", "mp3", "ogg", "opus", "oga", "aif", "aiff", "aifc", "chain", "statement", "w64", "rf64"]

    /// Verifies the audio file `url` with its chain beside it.
    /// `take`: the library's entry of it, when it is a take: a signed take (tag `SIGNED`) whose
    /// chain is missing does not verify, and its frames are compared with what was signed.
    static func verifyFile(_ url: URL, subject: String, decoders: [any AudioDecoder], trusted: DeviceKey.PublicKey?, take: Take? = nil) throws -> VerifyReport {
        var audio = url
        if let name = TakeCompanions.audioName(of: url.lastPathComponent) { audio = url.deletingLastPathComponent().appendingPathComponent(name) }
        if url.lastPathComponent.hasSuffix(ExportStatement.suffix) { audio = url.deletingPathExtension() }
        guard FileManager.default.fileExists(atPath: audio.path) else {
            throw TapedeckError(.notFound, "\(audio.path) does not exist. Give the audio file; its chain is read from beside it (\(audio.lastPathComponent)\(ProvenanceChain.suffix)).")
        }
        guard let decoder = decoders.first(where: { $0.canRead(audio) }) else {
            throw TapedeckError(.notAudio, "\(audio.path) is not audio this Tapedeck reads, so it cannot be checked against a chain.")
        }
        let sidecar = ProvenanceChain.sidecar(of: audio)
        let chain = FileManager.default.fileExists(atPath: sidecar.path) ? try Data(contentsOf: sidecar) : nil
        let reader = try decoder.openReader(at: audio)
        defer { reader.close() }
        var verdict = try ChainVerifier.verify(reader, chain: chain, trusted: trusted)
        // A take tagged signed gets its chain before its first frame is written: one with audio
        // and no chain lost it (one a power cut stopped before it began has no audio to prove).
        if chain == nil, let signer = take?.tags[TakeCompanions.signedTag], try Self.countFrames(reader) > 0 {
            verdict.outcome = .brokenChain("The take was signed by key \(signer) as it was recorded (its tag \(TakeCompanions.signedTag)), but its chain \(sidecar.path) is missing. Restore it from a copy of the take (a backup, or `tapedeck pull` from the remote it was pushed to).")
        }
        // An export of signed takes carries a signed statement of what it was made from instead.
        let statement = chain == nil && take?.tags[TakeCompanions.signedTag] == nil ? StatementVerdict.check(audio, trusted: trusted) : nil
        var report = VerifyReport(subject: subject, audio: audio, chain: chain == nil ? nil : sidecar, verdict: verdict, statement: statement)
        if let take, take.state == .complete { report.libraryFrames = take.frames }
        return report
    }
}
