public import Foundation
import GRDB
public import TapedeckCore
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A library folder: `catalog.sqlite` at the root and one folder per session under `sessions/`.
///
/// Audio goes to a hidden pending file (`.ID.pending.EXT`) beside its final name while it is
/// recorded; a lock file held with `flock` for the whole recording tells other processes the take
/// is live, so only takes whose process died are recovered.
///
/// Thread-safe: every method may be called from any thread and may block on disk I/O or on
/// another process holding the catalog (up to the busy timeout). Methods are documented on
/// `TakeStorage`.
public final class DirectoryStorage: LibraryMaintenance {
    public let rootURL: URL
    let catalog: Catalog
    let catalogURL: URL
    /// Every mutation of the library goes through here (and so through the seam).
    let files: DurableFiles
    /// Lock files of takes this process is recording, by take id.
    let liveLocks = Mutex<[String: Int32]>([:])

    /// Opens (creating if needed) the library at `rootURL`.
    /// - Parameters:
    ///   - rootURL: the library folder.
    ///   - busyTimeout: how long to wait for another process holding the catalog.
    ///   - seam: observes every file-system mutation and durable step (tests inject faults here).
    /// - Thread: any. Blocks on disk I/O.
    public init(rootURL: URL, busyTimeout: TimeInterval = DirectoryStorageSettings.busyTimeout.defaultValue, seam: any StorageSeam = .none) throws {
        let root = rootURL.standardizedFileURL
        files = DurableFiles(seam: seam)
        try files.makeDirectory(root)
        try files.makeDirectory(root.appendingPathComponent("sessions"))
        self.rootURL = root.resolvingSymlinksInPath()
        catalogURL = self.rootURL.appendingPathComponent(Self.catalogName)
        // Opening sets WAL mode and migrates, which SQLite's busy timeout does not cover: two
        // processes opening a new library at once would see "database is locked". Opening is
        // serialized between processes by a lock file instead.
        let openLock = try Self.lockExclusively(self.rootURL.appendingPathComponent(Self.libraryLockName), timeout: busyTimeout)
        defer { close(openLock) }
        catalog = try Catalog(url: catalogURL, busyTimeout: busyTimeout)
        self.busyTimeout = busyTimeout
        // The catalog's reserve (see ``commit(_:_:)``), taken back whenever there is room.
        SpaceReserve.keepLibraryReserve(openLock)
    }

    /// The lock file that serializes opening the catalog between processes, and each delete
    /// (its row, then its audio) with `doctor`'s final check of a file no row names.
    static let libraryLockName = ".catalog-open.lock"
    /// The catalog's file name at the library root.
    static let catalogName = "catalog.sqlite"
    let busyTimeout: TimeInterval

    /// Runs `body` holding the library lock (see ``libraryLockName``).
    func holdingLibraryLock<T>(_ body: () throws -> T) throws -> T {
        let fd = try Self.lockExclusively(rootURL.appendingPathComponent(Self.libraryLockName), timeout: busyTimeout)
        defer { close(fd) }
        return try body()
    }

    /// Takes the library lock at `url`, waiting up to `timeout` seconds.
    static func lockExclusively(_ url: URL, timeout: TimeInterval) throws -> Int32 {
        try LockFile.acquire(url, until: Date().addingTimeInterval(timeout)) { url in
            TapedeckError(.busy, "Another tapedeck process kept the library \(url.deletingLastPathComponent().path) locked for \(Int(timeout)) s. Try again when it has finished.")
        }
    }

    /// Runs a catalog transaction as one announced write; `step` is reported once it committed.
    func commit<T>(_ operation: String, _ body: (Database) throws -> T) throws -> T {
        try files.seam.willPerform(.write, on: catalogURL)
        let result: T
        do {
            result = try catalog.write(body)
        } catch let error as TapedeckError where error.code == .diskFull {
            guard SpaceReserve.releaseLibraryReserve(lockFile: rootURL.appendingPathComponent(Self.libraryLockName).path,
                                                     root: rootURL.path) else { throw error }
            result = try catalog.write(body)
        }
        try files.reached(operation, "catalog committed")
        return result
    }

