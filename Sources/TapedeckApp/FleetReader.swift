public import Foundation
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
    /// The file extensions a take's audio may have on a remote (lowercase): the encoders' of
    /// this build, `wav` and `flac` (imports kept as they are), and `audio` (the key of a take
    /// whose file has no usable extension). Only such keys are Tapedeck's audio.
    public let audioExtensions: Set<String>
    /// The manifests read before, by key and ETag: a listing reads again only what changed.
    public let manifests: ManifestCache
    /// Checks a pulled signed take's audio (its URL) against its chain beside it: `nil` when it
    /// is intact, else what is wrong (set by the composition root; `nil`: not checked).
    public var chainCheck: (@Sendable (URL) -> String?)?

    /// - Parameters:
    ///   - remote: the remote the machines push to.
    ///   - store: the local library that pulled takes go into.
    ///   - importer: commits each downloaded, checked take into its session.
    ///   - partials: registers the downloads in progress, so a stop request removes them.
    ///   - logger: where pulls are logged.
    ///   - audioExtensions: the build's encoders' file extensions and its decoders'
    ///     encodings (an import kept byte for byte keeps its own); ``baseAudioExtensions`` is always
    ///     added.
    ///   - manifestCache: the folder of every remote's cached manifests (`nil`: none kept).
    public init(remote: any TakeRemote, store: SessionStore, importer: TakeImporter, partials: PartialFiles, logger: Logger,
                audioExtensions: Set<String>, manifestCache: URL?) {
        self.remote = remote
        self.store = store
        self.importer = importer
        self.partials = partials
        self.logger = logger
        self.audioExtensions = Set(audioExtensions.map { $0.lowercased() }).union(Self.baseAudioExtensions)
        manifests = ManifestCache(root: manifestCache, remote: remote.location)
    }

    /// A reader that keeps no manifests between listings.
    public convenience init(remote: any TakeRemote, store: SessionStore, importer: TakeImporter, partials: PartialFiles, logger: Logger,
                            audioExtensions: Set<String> = []) {
        self.init(remote: remote, store: store, importer: importer, partials: partials, logger: logger,
                  audioExtensions: audioExtensions, manifestCache: nil)
    }

    /// The extension any build's takes may have besides its encoders' and decoders' (the
    /// composition root passes those): `audio` (`RemoteManifest.keys(machine:take:)` for a file
    /// without a usable one).
    public nonisolated static let baseAudioExtensions: Set<String> = ["audio"]

    /// One take on the remote: its manifest, and whether its audio object is there at the size
    /// the manifest says.
    public struct Entry: Sendable {
        public var manifest: RemoteManifest
        public var audioPresent: Bool

        public init(manifest: RemoteManifest, audioPresent: Bool) {
            self.manifest = manifest
            self.audioPresent = audioPresent
        }
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
        let manifests = objects.filter { Self.isTakeKey($0.key, extensions: ["json"]) }
        for object in manifests where object.size > Int64(RemoteManifest.maximumBytes) {
            problems.append(Problem(key: object.key, reason: "The manifest is \(object.size) bytes, more than a manifest can be (\(RemoteManifest.maximumBytes)); it was not read."))
        }
        let readable = manifests.filter { $0.size <= Int64(RemoteManifest.maximumBytes) }
        let cache = self.manifests
        // The cache's small files are read in the reading tasks, off the main actor.
        let fetched = try await Self.fetchManifests(readable, from: remote, cache: cache)
        if machine == nil {
            let keys = readable.map(\.key)
            _ = try? await BlockingWork.detached { cache.prune(keeping: keys) }
        }
        for (key, read) in fetched {
            switch read {
            case .success(let manifest?): entries.append(Entry(manifest: manifest, audioPresent: sizes[manifest.audio.key] == manifest.audio.size))
            case .success(nil): continue
            case .failure(let error): problems.append(Problem(key: key, reason: error.message))
            }
        }
        entries.sort { a, b in
            (a.manifest.machine, a.manifest.session.createdAt, a.manifest.session.id, a.manifest.take.number)
                < (b.manifest.machine, b.manifest.session.createdAt, b.manifest.session.id, b.manifest.take.number)
        }
        return (entries, problems, objects)
    }

    /// Manifests read at once, at most this many at a time: a listing costs about as many round
    /// trips as there are manifests divided by this.
    public nonisolated static let parallelReads = 16

    /// Reads and checks the manifests `objects`, ``parallelReads`` at a time, in their order: a
    /// manifest gone meanwhile is `nil`, one that is not a manifest a failure (its message). One
    /// `cache` holds at the ETag the listing gave is read from there (and checked the same way).
    /// - Throws: what the remote throws otherwise (unreachable, refused).
    nonisolated static func fetchManifests(_ objects: [RemoteObject], from remote: any TakeRemote,
                                           cache: ManifestCache) async throws -> [(String, Result<RemoteManifest?, TapedeckError>)] {
        let keys = objects.map(\.key)
        return try await withThrowingTaskGroup(of: (Int, Result<RemoteManifest?, TapedeckError>).self) { group in
            var results = [Result<RemoteManifest?, TapedeckError>?](repeating: nil, count: keys.count)
            var next = 0
            func start() {
                guard next < keys.count else { return }
                let (index, text, etag) = (next, keys[next], objects[next].etag)
                next += 1
                group.addTask {
                    do {
                        if let etag, let data = cache.bytes(for: text, etag: etag), let manifest = try? RemoteManifest.decode(data, key: text) {
                            return (index, .success(manifest))
                        }
                        let key = try RemoteKey(text)
                        guard let data = try await remote.get(key, limit: RemoteManifest.maximumBytes) else { return (index, .success(nil)) }
                        let manifest = try RemoteManifest.decode(data, key: text)
                        if let etag { cache.store(data, for: text, etag: etag) }
                        return (index, .success(manifest))
                    } catch let error as TapedeckError where error.code == .corruptFile || error.code == .invalidArgument {
                        return (index, .failure(error))
                    }
                }
            }
            for _ in 0..<parallelReads { start() }
            while let (index, read) = try await group.next() {
                results[index] = read
                start()
            }
            return zip(keys, results).map { ($0, $1 ?? .success(nil)) }
        }
    }

    /// Whether `key` has the shape of Tapedeck's keys, `MACHINE/SESSION-ID/TAKE-ID.EXT` with
    /// both ids UUIDs and EXT one of `extensions` (lowercase): other objects in the bucket (an
    /// `invoices/UUID/UUID.pdf` beside the takes) are never Tapedeck's to judge or remove.
    /// - Thread: any. Never blocks.
    public nonisolated static func isTakeKey(_ key: String, extensions: Set<String>) -> Bool {
        let parts = key.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 3, RemoteKey.isValid(key), let dot = parts[2].firstIndex(of: ".") else { return false }
        let ext = parts[2][parts[2].index(after: dot)...]
        return extensions.contains(String(ext)) && UUID(uuidString: String(parts[1])) != nil && UUID(uuidString: String(parts[2][..<dot])) != nil
    }

    /// Whether `key` is where Tapedeck keeps a take's audio (``isTakeKey(_:extensions:)`` with
    /// ``audioExtensions``). - Thread: main actor. Never blocks.
    public func isAudioKey(_ key: String) -> Bool {
        Self.isTakeKey(key, extensions: audioExtensions)
    }

    /// Pulls `entries` (takes of one session) into the local session named `sessionName` (made
    /// when missing, once the first take is downloaded and checked: a pull refused before that
    /// leaves no session behind). Each audio object is downloaded into the library, at most the
    /// size its manifest gives (more is refused as it arrives), after the library's disk is
    /// checked to hold it with room to spare; its size and SHA-256 are checked against the
    /// manifest and its bytes against the take's format, then it is committed as a copy of the
    /// take, which the upload ledger records as verified on this remote under the original's
    /// key (so `push` does not send it again as a take of this machine). A take the session
    /// already has (the take itself, or a copy the ledger records from the same key with the
    /// same SHA-256) is skipped.
    /// - Returns: the session (`nil` when nothing was pulled and it did not exist) and the takes made.
    /// - Throws: `.invalidArgument` for a take or session name a library cannot hold (before
    ///   anything is downloaded); `.diskFull` when a take would not fit; `.corruptFile` when a
    ///   download does not match its manifest (nothing of it is kept).
    public func pull(_ entries: [Entry], into sessionName: String, progress: @escaping @Sendable (Int64) -> Void) async throws -> (Session?, [Take]) {
        // Every name is checked before anything is made or downloaded.
        _ = try NameRules.validate(sessionName, what: "session")
        for entry in entries { _ = try NameRules.validate(entry.manifest.take.name, what: "take") }
        let storage = store.storage
        var target = try await existingSession(named: sessionName)
        let createdHere = target == nil
        var made: [Take] = []
        do {
            for entry in entries {
                try partials.checkStopped()
                let m = entry.manifest
                let key = try RemoteKey(m.audio.key)
                if let target, let copy = try alreadyPulled(m, in: target) {
                    logger.info("Already pulled", metadata: ["take": "\(copy.id)", "key": "\(key)"])
                    continue
                }
                try Self.checkRoom(for: m.audio.size, in: storage.rootURL, key: key)
                let temp = storage.rootURL.appendingPathComponent(PartialFiles.importName())
                partials.register(temp)
                defer {
                    unlink(temp.path)
                    partials.forget(temp)
                }
                let got = try await remote.download(key, to: temp, limit: m.audio.size, progress: progress)
                guard got.size == m.audio.size, got.sha256 == m.audio.sha256 else {
                    throw TapedeckError(.corruptFile, "\(key) on \(remote.location) is not what its manifest says (\(got.size) bytes, SHA-256 \(got.sha256); the manifest: \(m.audio.size) bytes, \(m.audio.sha256)). Nothing of it was kept. Run `tapedeck fleet doctor` to see the remote's problems.")
                }
                let session: Session
                if let target { session = target } else { session = try await store.sessionForRecording(named: sessionName) }
                target = session
                let importer = self.importer
                let ext = (m.audio.key as NSString).pathExtension
                let take = try await BlockingWork.detached {
                    try importer.importTake(movingFrom: temp, as: m.take, fileExtension: ext, into: session)
                }
                if let chain = m.chain { try await pullChain(chain, beside: take) }
                // The copy is on this remote already (it came from there): push leaves it alone.
                try UploadLedger(libraryURL: storage.rootURL, remote: remote.location)
                    .set(take.id, UploadLedger.Record(state: .verified, key: m.audio.key, digest: got))
                made.append(take)
            }
        } catch {
            // A session this pull made and put nothing in goes again.
            if createdHere, made.isEmpty, let target {
                try? await store.refresh()
                if store.sessions.first(where: { $0.id == target.id })?.takes.isEmpty ?? false {
                    try? await store.delete(.session(target))
                }
            }
            throw error
        }
        try await store.refresh()
        return (target.flatMap { t in store.sessions.first { $0.id == t.id } ?? t }, made)
    }

    /// Downloads a pulled take's chain (checked against its manifest) beside its audio, then
    /// checks the audio against it: a take that does not verify is kept, and said.
    private func pullChain(_ chain: RemoteManifest.Audio, beside take: Take) async throws {
        let key = try RemoteKey(chain.key)
        let audio = try store.storage.audioURL(for: take)
        guard let target = TakeCompanions.urls(of: audio).first else { return }
        let temp = store.storage.rootURL.appendingPathComponent(PartialFiles.importName())
        partials.register(temp)
        defer {
            unlink(temp.path)
            partials.forget(temp)
        }
        let got = try await remote.download(key, to: temp, limit: chain.size, progress: { _ in })
        guard got.size == chain.size, got.sha256 == chain.sha256 else {
            throw TapedeckError(.corruptFile, "\(key) on \(remote.location) is not the chain its manifest names; take \"\(take.name)\" was pulled without it. Run `tapedeck fleet doctor`.")
        }
        let files = DurableFiles()
        try files.syncFile(temp)
        try files.moveIntoPlace(temp, target)
        try files.syncDirectory(target.deletingLastPathComponent())
        if let problem = chainCheck?(audio) {
            logger.warning("Take \"\(take.name)\" was pulled, but its signed chain does not prove it: \(problem) `tapedeck verify` on it says more.")
        }
    }

    /// The session named `name` as storage has it now, or `nil`.
    private func existingSession(named name: String) async throws -> Session? {
        let storage = store.storage
        return try await store.perform { try storage.findSessionForRecording(named: name) }
    }

    /// The take of `session` that is the manifest's take already: the take itself (same id,
    /// pulled into its own library), or a copy the ledger records as pulled from the same key
    /// with the same SHA-256. Name, length and start alone prove nothing: another machine's
    /// take may share them.
    private func alreadyPulled(_ m: RemoteManifest, in session: Session) throws -> Take? {
        let takes = (store.sessions.first { $0.id == session.id } ?? session).takes
        if let same = takes.first(where: { $0.id == m.take.id }) { return same }
        let records = try UploadLedger(libraryURL: store.storage.rootURL, remote: remote.location).records()
        return takes.first { take in
            guard let record = records[take.id] else { return false }
            return record.key == m.audio.key && record.digest?.sha256 == m.audio.sha256
        }
    }

    /// Refuses a download of `size` bytes that the disk holding `folder` cannot take with room
    /// to spare: 64 MiB or a twentieth of the take, whichever is more, stays free for the
    /// library and for a recording that may be running there.
    /// - Throws: `.diskFull` saying how much is needed and free.
    /// - Thread: any. A system call; never blocks for long.
    nonisolated static func checkRoom(for size: Int64, in folder: URL, key: RemoteKey) throws {
        guard let free = FreeSpace.available(at: folder.path) else { return }
        let margin = max(Int64(64 << 20), size / 20)
        let (needed, overflow) = size.addingReportingOverflow(margin)
        guard overflow || needed > free else { return }
        throw TapedeckError(.diskFull, "\(key) is \(size) bytes, and the disk holding the library \(folder.path) has \(free) bytes free: too little to pull it and keep \(margin >> 20) MiB to spare. Free some space (or pull into a library on a larger disk), then run the pull again.")
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
