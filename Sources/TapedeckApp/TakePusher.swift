public import Foundation
public import Logging
public import TapedeckCore

/// Copies finished takes to a remote (`tapedeck push`), never losing track of one: for each take,
/// the audio first (skipped when the remote already holds exactly these bytes), then a check of
/// what the remote holds, then the manifest as the commit marker, and only then `verified` in
/// the library's upload ledger. A take whose upload stops midway stays `uploading` (resumed next
/// time) or `failed` with the reason; nothing local is deleted except by ``applyRetention(olderThan:now:)``,
/// and only takes verified on this remote. A verified take's copy is checked again (its audio's
/// size and checksum, its manifest) when asked (`push --verify-remote`) or when retention or
/// `fleet doctor` could not confirm it, and what is missing or stale is sent again
/// (`recheck(_:options:progress:)`).
///
/// Main actor; every method suspends while the network and the disk work and never blocks the
/// main thread for long (the ledger is a small file).
@MainActor
public final class TakePusher {
    public let store: SessionStore
    public let remote: any TakeRemote
    /// The machine's name in keys: `MACHINE/SESSION-ID/TAKE-ID.EXT`.
    public let machine: String
    public let ledger: UploadLedger
    let logger: Logger

    public init(store: SessionStore, remote: any TakeRemote, machine: String, logger: Logger) {
        self.store = store
        self.remote = remote
        self.machine = machine
        self.logger = logger
        ledger = UploadLedger(libraryURL: store.storage.rootURL, remote: remote.location)
    }

    /// One take to push, with where it stands now.
    public struct Item: Sendable {
        public var take: Take
        public var session: Session
        /// Its record in the ledger; `nil` when it was never tried (pending).
        public var record: UploadLedger.Record?
        public var size: Int64
        /// A verified take whose remote copy is checked again (and sent again where missing or
        /// stale) rather than pushed.
        public var recheck = false
    }

    /// The takes of `sessions` that still need pushing (not verified on this remote), and the
    /// verified ones whose remote copy is to be checked again: every one with `verifyRemote`,
    /// else those retention or `fleet doctor` could not confirm. In session and take order;
    /// takes being recorded are left for a later run; copies pulled from another machine are
    /// that machine's to check.
    /// - Throws: when the ledger cannot be read.
    public func pending(in sessions: [(Take, Session)], verifyRemote: Bool = false) throws -> [Item] {
        let records = try ledger.records()
        var out: [Item] = []
        var seen = Set<String>()
        for (take, session) in sessions where take.state != .recording && seen.insert(take.id).inserted {
            let record = records[take.id]
            var recheck = false
            if let record, record.state == .verified {
                guard verifyRemote || record.unconfirmed != nil, record.key == (try? keys(take))?.audio.rawValue else { continue }
                recheck = true
            }
            let url = try? store.storage.audioURL(for: take)
            var st = stat()
            let size = url.map { stat($0.path, &st) == 0 ? Int64(st.st_size) : 0 } ?? 0
            out.append(Item(take: take, session: session, record: record, size: size, recheck: recheck))
        }
        return out
    }

    /// How one take's push ended.
    public enum Outcome: Sendable {
        /// Sent, checked (`how`) and committed with its manifest.
        case uploaded(ContentDigest, how: String)
        /// The remote held these bytes already (an earlier run was stopped after sending them, or
        /// another copy of this library pushed them); checked and committed.
        case alreadyThere(ContentDigest, how: String)
        /// Not pushed; the take is `failed` in the ledger with this reason (tried again next run).
        /// A verified take whose check failed stays verified, marked to be checked again.
        case failed(TapedeckError)
        /// A verified take checked again: the remote still holds its bytes and their manifest.
        case confirmed(ContentDigest, how: String)
        /// A verified take checked again whose remote copy was missing or stale (`found` says
        /// what was wrong): sent again (the audio too when `audioSent`), checked and committed.
        case resent(ContentDigest, how: String, found: String, audioSent: Bool)
    }

    /// What ``push(_:options:progress:)`` reports as it goes.
    public enum Event: Sendable {
        /// Work on a take begins: `resuming` when an earlier upload's parts are reused.
        case started(Item, resuming: Bool)
        /// Bytes of the current take sent or kept.
        case sent(Item, Int64)
        case finished(Item, Outcome)
    }

