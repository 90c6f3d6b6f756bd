public import Observation
public import TapedeckCore
public import Logging
import Foundation

/// The library as the app sees it: every session and take, refreshed after each change.
///
/// A store opened without loading the sessions (``open(recoveringWith:loadingSessions:)``, as
/// `tapedeck record` does) keeps no list and is not refreshed after changes until ``refresh()``
/// loads it: recording then reads nothing of the library but the session it records into, so it
/// costs the same in a library of any size.
///
/// Runs on the main actor. Storage calls run on a background queue and are awaited; the
/// published ``sessions`` always hold the last good state, and failures are logged and rethrown.
@MainActor
@Observable
public final class SessionStore {
    /// The store this object mutates.
    public let storage: any TakeStorage
    @ObservationIgnored private let logger: Logger
    /// This store's own serial queue for storage calls.
    @ObservationIgnored private let work = BlockingWork(label: "tapedeck.session-store")

    /// Every session with its takes, as of the last successful refresh (empty until loaded).
    public private(set) var sessions: [Session] = []
    /// Whether ``sessions`` has been loaded; only then do changes refresh it.
    public private(set) var isLoaded = false
    /// The last failure, for display.
    public private(set) var lastError: TapedeckError?

    public init(storage: any TakeStorage, logger: Logger) {
        self.storage = storage
        self.logger = logger
    }

    /// Repairs takes left in `recording` by a process that died, then (with `loadingSessions`)
    /// loads the sessions.
    ///
    /// For each such take, `encoders` (by encoding name) repair the file: its length is trusted,
    /// not its header. The take becomes `recovered`; a take with no audio byte is removed; a file
    /// that cannot be read as audio of its kind is moved into the quarantine and the take removed.
    /// - Returns: the recovered takes.
    /// - Thread: main actor; the work runs on a background queue.
    @discardableResult
    public func open(recoveringWith encoders: [any AudioEncoder], loadingSessions: Bool = true) async throws -> [Take] {
        let storage = self.storage
        let logger = self.logger
        let recovered = try await perform {
            var recovered: [Take] = []
            for interrupted in try storage.interruptedTakes() {
                let outcome: TakeRecovery.Outcome
                do {
                    outcome = try TakeRecovery.recover(interrupted, storage: storage, encoders: encoders)
                } catch let error as TapedeckError {
                    logger.error("\(error.message)")
                    continue
                }
                switch outcome {
                case .recovered(let take):
                    logger.notice("Recovered take \"\(take.name)\" (\(String(format: "%.3f", take.seconds)) s) left by a recording that did not finish.")
                    recovered.append(take)
                case .removed:
                    break
                case .quarantined(let take, let path, let reason):
                    logger.warning("Take \"\(take.name)\", left by a recording that did not finish, could not be recovered (\(reason)); its file was moved to \(path) in the library, bytes intact, and the take removed from the list.")
                }
            }
            // Temporary files of imports that were killed (even by SIGKILL) go too.
            for name in PartialFiles.removeStale(in: storage.rootURL) {
                logger.info("Removed \(name), left by an import that did not finish.")
            }
            return recovered
        }
        if loadingSessions { try await refresh() }
        return recovered
    }

    /// Reloads ``sessions`` from storage.
    /// - Thread: main actor; the read runs on a background queue.
    public func refresh() async throws {
        let storage = self.storage
        sessions = try await perform { try storage.sessions() }
        isLoaded = true
    }

    /// Reloads ``sessions`` after a change, when they have been loaded.
    /// - Thread: main actor; the read runs on a background queue.
    func refreshIfLoaded() async throws {
        if isLoaded { try await refresh() }
    }

    /// Resolves a user's reference to a session or take: among the loaded sessions, or, when
    /// they are not loaded, among those storage finds by key (`TakeStorage.sessions(matching:)`),
    /// so naming one take costs the same in a library of any size. Only a reference that names
    /// nothing reads the whole library, for its "did you mean" suggestion.
    /// - Thread: main actor. Never blocks when loaded; otherwise blocks briefly on the catalog.
    public func resolve(_ reference: String) throws -> TakeReference {
        do {
            do {
                if isLoaded { return try TakeReference.resolve(reference, in: sessions) }
                do {
                    return try TakeReference.resolve(reference, in: try storage.sessions(matching: reference))
                } catch let e as TapedeckError where e.code == .notFound {
                    return try TakeReference.resolve(reference, in: try storage.sessions())
                }
            } catch let e as TapedeckError where e.code == .notFound {
                // The id a take has on the remote (`fleet list`) names the copy pulled from it.
                guard let pulled = try pulledCopy(of: reference) else { throw e }
                return try TakeReference.resolve(pulled, in: isLoaded ? sessions : try storage.sessions(matching: pulled))
            }
        } catch let e as TapedeckError {
            lastError = e
            throw e
        }
    }

