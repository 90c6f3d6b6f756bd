import Foundation
public import Logging
public import TapedeckCore
#if canImport(Glibc)
import Glibc
#endif

/// Reads what every machine pushed to a remote (`tapedeck fleet`): the takes that have a
/// manifest (the commit marker; audio without one is an upload in progress or a failed one, and
/// is never shown as a take), checks of the whole remote, and pulls takes back into the local
/// library, verified by their SHA-256 before they are committed.
///
/// Main actor; every method suspends while the network and the disk work.
@MainActor
public final class FleetReader {
    public let remote: any TakeRemote
    public let store: SessionStore
    let importer: TakeImporter
    let partials: PartialFiles
    let logger: Logger

    public init(remote: any TakeRemote, store: SessionStore, importer: TakeImporter, partials: PartialFiles, logger: Logger) {
        self.remote = remote
        self.store = store
        self.importer = importer
        self.partials = partials
        self.logger = logger
    }

    /// One take on the remote: its manifest, and whether its audio object is there at the size
    /// the manifest says.
    public struct Entry: Sendable {
        public var manifest: RemoteManifest
        public var audioPresent: Bool
    }

    /// A manifest that could not be read, and why.
    public struct Problem: Sendable {
        public var key: String
        public var reason: String
    }

    /// Everything on the remote under `machine` (every machine when `nil`): the takes whose
    /// manifests read, sorted by machine, session and take number, and the problems found.
    public func entries(machine: String? = nil) async throws -> (entries: [Entry], problems: [Problem], objects: [RemoteObject]) {
        if let machine, !RemoteKey.isValid(machine, segment: true) {
            throw TapedeckError(.invalidArgument, "--machine \(machine): a machine name has letters, digits, \".\", \"_\" and \"-\" only.")
        }
        let objects = try await remote.list(under: machine.map { $0 + "/" } ?? "")
        let sizes = Dictionary(objects.map { ($0.key, $0.size) }, uniquingKeysWith: { a, _ in a })
        var entries: [Entry] = []
        var problems: [Problem] = []
        let manifests = objects.filter { $0.key.hasSuffix(".json") && Self.isTakeKey($0.key) }
        for object in manifests {
            guard object.size <= Int64(RemoteManifest.maximumBytes) else {
                problems.append(Problem(key: object.key, reason: "The manifest is \(object.size) bytes, more than a manifest can be (\(RemoteManifest.maximumBytes)); it was not read."))
                continue
            }
            do {
                let key = try RemoteKey(object.key)
                guard let data = try await remote.get(key, limit: RemoteManifest.maximumBytes) else { continue }
                let manifest = try RemoteManifest.decode(data, key: object.key)
                entries.append(Entry(manifest: manifest, audioPresent: sizes[manifest.audio.key] == manifest.audio.size))
            } catch let error as TapedeckError where error.code == .corruptFile || error.code == .invalidArgument {
                problems.append(Problem(key: object.key, reason: error.message))
            }
        }
        entries.sort { a, b in
            (a.manifest.machine, a.manifest.session.createdAt, a.manifest.session.id, a.manifest.take.number)
                < (b.manifest.machine, b.manifest.session.createdAt, b.manifest.session.id, b.manifest.take.number)
        }
        return (entries, problems, objects)
    }

    /// Whether `key` has the shape of Tapedeck's keys, `MACHINE/SESSION-ID/TAKE-ID.EXT` with
    /// both ids UUIDs: other objects in the bucket are never Tapedeck's to judge or remove.
    /// - Thread: any. Never blocks.
    public nonisolated static func isTakeKey(_ key: String) -> Bool {
        let parts = key.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 3, RemoteKey.isValid(key), let dot = parts[2].firstIndex(of: ".") else { return false }
        return UUID(uuidString: String(parts[1])) != nil && UUID(uuidString: String(parts[2][..<dot])) != nil
    }

    /// Pulls `entries` (takes of one session) into the local session named `sessionName` (made
    /// when missing): each audio object is downloaded into the library, its size and SHA-256
    /// checked against the manifest, then committed as a copy of the take, which the upload
    /// ledger records as verified on this remote under the original's key (so `push` does not
    /// send it again as a take of this machine). A take the session already has a copy of (same
    /// name, length and start) is skipped.
    /// - Returns: the takes made.
    /// - Throws: `.corruptFile` when a download does not match its manifest (nothing of it is kept).
    public func pull(_ entries: [Entry], into sessionName: String, progress: @escaping @Sendable (Int64) -> Void) async throws -> (Session, [Take]) {
        let session = try await store.sessionForRecording(named: sessionName)
        var made: [Take] = []
        let storage = store.storage
        for entry in entries {
            try partials.checkStopped()
            let m = entry.manifest
            let key = try RemoteKey(m.audio.key)
            if let copy = (store.sessions.first { $0.id == session.id } ?? session).takes.first(where: {
                $0.name == m.take.name && $0.frames == m.take.frames && abs($0.createdAt.timeIntervalSince(m.take.createdAt)) < 0.001
            }) {
                logger.info("Already pulled", metadata: ["take": "\(copy.id)", "key": "\(key)"])
                continue
            }
            let temp = storage.rootURL.appendingPathComponent(PartialFiles.importName())
            partials.register(temp)
            defer {
                unlink(temp.path)
                partials.forget(temp)
            }
            let got = try await remote.download(key, to: temp, progress: progress)
            guard got.size == m.audio.size, got.sha256 == m.audio.sha256 else {
                throw TapedeckError(.corruptFile, "\(key) on \(remote.location) is not what its manifest says (\(got.size) bytes, SHA-256 \(got.sha256); the manifest: \(m.audio.size) bytes, \(m.audio.sha256)). Nothing of it was kept. Run `tapedeck fleet doctor` to see the remote's problems.")
            }
            let importer = self.importer
            let ext = (m.audio.key as NSString).pathExtension
            let take = try await BlockingWork.detached {
                try importer.importTake(movingFrom: temp, as: m.take, fileExtension: ext, into: session)
            }
            // The copy is on this remote already (it came from there): push leaves it alone.
            try UploadLedger(libraryURL: storage.rootURL, remote: remote.location)
                .set(take.id, UploadLedger.Record(state: .verified, key: m.audio.key, digest: got))
            made.append(take)
        }
        try await store.refresh()
        return (session, made)
    }
}

extension FleetReader {
    /// What `fleet doctor` says of a manifest whose audio the remote does not hold: the one
    /// command that sends it again, on the machine that has the take.
    /// - Thread: any. Never blocks.
    public nonisolated static func missingAudioAdvice(_ manifest: RemoteManifest) -> String {
        "the manifest says \(manifest.audio.size) bytes of audio, which the remote does not hold. Run `tapedeck push --verify-remote` on \(manifest.machine), the machine that pushed it: it checks that machine's takes on the remote again and sends what is missing. If \(manifest.machine) no longer has the take, its audio is lost."
    }

    /// Marks the take `manifest` describes, when this library pushed it under that key, to be
    /// checked again by the next `push` (whatever its flags): its audio is missing on the remote.
    /// A take this library did not push is left alone. - Thread: main actor; blocks briefly on
    /// the ledger's file.
    public func noteMissingAudio(_ manifest: RemoteManifest) {
        let ledger = UploadLedger(libraryURL: store.storage.rootURL, remote: remote.location)
        _ = try? ledger.markUnconfirmed(manifest.take.id, key: manifest.audio.key, reason: "fleet doctor found its audio missing on the remote")
    }
}