    /// Pushes `items` one after the other. Cancellation (Ctrl-C) stops between two parts: the
    /// take being sent stays resumable.
    /// - Returns: each item's outcome, in order (fewer than `items` when cancelled).
    public func push(_ items: [Item], options: UploadOptions, progress: @escaping @MainActor (Event) -> Void) async -> [(Item, Outcome)] {
        var outcomes: [(Item, Outcome)] = []
        for item in items {
            if Task.isCancelled { break }
            progress(.started(item, resuming: item.record?.token != nil))
            let outcome: Outcome
            do {
                if item.recheck {
                    outcome = try await recheck(item, options: options, progress: progress)
                } else {
                    outcome = try await pushOne(item, options: options, progress: progress)
                }
            } catch is CancellationError {
                break
            } catch let error as TapedeckError where error.code == .cancelled {
                break
            } catch {
                let failure = (error as? TapedeckError) ?? TapedeckError(.remoteUnavailable, "\(error)")
                outcome = .failed(failure)
                let current = (try? ledger.records()[item.take.id]) ?? nil
                do {
                    if current?.state == .verified {
                        // A check that failed: the take stays verified, and is checked again next time.
                        try ledger.markUnconfirmed(item.take.id, reason: failure.message)
                    } else {
                        try ledger.set(item.take.id, UploadLedger.Record(state: .failed, key: (try? keys(item.take).audio.rawValue) ?? "",
                                                                         token: current?.token, reason: failure.message))
                    }
                } catch {
                    logger.error("Could not record the failed upload", metadata: ["take": "\(item.take.id)", "error": "\(error)"])
                }
            }
            logger.info("Pushed", metadata: ["take": "\(item.take.id)", "outcome": "\(outcome)"])
            outcomes.append((item, outcome))
            progress(.finished(item, outcome))
            // Wrong credentials, a missing bucket, a server that does not answer: every other
            // take would fail the same way. Said once; the next push goes on from here.
            if case .failed(let e) = outcome, Self.stopsThePush(e) { break }
        }
        return outcomes
    }

    /// A key that holds something else: never overwritten; the likely cause and its remedy said.
    func conflict(_ key: RemoteKey, _ reason: String) -> TapedeckError {
        TapedeckError(.alreadyExists, "\(key) on \(remote.location) already holds other audio: \(reason). It was left as it is. If another machine pushes under the name \(machine) too, give each machine its own: a machines: section per machine in the config file, chosen with --machine NAME.")
    }

    /// Whether a take's failure is the remote's as a whole (configuration: credentials, the
    /// bucket; or a server that cannot be reached), so the push stops rather than fail every take.
    public static func stopsThePush(_ error: TapedeckError) -> Bool {
        error.code == .configuration || error.code == .remoteUnavailable
    }

    /// What the remote holds already of each item, as a dry run says it (`push --dry-run`,
    /// as `rclone sync --dry-run` compares): one listing of this machine's objects, so wrong
    /// credentials, a missing bucket or a dead server are found now, not at the real push.
    /// - Returns: per take id, the size of the object at its audio key, when there is one.
    /// - Throws: the remote's error (said once).
    public func remoteSizes(of items: [Item]) async throws -> [String: Int64] {
        let objects = try await remote.list(under: machine + "/")
        let sizes = Dictionary(objects.map { ($0.key, $0.size) }, uniquingKeysWith: { a, _ in a })
        var out: [String: Int64] = [:]
        for item in items {
            if let key = try? keys(item.take).audio.rawValue, let size = sizes[key] { out[item.take.id] = size }
        }
        return out
    }

    func keys(_ take: Take) throws -> (audio: RemoteKey, manifest: RemoteKey) {
        try RemoteManifest.keys(machine: machine, take: take)
    }

    func pushOne(_ item: Item, options: UploadOptions, progress: @escaping @MainActor (Event) -> Void) async throws -> Outcome {
        let take = item.take
        let (audioKey, manifestKey) = try keys(take)
        let file = try store.storage.audioURL(for: take)
        let digest: ContentDigest
        let how: String
        var sent = false
        switch try await remote.verify(audioKey, against: file) {
        case .matches(let d, let h):
            (digest, how) = (d, h)
            if let token = item.record?.token { try? await remote.abandon(token, key: audioKey) }
        case .differs(let reason):
            throw conflict(audioKey, reason)
        case .missing:
            let ledger = self.ledger
            let takeID = take.id
            let key = audioKey.rawValue
            var uploaded: ContentDigest?
            do {
                uploaded = try await remote.upload(file, to: audioKey, resuming: item.record?.token, options: options, started: { token in
                    try ledger.set(takeID, UploadLedger.Record(state: .uploading, key: key, token: token))
                }, progress: { bytes in
                    Task { @MainActor in progress(.sent(item, bytes)) }
                })
            } catch let error as TapedeckError where error.code == .alreadyExists {
                // Written meanwhile: by this upload (its answer was lost and the retry found the
                // object), or by another process. The check below tells which.
                uploaded = nil
            }
            switch try await remote.verify(audioKey, against: file) {
            case .matches(let d, let h):
                guard uploaded == nil || d == uploaded else {
                    throw TapedeckError(.io, "The take's file \(file.path) changed while it was sent. Run push again.")
                }
                (digest, how, sent) = (d, h, uploaded != nil)
            case .differs(let reason) where uploaded == nil:
                throw conflict(audioKey, reason)
            case .differs(let reason):
                // This run's own conditional write made the object: removing it replaces nobody's.
                try? await remote.remove(audioKey)
                throw TapedeckError(.remoteUnavailable, "\(audioKey) was sent to \(remote.location), but the server's answer does not match the take (\(reason)); the object was removed again. Run push again to send it anew.")
            case .missing:
                throw TapedeckError(.remoteUnavailable, "\(audioKey) was sent to \(remote.location), but the server does not list it. Run push again to send it anew.")
            }
        }
        var manifest = RemoteManifest(machine: machine, session: .init(id: item.session.id, name: item.session.name, createdAt: item.session.createdAt),
                                      take: take, audio: .init(key: audioKey.rawValue, size: digest.size, sha256: digest.sha256), uploaded: Date())
        manifest.chain = try await pushChain(of: file, audioKey: audioKey, options: options)
        if try await !remote.put(try manifest.encoded(), at: manifestKey) {
            // Written by an earlier run that stopped before the ledger said so, or by another machine.
            guard let data = try await remote.get(manifestKey, limit: RemoteManifest.maximumBytes) else {
                throw TapedeckError(.remoteUnavailable, "\(manifestKey) was reported present on \(remote.location) and then could not be read. Run push again.")
            }
            let there = try RemoteManifest.decode(data, key: manifestKey.rawValue)
            guard there.take.id == take.id, there.audio.sha256 == digest.sha256, there.audio.size == digest.size else {
                throw conflict(manifestKey, "it describes other audio")
            }
        }
        try ledger.set(take.id, UploadLedger.Record(state: .verified, key: audioKey.rawValue, digest: digest))
        return sent ? .uploaded(digest, how: how) : .alreadyThere(digest, how: how)
    }