    deinit {
        for fd in liveLocks.withLock({ Array($0.values) }) { close(fd) }
    }

    // MARK: reading

    public func sessions() throws -> [Session] {
        try catalog.read { db in
            // A damaged row is left out (`doctor` lists it: damagedParts()), never a crash.
            let takes = try Row.fetchAll(db, sql: "SELECT * FROM take ORDER BY number, createdAt").compactMap { try? Catalog.take(from: $0) }
            let byID = Dictionary(grouping: takes, by: \.sessionID)
            return try Row.fetchAll(db, sql: "SELECT * FROM session ORDER BY createdAt, rowid").compactMap { row in
                guard var s = try? Catalog.session(from: row).0 else { return nil }
                s.takes = byID[s.id] ?? []
                return s
            }
        }
    }

    /// One query on the catalog that reads no take (`TakeStorage`'s default reads the whole
    /// library for this); the take index finds each session's newest take.
    public func findSessionForRecording(named name: String?) throws -> Session? {
        try catalog.read { db in
            let row: Row?
            if let name {
                // Names are compared as Swift compares them (canonically equivalent spellings, NFC
                // and NFD, are one name), not byte for byte as SQL would; a library has few sessions.
                row = try Row.fetchAll(db, sql: "SELECT * FROM session ORDER BY createdAt, rowid")
                    .first { String.fromDatabaseValue($0.checked("name")) == name }
            } else {
                // The session whose latest take (or, without takes, its creation) is the newest;
                // the oldest of equals, as sessions() lists them.
                row = try Row.fetchOne(db, sql: """
                    SELECT * FROM session
                    ORDER BY COALESCE((SELECT MAX(take.createdAt) FROM take WHERE take.sessionId = session.id),
                                      session.createdAt) DESC,
                             session.createdAt, session.rowid
                    LIMIT 1
                    """)
            }
            return try row.map { try Catalog.session(from: $0).0 }
        }
    }

    public func audioURL(for take: Take) throws -> URL {
        try confined(take.file)
    }

    // MARK: sessions

    public func createSession(named name: String?) throws -> Session {
        let id = UUID().uuidString.lowercased()
        let created = Date()
        let chosen = try name.map { try NameRules.validate($0, what: "session") }
        // The folder is made first: a folder with no row is harmless, a row with no folder is not.
        let provisional = StoreNames.sessionFolder(name: chosen ?? "session", id: id)
        let folder = "sessions/" + provisional
        try files.makeDirectory(try confined(folder))
        try files.reached("createSession", "folder created")
        return try commit("createSession") { db in
            let existing = try String.fetchAll(db, sql: "SELECT name FROM session")
            let finalName = try StoreNames.sessionName(chosen, taken: existing)
            try db.execute(sql: "INSERT INTO session (id, name, createdAt, folder) VALUES (?, ?, ?, ?)",
                           arguments: [id, finalName, created.timeIntervalSince1970, folder])
            return Session(id: id, name: finalName, createdAt: created)
        }
    }

    public func renameSession(_ id: String, to name: String) throws -> Session {
        let name = try NameRules.validate(name, what: "session")
        try commit("renameSession") { db in
            guard try Row.fetchOne(db, sql: "SELECT id FROM session WHERE id = ?", arguments: [id]) != nil else {
                throw TapedeckError(.notFound, "No session has the id \(id). Run `tapedeck list` to see the sessions.")
            }
            // Names are compared as Swift compares text: canonically equivalent spellings are one name.
            if try String.fetchAll(db, sql: "SELECT name FROM session WHERE id <> ?", arguments: [id]).contains(name) {
                throw TapedeckError(.alreadyExists, "A session named \"\(name)\" exists already. Choose another name.")
            }
            try db.execute(sql: "UPDATE session SET name = ? WHERE id = ?", arguments: [name, id])
        }
        guard let s = try session(id: id) else { throw TapedeckError(.notFound, "The session \(id) vanished while being renamed.") }
        return s
    }