    /// The local id of the take pulled from the remote take whose id begins with `reference`
    /// (4 or more characters of it), from the upload ledger's record of the pull; `nil` when
    /// none was pulled. - Thread: main actor. Blocks briefly on the ledger's file.
    private func pulledCopy(of reference: String) throws -> String? {
        let lowered = reference.lowercased()
        guard lowered.count >= 4, lowered.allSatisfy({ $0.isHexDigit || $0 == "-" }) else { return nil }
        let remotes = (try? UploadLedger(libraryURL: storage.rootURL, remote: "").allRecords()) ?? [:]
        var found = Set<String>()
        for (takeID, record) in remotes.values.joined() {
            let remoteID = ((record.key as NSString).lastPathComponent as NSString).deletingPathExtension.lowercased()
            if remoteID != takeID.lowercased(), remoteID.hasPrefix(lowered) { found.insert(takeID) }
        }
        guard found.count <= 1 else {
            throw TapedeckError(.invalidArgument, "\"\(reference)\" is the start of the remote ids of \(found.count) pulled takes. Give more of the id, or the local id `tapedeck list` prints.")
        }
        return found.first
    }

    /// The take `reference` names; a session is refused with what to write instead.
    /// - Thread: main actor; blocks as ``resolve(_:)`` does.
    public func resolveTake(_ reference: String) throws -> (Take, Session) {
        guard case .take(let t, let s) = try resolve(reference) else {
            let e = TapedeckError(.invalidArgument, "\"\(reference)\" is a session. Name a take as SESSION/TAKE, by its id, or as `last`.")
            lastError = e
            throw e
        }
        return (t, s)
    }

    /// The session named `name` (creating it), or with `nil` the most recently active session
    /// (creating "Session N" when there is none), as storage has it now (see
    /// `TakeStorage.findSessionForRecording(named:)`); returned without its takes.
    /// - Thread: main actor; storage work runs on a background queue.
    public func sessionForRecording(named name: String?) async throws -> Session {
        let storage = self.storage
        if let found = try await perform({ try storage.findSessionForRecording(named: name) }) { return found }
        do {
            return try await createSession(named: name)
        } catch let error as TapedeckError where error.code == .alreadyExists && name != nil {
            // Another process created it since this one looked: record into that one.
            if let found = try await perform({ try storage.findSessionForRecording(named: name) }) { return found }
            throw error
        }
    }

    /// Creates a session (with `nil`, the next default name).
    /// - Thread: main actor; storage work runs on a background queue.
    public func createSession(named name: String?) async throws -> Session {
        let storage = self.storage
        let s = try await perform { try storage.createSession(named: name) }
        try await refreshIfLoaded()
        return s
    }

    /// Renames a session or take.
    /// - Thread: main actor; storage work runs on a background queue.
    public func rename(_ reference: TakeReference, to name: String) async throws {
        let storage = self.storage
        switch reference {
        case .session(let s): _ = try await perform { try storage.renameSession(s.id, to: name) }
        case .take(let t, _): _ = try await perform { try storage.renameTake(t.id, to: name) }
        }
        try await refreshIfLoaded()
    }

    /// Sets a take's notes, tags and clip count; returns the take as stored.
    /// - Thread: main actor; storage work runs on a background queue.
    public func annotate(_ take: Take, _ annotations: TakeAnnotations) async throws -> Take {
        let storage = self.storage
        let id = take.id
        let updated = try await perform { try storage.annotateTake(id, annotations) }
        try await refreshIfLoaded()
        return updated
    }

    /// Deletes a session (with all its takes) or a take: rows first, then audio.
    /// - Thread: main actor; storage work runs on a background queue.
    public func delete(_ reference: TakeReference) async throws {
        let storage = self.storage
        switch reference {
        case .session(let s): try await perform { try storage.deleteSession(s.id) }
        case .take(let t, _): try await perform { try storage.deleteTake(t.id) }
        }
        try await refreshIfLoaded()
    }

    /// Runs storage work off the main actor, logging and keeping the failure.
    func perform<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        do {
            return try await work.run(body)
        } catch let error as TapedeckError {
            lastError = error
            logger.debug("Storage operation failed: \(error.message)")
            throw error
        } catch {
            let e = TapedeckError(.io, "The library failed: \(error).")
            lastError = e
            throw e
        }
    }
}