    /// A signed take's chain (its companion `TAKEFILE.chain`), sent as `AUDIOKEY.chain` before
    /// the manifest and checked as the audio is; `nil` when the take has none.
    func pushChain(of file: URL, audioKey: RemoteKey, options: UploadOptions) async throws -> RemoteManifest.Audio? {
        guard let chain = TakeCompanions.urls(of: file).first, FileManager.default.fileExists(atPath: chain.path) else { return nil }
        let key = try RemoteKey(audioKey.rawValue + TakeCompanions.suffixes[0])
        if case .missing = try await remote.verify(key, against: chain) {
            do {
                _ = try await remote.upload(chain, to: key, resuming: nil, options: options, started: { _ in }, progress: { _ in })
            } catch let error as TapedeckError where error.code == .alreadyExists {}
        }
        switch try await remote.verify(key, against: chain) {
        case .matches(let d, _): return RemoteManifest.Audio(key: key.rawValue, size: d.size, sha256: d.sha256)
        case .differs(let reason): throw conflict(key, reason)
        case .missing: throw TapedeckError(.remoteUnavailable, "\(key) was sent to \(remote.location), but the server does not list it. Run push again to send it anew.")
        }
    }

    /// Deletes from the library the takes verified on this remote that the library got more than
    /// `age` seconds before `now` (`sync.keep-local`; ``receivedDate(of:file:)``: never the file's
    /// own dates), each only after the remote is asked again: it must still hold the take's exact
    /// bytes (checked as after an upload) and a manifest naming their SHA-256. A take that cannot
    /// be confirmed is kept, with a warning that names it and says what to run; when the server
    /// answered (the object gone, other bytes), its record is marked so that the next push
    /// checks it again and sends what is missing or stale. - Returns: the takes deleted.
    public func applyRetention(olderThan age: TimeInterval, now: Date = Date()) async throws -> [Take] {
        let records = try ledger.records()
        var deleted: [Take] = []
        for session in store.sessions {
            for take in session.takes where take.createdAt.addingTimeInterval(age) < now && take.state != .recording {
                guard let record = records[take.id], record.state == .verified, let digest = record.digest,
                      let (audioKey, manifestKey) = try? keys(take), audioKey.rawValue == record.key,
                      let file = try? store.storage.audioURL(for: take),
                      let received = Self.receivedDate(of: take, file: file), received.addingTimeInterval(age) < now else { continue }
                let name = "\(session.name)/\(take.name) [\(take.shortID)]"
                switch await doubt(about: digest, audioKey: audioKey, manifestKey: manifestKey, file: file, take: take) {
                case nil:
                    try await store.delete(.take(take, in: session))
                    deleted.append(take)
                case .unreachable(let why)?:
                    logger.warning("Kept \(name), older than sync.keep-local: \(remote.location) could not be asked whether it still holds the take (\(why)). Run `tapedeck push` again when the server can be reached.",
                                   metadata: ["take": "\(take.id)"])
                case .answered(let why)?:
                    _ = try? ledger.markUnconfirmed(take.id, key: record.key, reason: why)
                    logger.warning("Kept \(name), older than sync.keep-local: its copy on \(remote.location) could not be confirmed (\(why)). The next `tapedeck push` checks it again and sends what is missing or stale; `tapedeck push --verify-remote` checks every take.",
                                   metadata: ["take": "\(take.id)"])
                }
            }
        }
        return deleted
    }
}