    public func deleteSession(_ id: String) throws {
        let (folder, audio, takeIDs) = try commit("deleteSession") { db -> (String, [String], [String]) in
            guard let row = try Row.fetchOne(db, sql: "SELECT * FROM session WHERE id = ?", arguments: [id]) else {
                throw TapedeckError(.notFound, "No session has the id \(id). Run `tapedeck list` to see the sessions.")
            }
            let files = try Row.fetchAll(db, sql: "SELECT file, pendingFile FROM take WHERE sessionId = ?", arguments: [id])
                .flatMap { r -> [String] in [r.checked("file"), r.checked("pendingFile")].compactMap { String.fromDatabaseValue($0) } }
            let recording = try Row.fetchAll(db, sql: "SELECT * FROM take WHERE sessionId = ? AND state = 'recording'", arguments: [id])
            if try recording.map({ try Catalog.take(from: $0) }).contains(where: isLive) {
                throw TapedeckError(.busy, "The session is being recorded into. Stop that recording first, then delete the session.")
            }
            let takeIDs = try String.fetchAll(db, sql: "SELECT id FROM take WHERE sessionId = ?", arguments: [id])
            // Every path is checked before anything is deleted: a folder that became a symbolic
            // link refuses the delete whole, instead of removing the entries and failing on the audio.
            let folder = try Catalog.session(from: row).folder
            _ = try confined(folder)
            for file in files { _ = try confined(file) }
            try db.execute(sql: "DELETE FROM take WHERE sessionId = ?", arguments: [id])
            try db.execute(sql: "DELETE FROM session WHERE id = ?", arguments: [id])
            return (folder, files, takeIDs)
        }
        // Rows are gone; now the audio. A failure here leaves orphan files, never rows without audio.
        let folderURL = try confined(folder)
        for file in audio { try files.remove(try confined(file)) }
        try files.syncDirectory(folderURL)
        try files.reached("deleteSession", "audio removed")
        for takeID in takeIDs { releaseLock(takeID: takeID, folderOf: folder + "/x") }
        try files.removeEmptyDirectory(folderURL)
        try files.syncDirectory(folderURL.deletingLastPathComponent())
        try files.reached("deleteSession", "folder removed")
    }

    // MARK: takes

