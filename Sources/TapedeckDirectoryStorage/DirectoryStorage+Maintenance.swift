import Foundation
public import TapedeckCore
import GRDB
#if canImport(Glibc)
import Glibc
#endif

/// What `tapedeck doctor` asks of a directory library: files no row names, a damaged catalog,
/// and the repairs that never delete audio.
extension DirectoryStorage {
    // MARK: maintenance (tapedeck doctor)

    public func unreferencedFiles() throws -> [String] {
        // The folders are listed before the catalog is read: a take's row is committed before
        // its file is created, so any take's file seen on disk is named by the catalog read
        // afterwards, however recordings, imports and deletes run meanwhile.
        var candidates: [String] = []
        let sessions = rootURL.appendingPathComponent("sessions")
        let onDisk = (try? FileManager.default.contentsOfDirectory(atPath: sessions.path)) ?? []
        var foreign: [String] = []
        for folder in onDisk.sorted() {
            let relativeFolder = "sessions/" + folder
            var st = stat()
            guard lstat(sessions.appendingPathComponent(folder).path, &st) == 0 else { continue }
            guard (st.st_mode & S_IFMT) == S_IFDIR else {
                foreign.append(relativeFolder)
                continue
            }
            let entries = (try? FileManager.default.contentsOfDirectory(atPath: sessions.appendingPathComponent(folder).path)) ?? []
            for entry in entries.sorted() where !(entry.hasPrefix(".") && entry.hasSuffix(".lock")) {
                candidates.append(relativeFolder + "/" + entry)
            }
        }
        let unnamed = try unreferenced(candidates)
        guard !unnamed.isEmpty else { return foreign }
        // A delete may be between its row and its audio: look again once no delete runs.
        return try foreign + holdingLibraryLock { try unreferenced(unnamed) }
    }

    /// Those of `candidates` (library-relative paths listed before this call) that still exist
    /// and that no row names, less pending files of recordings that began meanwhile.
    func unreferenced(_ candidates: [String]) throws -> [String] {
        let referenced = try catalog.read { db -> Set<String> in
            var names = Set<String>()
            for row in try Row.fetchAll(db, sql: "SELECT file, pendingFile, state FROM take") {
                if let file = String.fromDatabaseValue(row.checked("file")) { names.insert(file) }
                if let pending = String.fromDatabaseValue(row.checked("pendingFile")),
                   String.fromDatabaseValue(row.checked("state")) == TakeState.recording.rawValue { names.insert(pending) }
            }
            return names
        }
        var found: [String] = []
        // A take's companion (its chain) is the take's as its audio is.
        for relative in candidates where !referenced.contains(relative) && !(TakeCompanions.audioName(of: relative).map(referenced.contains) ?? false) {
            // Gone since the listing: a pending file moved into place as its take finished, or
            // the audio of a take deleted meanwhile.
            var st = stat()
            guard lstat(rootURL.appendingPathComponent(relative).path, &st) == 0 else { continue }
            // A recording that began after the catalog was read: its lock is held.
            let entry = (relative as NSString).lastPathComponent
            let relativeFolder = (relative as NSString).deletingLastPathComponent
            if entry.hasPrefix("."), entry.contains(".pending."),
               let id = entry.dropFirst().split(separator: ".").first.map(String.init),
               liveLocks.withLock({ $0[id] != nil }) || isLockHeld(relativeFolder + "/" + StoreNames.lockFile(id: id)) {
                continue
            }
            found.append(relative)
        }
        return found
    }

    public func damagedParts() throws -> [DamagedPart] {
        let result: [String]
        do {
            result = try catalog.read { try String.fetchAll($0, sql: "PRAGMA integrity_check") }
        } catch let error as TapedeckError where error.code == .corruptFile {
            // Nothing else in the catalog can be read: only a rebuild helps.
            return [DamagedPart(path: Self.catalogName, problem: error.message, canQuarantine: false, needsRebuild: true)]
        }
        var parts = result == ["ok"] ? [] : [DamagedPart(path: Self.catalogName, problem: "SQLite's integrity check reports: \(result.prefix(3).joined(separator: "; "))",
                                                        canQuarantine: false, needsRebuild: true)]
        // Rows whose values cannot be a session or take (a wrong type, a rate of 0, an unknown
        // state): left out of every listing, reported here.
        let rows = try catalog.read { db in
            (try Row.fetchAll(db, sql: "SELECT * FROM session"), try Row.fetchAll(db, sql: "SELECT * FROM take"))
        }
        for row in rows.0 {
            do { _ = try Catalog.session(from: row) } catch let e as TapedeckError {
                parts.append(DamagedPart(path: Self.catalogName, problem: e.message, canQuarantine: false, needsRebuild: true))
            }
        }
        for row in rows.1 {
            do { _ = try Catalog.take(from: row) } catch let e as TapedeckError {
                parts.append(DamagedPart(path: Self.catalogName, problem: e.message, canQuarantine: false, needsRebuild: true))
            }
        }
        return parts
    }

