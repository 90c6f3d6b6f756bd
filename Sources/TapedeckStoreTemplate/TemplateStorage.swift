public import Foundation
public import TapedeckCore
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A library folder with one JSON catalog (`catalog.json`) and the audio files beside it.
///
/// The store `scaffold-backend --kind storage` starts a new module from (renamed); compiled and
/// tested with the package so the template never rots, and in no plugin catalog. It keeps the
/// whole storage contract with Core's shared pieces (``DurableFiles`` for every durable step,
/// ``LockFile`` for the library lock and the take locks, ``StoreNames``, ``LibraryPath``,
/// ``SpaceReserve``) and passes `StorageConformance` as generated. Change where the catalog
/// lives (a database, a server) and keep the order of the steps:
///
/// - every catalog change is read, changed and written under the library lock, and written as
///   a new file that replaces the old one (`writeNewFile`, `replace`, folder synced);
/// - a take's entry (`recording`) is committed before its audio is written, under a take lock
///   its recorder holds while it lives, so a free lock means an interrupted take;
/// - finishing moves the synced audio into place before the entry says `complete`;
/// - deleting removes the entry first, then the audio.
///
/// For `tapedeck doctor`, also conform to `LibraryMaintenance` (see the directory store).
/// Thread-safe: every method may be called from any thread and blocks on disk I/O and on other
/// processes holding the library lock (up to `lockTimeout`).
public final class TemplateStorage: TakeStorage {
    public let rootURL: URL
    let files: DurableFiles
    let lockTimeout: TimeInterval
    /// Take locks this process holds (takes it records or recovers), by take id.
    let liveLocks = Mutex<[String: Int32]>([:])

    /// What `catalog.json` holds.
    struct Catalog: Codable {
        var sessions: [Session] = []
        /// A recording take's hidden pending file, by take id.
        var pending: [String: String] = [:]
    }

    static let catalogName = "catalog.json"
    static let lockName = ".library.lock"
    static let temporaryPrefix = ".catalog-"