    public func beginTake(in sessionID: String, named name: String?, format: AudioFormat,
                          encoding: String, fileExtension: String, startDate: Date) throws -> PendingTake {
        let chosen = try name.map { try NameRules.validate($0, what: "take") }
        let id = UUID().uuidString.lowercased()
        guard let sessionRow = try catalog.read({ try Row.fetchOne($0, sql: "SELECT * FROM session WHERE id = ?", arguments: [sessionID]) }) else {
            throw TapedeckError(.notFound, "No session has the id \(sessionID). Run `tapedeck list` to see the sessions.")
        }
        let (session, folder) = try Catalog.session(from: sessionRow)
        let folderURL = try confined(folder)
        try files.makeDirectory(folderURL)
        let pending = "\(folder)/" + StoreNames.pendingFile(id: id, fileExtension: fileExtension)
        // Hold the take's lock before its row exists, so no other process ever sees it unlocked while live.
        let lockURL = try confined("\(folder)/" + StoreNames.lockFile(id: id))
        let lockFD = try LockFile.create(lockURL)
        do {
            // Blocks held back in the lock file, so finishing still works if the audio fills the disk.
            try SpaceReserve.claim(lockFD, path: folderURL.path)
            try files.reached("beginTake", "lock created")
            let take = try commit("beginTake") { db -> Take in
                let used = try String.fetchAll(db, sql: "SELECT name FROM take WHERE sessionId = ?", arguments: [sessionID])
                let number = (try Int.fetchOne(db, sql: "SELECT MAX(number) FROM take WHERE sessionId = ?", arguments: [sessionID]) ?? 0) + 1
                let finalName = try StoreNames.takeName(chosen, number: number, taken: used, session: session.name)
                let file = "\(folder)/" + StoreNames.takeFile(number: number, name: finalName, id: id, fileExtension: fileExtension)
                let take = Take(id: id, sessionID: sessionID, name: finalName, number: number, createdAt: startDate,
                                state: .recording, format: format, encoding: encoding, file: file, frames: 0)
                try db.execute(sql: """
                    INSERT INTO take (id, sessionId, name, number, createdAt, state, sampleRate, channels, sampleFormat,
                                      channelMask, encoding, file, pendingFile, frames, overruns, notes)
                    VALUES (?, ?, ?, ?, ?, 'recording', ?, ?, ?, ?, ?, ?, ?, 0, '[]', '')
                    """, arguments: [id, sessionID, finalName, number, startDate.timeIntervalSince1970, format.sampleRate,
                                     format.channels, format.sampleFormat.rawValue, Catalog.channelMask(format), encoding, file, pending])
                return take
            }
            liveLocks.withLock { $0[id] = lockFD }
            return PendingTake(take: take, session: session, fileURL: try confined(pending))
        } catch {
            close(lockFD)
            unlink(lockURL.path)
            throw error
        }
    }

    public func finishTake(_ pending: PendingTake, frames: Int64, state: TakeState, overruns: [OverrunEvent]) throws -> Take {
        // The space held back since beginTake is what the sync, the move and the commit may need.
        if let fd = liveLocks.withLock({ $0[pending.take.id] }) { SpaceReserve.release(fd) }
        let finalURL = try confined(pending.take.file)
        if FileManager.default.fileExists(atPath: pending.fileURL.path) {
            try files.syncFile(pending.fileURL)
            try files.reached("finishTake", "audio synced")
            try files.moveIntoPlace(pending.fileURL, finalURL)
            try files.reached("finishTake", "audio moved into place")
        } else if !FileManager.default.fileExists(atPath: finalURL.path) {
            throw TapedeckError(.notFound, "The audio of take \"\(pending.take.name)\" is missing (\(pending.fileURL.path)); the take was not marked finished. Run `tapedeck doctor`.")
        }
        let overrunsJSON = Catalog.encode(overruns)
        // The row as committed: annotations made while the take recorded (its run) included.
        let row = try commit("finishTake") { db in
            try db.execute(sql: "UPDATE take SET state = ?, frames = ?, overruns = ?, pendingFile = NULL WHERE id = ?",
                           arguments: [state.rawValue, frames, overrunsJSON, pending.take.id])
            return try Row.fetchOne(db, sql: "SELECT * FROM take WHERE id = ?", arguments: [pending.take.id])
        }
        releaseLock(takeID: pending.take.id, folderOf: pending.take.file)
        if let row, let take = try? Catalog.take(from: row) { return take }
        var take = pending.take
        take.state = state
        take.frames = frames
        take.overruns = overruns
        return take
    }

