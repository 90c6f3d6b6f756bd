public import Foundation
public import Logging
public import TapedeckCore

/// Copies finished takes to a remote (`tapedeck push`), never losing track of one: for each take,
/// the audio first (skipped when the remote already holds exactly these bytes), then a check of
/// what the remote holds, then the manifest as the commit marker, and only then `verified` in
/// the library's upload ledger. A take whose upload stops midway stays `uploading` (resumed next
/// time) or `failed` with the reason; nothing local is deleted except by ``applyRetention(olderThan:now:)``,
/// and only takes verified on this remote.
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
    }

    /// The takes of `sessions` that still need pushing (not verified on this remote), in session
    /// and take order; takes being recorded are left for a later run.
    /// - Throws: when the ledger cannot be read.
    public func pending(in sessions: [(Take, Session)]) throws -> [Item] {
        let records = try ledger.records()
        var out: [Item] = []
        var seen = Set<String>()
        for (take, session) in sessions where take.state != .recording && seen.insert(take.id).inserted {
            let record = records[take.id]
            if record?.state == .verified { continue }
            let url = try? store.storage.audioURL(for: take)
            var st = stat()
            let size = url.map { stat($0.path, &st) == 0 ? Int64(st.st_size) : 0 } ?? 0
            out.append(Item(take: take, session: session, record: record, size: size))
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
        case failed(TapedeckError)
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
                outcome = try await pushOne(item, options: options, progress: progress)
            } catch is CancellationError {
                break
            } catch let error as TapedeckError where error.code == .cancelled {
                break
            } catch {
                let failure = (error as? TapedeckError) ?? TapedeckError(.remoteUnavailable, "\(error)")
                outcome = .failed(failure)
                let token = (try? ledger.records()[item.take.id])??.token
                do {
                    try ledger.set(item.take.id, UploadLedger.Record(state: .failed, key: (try? keys(item.take).audio.rawValue) ?? "",
                                                                     token: token, reason: failure.message))
                } catch {
                    logger.error("Could not record the failed upload", metadata: ["take": "\(item.take.id)", "error": "\(error)"])
                }
            }
            logger.info("Pushed", metadata: ["take": "\(item.take.id)", "outcome": "\(outcome)"])
            outcomes.append((item, outcome))
            progress(.finished(item, outcome))
        }
        return outcomes
    }

    /// A key that holds something else: never overwritten; the likely cause and its remedy said.
    private func conflict(_ key: RemoteKey, _ reason: String) -> TapedeckError {
        TapedeckError(.alreadyExists, "\(key) on \(remote.location) already holds other audio: \(reason). It was left as it is. If another machine pushes under the name \(machine) too, give each machine its own: a machines: section per machine in the config file, chosen with --machine NAME.")
    }

    private func keys(_ take: Take) throws -> (audio: RemoteKey, manifest: RemoteKey) {
        try RemoteManifest.keys(machine: machine, take: take)
    }

    private func pushOne(_ item: Item, options: UploadOptions, progress: @escaping @MainActor (Event) -> Void) async throws -> Outcome {
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
        let manifest = RemoteManifest(machine: machine, session: .init(id: item.session.id, name: item.session.name, createdAt: item.session.createdAt),
                                      take: take, audio: .init(key: audioKey.rawValue, size: digest.size, sha256: digest.sha256), uploaded: Date())
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

    /// Deletes from the library the takes verified on this remote that began more than `age`
    /// seconds before `now` (`sync.keep-local`), each only after the remote is asked again: it
    /// must still hold the take's exact bytes (checked as after an upload) and a manifest naming
    /// their SHA-256. A take that cannot be confirmed (the server unreachable, the object gone) is
    /// kept and logged. - Returns: the takes deleted.
    public func applyRetention(olderThan age: TimeInterval, now: Date = Date()) async throws -> [Take] {
        let records = try ledger.records()
        var deleted: [Take] = []
        for session in store.sessions {
            for take in session.takes where take.createdAt.addingTimeInterval(age) < now && take.state != .recording {
                guard let record = records[take.id], record.state == .verified, let digest = record.digest,
                      let (audioKey, manifestKey) = try? keys(take), audioKey.rawValue == record.key,
                      let file = try? store.storage.audioURL(for: take) else { continue }
                guard case .matches(let held, _)? = try? await remote.verify(audioKey, against: file), held == digest,
                      let data = try? await remote.get(manifestKey, limit: RemoteManifest.maximumBytes),
                      let there = try? RemoteManifest.decode(data, key: manifestKey.rawValue), there.audio.sha256 == digest.sha256 else {
                    logger.warning("Kept a take whose remote copy could not be confirmed", metadata: ["take": "\(take.id)"])
                    continue
                }
                try await store.delete(.take(take, in: session))
                deleted.append(take)
            }
        }
        return deleted
    }
}