    public func quarantine(_ relativePath: String) throws -> String {
        _ = try confined(relativePath)
        return try files.quarantine(relativePath, in: rootURL)
    }

    public func forgetTake(_ id: String) throws {
        try commit("forgetTake") { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT * FROM take WHERE id = ?", arguments: [id]) else {
                throw TapedeckError(.notFound, "No take has the id \(id). Run `tapedeck list` to see the takes.")
            }
            let take = try Catalog.take(from: row)
            guard take.state != .recording else {
                throw TapedeckError(.busy, "Take \"\(take.name)\" is being recorded or waits for recovery; it cannot be forgotten.")
            }
            var st = stat()
            if lstat(try confined(take.file).path, &st) == 0 || errno != ENOENT {
                throw TapedeckError(.alreadyExists, "Take \"\(take.name)\" has its audio; only an entry without audio can be forgotten.")
            }
            try db.execute(sql: "DELETE FROM take WHERE id = ?", arguments: [id])
        }
    }

    public func markRepaired(_ id: String, frames: Int64) throws {
        try commit("markRepaired") { db in
            try db.execute(sql: "UPDATE take SET frames = ?, state = 'recovered' WHERE id = ? AND state <> 'recording'", arguments: [frames, id])
            guard db.changesCount == 1 else {
                throw TapedeckError(.notFound, "No finished take has the id \(id). Run `tapedeck list` to see the takes.")
            }
        }
    }

    /// Whether a live process holds the lock file at `relative` (a missing file is not held).
    public func leftovers() throws -> [String] {
        let sessionsURL = rootURL.appendingPathComponent("sessions")
        let minute = Date().addingTimeInterval(-60).timeIntervalSince1970
        func old(_ st: stat) -> Bool { TimeInterval(st.st_mtim.tv_sec) < minute }
        let (recording, folders) = try catalog.read { db -> (Set<String>, Set<String>) in
            let ids = Set(try Row.fetchAll(db, sql: "SELECT id FROM take WHERE state = 'recording'").compactMap { String.fromDatabaseValue($0.checked("id")) })
            let named = Set(try Row.fetchAll(db, sql: "SELECT folder FROM session").compactMap { String.fromDatabaseValue($0.checked("folder")) })
            return (ids, named)
        }
        var found: [String] = []
        for folder in ((try? FileManager.default.contentsOfDirectory(atPath: sessionsURL.path)) ?? []).sorted() {
            let relativeFolder = "sessions/" + folder
            var st = stat()
            guard lstat(sessionsURL.appendingPathComponent(folder).path, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR else { continue }
            let entries = (try? FileManager.default.contentsOfDirectory(atPath: sessionsURL.appendingPathComponent(folder).path)) ?? []
            if entries.isEmpty {
                if !folders.contains(relativeFolder) && old(st) { found.append(relativeFolder) }
                continue
            }
            for entry in entries.sorted() where entry.hasPrefix(".") && entry.hasSuffix(".lock") {
                let id = String(entry.dropFirst().dropLast(5))
                let relative = relativeFolder + "/" + entry
                var lst = stat()
                guard !recording.contains(id), lstat(sessionsURL.appendingPathComponent(folder + "/" + entry).path, &lst) == 0,
                      (lst.st_mode & S_IFMT) == S_IFREG, old(lst), !isLockHeld(relative) else { continue }
                found.append(relative)
            }
        }
        return found
    }

    public func removeLeftover(_ relativePath: String) throws {
        let url = try confined(relativePath)
        if relativePath.hasSuffix(".lock") {
            // Taken for a moment, so no recorder can be starting on it while it goes.
            let fd = open(url.path, O_RDWR | O_CLOEXEC | O_NOFOLLOW)
            guard fd >= 0 else { return }
            defer { close(fd) }
            guard flock(fd, LOCK_EX | LOCK_NB) == 0 else { return }
            try files.remove(url)
        } else {
            try files.removeEmptyDirectory(url)
        }
    }

    func isLockHeld(_ relative: String) -> Bool {
        guard let url = try? confined(relative) else { return false }
        return LockFile.isHeld(url)
    }
}