    public func renameTake(_ id: String, to name: String) throws -> Take {
        let name = try NameRules.validate(name, what: "take")
        return try commit("renameTake") { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT * FROM take WHERE id = ?", arguments: [id]) else {
                throw TapedeckError(.notFound, "No take has the id \(id). Run `tapedeck list` to see the takes.")
            }
            var take = try Catalog.take(from: row)
            if try String.fetchAll(db, sql: "SELECT name FROM take WHERE sessionId = ? AND id <> ?",
                                   arguments: [take.sessionID, id]).contains(name) {
                throw TapedeckError(.alreadyExists, "This session has a take named \"\(name)\" already. Choose another name.")
            }
            try db.execute(sql: "UPDATE take SET name = ? WHERE id = ?", arguments: [name, id])
            take.name = name
            return take
        }
    }

    public func annotateTake(_ id: String, _ annotations: TakeAnnotations) throws -> Take {
        try annotations.validate()
        return try commit("annotateTake") { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT * FROM take WHERE id = ?", arguments: [id]) else {
                throw TapedeckError(.notFound, "No take has the id \(id). Run `tapedeck list` to see the takes.")
            }
            var take = try Catalog.take(from: row)
            try db.execute(sql: """
                UPDATE take SET notes = ?, tags = ?, clippedSamples = ?, runId = ?, runIndex = ?, runOffset = ?, runBegan = ?, runEnded = ?,
                    markers = ?, loudnessIntegrated = ?, loudnessRange = ?, truePeak = ?, maxMomentary = ?, maxShortTerm = ?, began = ?
                WHERE id = ?
                """, arguments: StatementArguments([annotations.notes, Catalog.encode(annotations.tags), annotations.clippedSamples]
                                                   + Catalog.runColumns(annotations.run) + [Catalog.encode(annotations.markers)]
                                                   + Catalog.loudnessColumns(annotations.loudness)
                                                   + [annotations.began?.timeIntervalSince1970, id]))
            take.annotations = annotations
            return take
        }
    }

    public func deleteTake(_ id: String) throws {
        // Under the library lock, so `doctor` never sees the audio between the row's removal
        // and its own as a file no take names.
        try holdingLibraryLock { try deleteTakeLocked(id) }
    }

    func deleteTakeLocked(_ id: String) throws {
        let (take, pending) = try commit("deleteTake") { db -> (Take, String?) in
            guard let row = try Row.fetchOne(db, sql: "SELECT * FROM take WHERE id = ?", arguments: [id]) else {
                throw TapedeckError(.notFound, "No take has the id \(id). Run `tapedeck list` to see the takes.")
            }
            let take = try Catalog.take(from: row)
            guard take.state != .recording || !isLive(take) else {
                throw TapedeckError(.busy, "Take \"\(take.name)\" is being recorded. Stop that recording first, then delete it.")
            }
            let pending = String.fromDatabaseValue(row.checked("pendingFile"))
            _ = try confined(take.file)  // checked before the entry goes (see deleteSession)
            if let pending { _ = try confined(pending) }
            try db.execute(sql: "DELETE FROM take WHERE id = ?", arguments: [id])
            return (take, pending)
        }
        let url = try confined(take.file)
        try files.remove(url)
        for companion in TakeCompanions.urls(of: url) { try files.remove(companion) }
        if let pending { try files.remove(try confined(pending)) }
        try files.syncDirectory(url.deletingLastPathComponent())
        try files.reached("deleteTake", "audio removed")
        releaseLock(takeID: take.id, folderOf: take.file)
    }

    // MARK: recovery

    public func interruptedTakes() throws -> [InterruptedTake] {
        let rows = try catalog.read { try Row.fetchAll($0, sql: "SELECT * FROM take WHERE state = 'recording' ORDER BY createdAt") }
        var result: [InterruptedTake] = []
        for row in rows {
            // A damaged row is not recovered (doctor reports it); the others still are.
            guard let take = try? Catalog.take(from: row) else { continue }
            // Hold the take's lock from here until its recovery is committed, so neither the
            // recording process nor another recovering process can race this one.
            guard let lockFD = acquireLock(of: take) else { continue }
            let state = try catalog.read { try String.fetchOne($0, sql: "SELECT state FROM take WHERE id = ?", arguments: [take.id]) }
            guard state == TakeState.recording.rawValue else {
                close(lockFD)
                continue
            }
            let pending = String.fromDatabaseValue(row.checked("pendingFile"))
            let candidates = [pending, take.file].compactMap { $0 }
            // A take whose paths cannot be used is skipped (doctor reports it), never allowed to
            // stop the rest of the library from opening.
            guard let urls = try? candidates.map({ try confined($0) }) else {
                close(lockFD)
                continue
            }
            liveLocks.withLock { $0[take.id] = lockFD }
            result.append(InterruptedTake(take: take, fileURL: urls.first { FileManager.default.fileExists(atPath: $0.path) }))
        }
        return result
    }

    public func completeRecovery(of take: Take, repaired: RepairResult?) throws -> Take? {
        let finalURL = try confined(take.file)
        guard liveLocks.withLock({ $0[take.id] != nil }) else {
            throw TapedeckError(.busy, "Take \"\(take.name)\" was not claimed for recovery by this process. Open the library again.")
        }
        guard let repaired else {
            try commit("completeRecovery") { db in try db.execute(sql: "DELETE FROM take WHERE id = ? AND state = 'recording'", arguments: [take.id]) }
            // A take that never held audio: its companions (a chain begun) go with it.
            for companion in TakeCompanions.urls(of: finalURL) { try files.remove(companion) }
            releaseLock(takeID: take.id, folderOf: take.file)
            return nil
        }
        let pendingRow = try catalog.read { try String.fetchOne($0, sql: "SELECT pendingFile FROM take WHERE id = ?", arguments: [take.id]) }
        if let pendingRow, case let pendingURL = try confined(pendingRow), FileManager.default.fileExists(atPath: pendingURL.path) {
            try files.syncFile(pendingURL)
            try files.moveIntoPlace(pendingURL, finalURL)
            try files.reached("completeRecovery", "audio moved into place")
        }
        let changed = try commit("completeRecovery") { db -> Int in
            try db.execute(sql: """
                UPDATE take SET state = 'recovered', frames = ?, sampleRate = ?, channels = ?, sampleFormat = ?, channelMask = ?,
                                pendingFile = NULL
                WHERE id = ? AND state = 'recording'
                """, arguments: [repaired.frames, repaired.format.sampleRate, repaired.format.channels,
                                 repaired.format.sampleFormat.rawValue, Catalog.channelMask(repaired.format), take.id])
            return db.changesCount
        }
        guard changed == 1 else {
            releaseLock(takeID: take.id, folderOf: take.file)
            throw TapedeckError(.busy, "Take \"\(take.name)\" changed while it was being recovered; it was left as it is.")
        }
        releaseLock(takeID: take.id, folderOf: take.file)
        var t = take
        t.state = .recovered
        t.frames = repaired.frames
        t.format = repaired.format
        return t
    }

    // MARK: helpers

    /// Whether a live process (this one included) holds the take's lock.
    func isLive(_ take: Take) -> Bool {
        if liveLocks.withLock({ $0[take.id] != nil }) { return true }
        guard let fd = acquireLock(of: take) else { return true }
        close(fd)
        return false
    }

    /// Takes the lock of a take that no live process holds, creating the lock file if it is gone.
    /// - Returns: the locked descriptor, or `nil` when a live process holds the lock.
    func acquireLock(of take: Take) -> Int32? {
        let folder = take.file.split(separator: "/").dropLast().joined(separator: "/")
        guard let url = try? confined("\(folder)/" + StoreNames.lockFile(id: take.id)) else { return nil }
        return LockFile.claim(url)
    }

    func releaseLock(takeID: String, folderOf file: String) {
        let folder = file.lastIndex(of: "/").map { String(file[..<$0]) } ?? ""
        if let url = try? confined("\(folder)/" + StoreNames.lockFile(id: takeID)) { unlink(url.path) }
        if let fd = liveLocks.withLock({ $0.removeValue(forKey: takeID) }) { close(fd) }
    }

    /// Resolves a library-relative path, refusing anything that would leave the library:
    /// absolute paths, `..` components, or a symbolic link on the way.
    func confined(_ relative: String) throws -> URL {
        try LibraryPath.resolve(relative, under: rootURL, namedBy: "The catalog")
    }
}