    /// Opens (creating) the library at `rootURL` and removes catalog temporaries a dead process
    /// left behind.
    public init(rootURL: URL, seam: any StorageSeam = .none,
                lockTimeout: TimeInterval = TemplateStorageSettings.lockTimeout.defaultValue) throws {
        files = DurableFiles(seam: seam)
        try files.makeDirectory(rootURL.standardizedFileURL)
        self.rootURL = rootURL.standardizedFileURL.resolvingSymlinksInPath()
        self.lockTimeout = lockTimeout
        try locked {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: self.rootURL.path)) ?? []
            for name in names where name.hasPrefix(Self.temporaryPrefix) {
                try files.remove(self.rootURL.appendingPathComponent(name))
            }
        }
    }

    deinit {
        for fd in liveLocks.withLock({ Array($0.values) }) { close(fd) }
    }

    // MARK: the catalog

    func read() throws -> Catalog {
        let url = rootURL.appendingPathComponent(Self.catalogName)
        guard FileManager.default.fileExists(atPath: url.path) else { return Catalog() }
        do {
            return try JSONDecoder().decode(Catalog.self, from: Data(contentsOf: url))
        } catch {
            throw TapedeckError(.corruptFile, "The catalog \(url.path) cannot be read (\(error)). Restore it from a copy.")
        }
    }

    /// Runs `body` holding the library lock.
    func locked<T>(_ body: () throws -> T) throws -> T {
        let fd = try LockFile.acquire(rootURL.appendingPathComponent(Self.lockName), until: Date().addingTimeInterval(lockTimeout)) { url in
            TapedeckError(.busy, "Another tapedeck process held the library lock \(url.path) for more than \(Int(self.lockTimeout)) s. Try again when it has finished.")
        }
        defer { close(fd) }
        return try body()
    }

    /// Reads the catalog, lets `body` change it, and writes it back, all under the library lock.
    func change<T>(_ operation: String, _ body: (inout Catalog) throws -> T) throws -> T {
        try locked {
            var catalog = try read()
            let result = try body(&catalog)
            let temporary = rootURL.appendingPathComponent(Self.temporaryPrefix + UUID().uuidString.lowercased())
            do {
                try files.writeNewFile(try JSONEncoder().encode(catalog), to: temporary)
                try files.replace(rootURL.appendingPathComponent(Self.catalogName), with: temporary)
            } catch {
                unlink(temporary.path) // not a change to the library: the old catalog stands
                throw error
            }
            try files.syncDirectory(rootURL)
            try files.reached(operation, "catalog committed")
            return result
        }
    }

    // MARK: reading

    public func sessions() throws -> [Session] { try read().sessions }

    public func audioURL(for take: Take) throws -> URL {
        try LibraryPath.resolve(take.file, under: rootURL, namedBy: "The catalog")
    }

    // MARK: sessions

    public func createSession(named name: String?) throws -> Session {
        let chosen = try name.map { try NameRules.validate($0, what: "session") }
        return try change("createSession") { c in
            let session = Session(id: UUID().uuidString.lowercased(), name: try StoreNames.sessionName(chosen, taken: c.sessions.map(\.name)),
                                  createdAt: Date())
            c.sessions.append(session)
            return session
        }
    }

    public func renameSession(_ id: String, to name: String) throws -> Session {
        let name = try NameRules.validate(name, what: "session")
        return try change("renameSession") { c in
            guard let i = c.sessions.firstIndex(where: { $0.id == id }) else { throw Self.noSession(id) }
            if c.sessions.contains(where: { $0.name == name && $0.id != id }) {
                throw TapedeckError(.alreadyExists, "A session named \"\(name)\" exists already. Choose another name.")
            }
            c.sessions[i].name = name
            return c.sessions[i]
        }
    }

    public func deleteSession(_ id: String) throws {
        let doomed = try change("deleteSession") { c -> [String] in
            guard let i = c.sessions.firstIndex(where: { $0.id == id }) else { throw Self.noSession(id) }
            if c.sessions[i].takes.contains(where: { isLive($0.id) }) {
                throw TapedeckError(.busy, "The session is being recorded into. Stop that recording first, then delete the session.")
            }
            let takes = c.sessions.remove(at: i).takes
            return takes.map(\.file) + takes.compactMap { c.pending.removeValue(forKey: $0.id) } + takes.map { StoreNames.lockFile(id: $0.id) }
        }
        try removeFiles(doomed, "deleteSession")
    }

    // MARK: takes

    public func beginTake(in sessionID: String, named name: String?, format: AudioFormat, encoding: String,
                          fileExtension: String, startDate: Date) throws -> PendingTake {
        let chosen = try name.map { try NameRules.validate($0, what: "take") }
        let id = UUID().uuidString.lowercased()
        let lockURL = rootURL.appendingPathComponent(StoreNames.lockFile(id: id))
        let lock = try LockFile.create(lockURL)
        do {
            try SpaceReserve.claim(lock, path: lockURL.path)
            let pendingName = StoreNames.pendingFile(id: id, fileExtension: fileExtension)
            let pending = try change("beginTake") { c -> PendingTake in
                guard let i = c.sessions.firstIndex(where: { $0.id == sessionID }) else { throw Self.noSession(sessionID) }
                let number = (c.sessions[i].takes.map(\.number).max() ?? 0) + 1
                let takeName = try StoreNames.takeName(chosen, number: number, taken: c.sessions[i].takes.map(\.name),
                                                       session: c.sessions[i].name)
                let take = Take(id: id, sessionID: sessionID, name: takeName, number: number, createdAt: startDate, state: .recording,
                                format: format, encoding: encoding,
                                file: StoreNames.takeFile(number: number, name: takeName, id: id, fileExtension: fileExtension), frames: 0)
                c.sessions[i].takes.append(take)
                c.pending[id] = pendingName
                return PendingTake(take: take, session: c.sessions[i], fileURL: rootURL.appendingPathComponent(pendingName))
            }
            liveLocks.withLock { $0[id] = lock }
            return pending
        } catch {
            unlink(lockURL.path)
            close(lock)
            throw error
        }
    }

    public func finishTake(_ pending: PendingTake, frames: Int64, state: TakeState, overruns: [OverrunEvent]) throws -> Take {
        if let lock = liveLocks.withLock({ $0[pending.take.id] }) { SpaceReserve.release(lock) }
        let final = try audioURL(for: pending.take)
        if FileManager.default.fileExists(atPath: pending.fileURL.path) {
            try files.syncFile(pending.fileURL)
            try files.reached("finishTake", "audio synced")
            try files.moveIntoPlace(pending.fileURL, final)
            try files.reached("finishTake", "audio moved into place")
        } else if !FileManager.default.fileExists(atPath: final.path) {
            throw TapedeckError(.notFound, "The audio of take \"\(pending.take.name)\" is missing; the take was not marked finished.")
        }
        return try update("finishTake", pending.take.id) { _, t in
            t.state = state
            t.frames = frames
            t.overruns = overruns
        }
    }

    public func renameTake(_ id: String, to name: String) throws -> Take {
        let name = try NameRules.validate(name, what: "take")
        return try update("renameTake", id) { session, take in
            if session.takes.contains(where: { $0.name == name && $0.id != id }) {
                throw TapedeckError(.alreadyExists, "Session \"\(session.name)\" has a take named \"\(name)\" already. Choose another name.")
            }
            take.name = name
        }
    }

    public func annotateTake(_ id: String, _ annotations: TakeAnnotations) throws -> Take {
        try annotations.validate()
        return try update("annotateTake", id) { _, take in take.annotations = annotations }
    }

    public func deleteTake(_ id: String) throws {
        try deleteTake(id, operation: "deleteTake")
    }

    private func deleteTake(_ id: String, operation: String) throws {
        let doomed = try change(operation) { c -> [String] in
            for i in c.sessions.indices {
                guard let j = c.sessions[i].takes.firstIndex(where: { $0.id == id }) else { continue }
                // Recovery deletes a take this process claimed; anyone else waits for its recorder.
                if operation == "deleteTake" ? isLive(id) : isLiveElsewhere(id) {
                    throw TapedeckError(.busy, "Take \"\(c.sessions[i].takes[j].name)\" is being recorded. Stop that recording first.")
                }
                let take = c.sessions[i].takes.remove(at: j)
                return [take.file] + [c.pending.removeValue(forKey: id)].compactMap { $0 } + [StoreNames.lockFile(id: id)]
            }
            throw Self.noTake(id)
        }
        if let fd = liveLocks.withLock({ $0.removeValue(forKey: id) }) { close(fd) }
        try removeFiles(doomed, operation)
    }

    // MARK: recovery

    /// Claims the lock of every take left `recording` by a dead process. A take whose entry or
    /// file names cannot be used is left for `doctor`; one that finished while its lock was being
    /// claimed is let go again.
    public func interruptedTakes() throws -> [InterruptedTake] {
        var found: [InterruptedTake] = []
        for session in try sessions() {
            for take in session.takes where take.state == .recording && !liveLocks.withLock({ $0[take.id] != nil }) {
                guard LibraryPath.isPlainName(take.id), let audio = try? audioURL(for: take),
                      let lock = LockFile.claim(rootURL.appendingPathComponent(StoreNames.lockFile(id: take.id))) else { continue }
                let catalog = try read()
                let current = catalog.sessions.lazy.flatMap(\.takes).first { $0.id == take.id }
                guard current?.state == .recording else {
                    unlink(rootURL.appendingPathComponent(StoreNames.lockFile(id: take.id)).path)
                    close(lock)
                    continue
                }
                liveLocks.withLock { $0[take.id] = lock }
                let pending = catalog.pending[take.id].flatMap { try? LibraryPath.resolve($0, under: rootURL, namedBy: "The catalog") }
                found.append(InterruptedTake(take: take, fileURL: [pending, audio].compactMap { $0 }.first { FileManager.default.fileExists(atPath: $0.path) }))
            }
        }
        return found
    }

    public func completeRecovery(of take: Take, repaired: RepairResult?) throws -> Take? {
        guard liveLocks.withLock({ $0[take.id] != nil }) else {
            throw TapedeckError(.busy, "Take \"\(take.name)\" was not claimed for recovery by this process; list the interrupted takes again.")
        }
        guard let repaired else {
            try deleteTake(take.id, operation: "completeRecovery")
            return nil
        }
        if let name = try read().pending[take.id] {
            let pending = try LibraryPath.resolve(name, under: rootURL, namedBy: "The catalog")
            if FileManager.default.fileExists(atPath: pending.path) {
                try files.syncFile(pending)
                try files.moveIntoPlace(pending, try audioURL(for: take))
                try files.reached("completeRecovery", "audio moved into place")
            }
        }
        return try update("completeRecovery", take.id) { _, t in
            guard t.state == .recording else {
                throw TapedeckError(.alreadyExists, "Take \"\(t.name)\" was finished meanwhile; it is not recovered again.")
            }
            t.state = .recovered
            t.frames = repaired.frames
            t.format = repaired.format
        }
    }

    // MARK: helpers

    /// Changes one take's entry; a take that is no longer recording gives up its pending file
    /// and its lock.
    private func update(_ operation: String, _ id: String, _ body: (Session, inout Take) throws -> Void) throws -> Take {
        let take = try change(operation) { c -> Take in
            for i in c.sessions.indices {
                guard let j = c.sessions[i].takes.firstIndex(where: { $0.id == id }) else { continue }
                try body(c.sessions[i], &c.sessions[i].takes[j])
                if c.sessions[i].takes[j].state != .recording { c.pending[id] = nil }
                return c.sessions[i].takes[j]
            }
            throw Self.noTake(id)
        }
        if take.state != .recording {
            // Best effort, after the commit it guarded: a lock file left behind is harmless.
            unlink(rootURL.appendingPathComponent(StoreNames.lockFile(id: id)).path)
            if let fd = liveLocks.withLock({ $0.removeValue(forKey: id) }) { close(fd) }
        }
        return take
    }

    /// Whether a live process (this one included) holds the take's lock.
    private func isLive(_ id: String) -> Bool {
        liveLocks.withLock { $0[id] != nil } || isLiveElsewhere(id)
    }

    private func isLiveElsewhere(_ id: String) -> Bool {
        !liveLocks.withLock({ $0[id] != nil }) && LockFile.isHeld(rootURL.appendingPathComponent(StoreNames.lockFile(id: id)))
    }

    /// Removes files after the change that dropped them was committed, then syncs the folder.
    private func removeFiles(_ names: [String], _ operation: String) throws {
        for name in names { try files.remove(try LibraryPath.resolve(name, under: rootURL, namedBy: "The catalog", checkingLast: false)) }
        try files.syncDirectory(rootURL)
        try files.reached(operation, "audio removed")
    }

    private static func noSession(_ id: String) -> TapedeckError {
        TapedeckError(.notFound, "No session has the id \(id). Run `tapedeck list` to see the sessions.")
    }

    private static func noTake(_ id: String) -> TapedeckError {
        TapedeckError(.notFound, "No take has the id \(id). Run `tapedeck list` to see the takes.")
    }
}
