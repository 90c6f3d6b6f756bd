public import Foundation
public import TapedeckCore
import GRDB
#if canImport(Glibc)
import Glibc
#endif

/// `tapedeck doctor --rebuild-catalog`: a new catalog from what can still be read.
///
/// 1. Salvage: the old catalog (with its write-ahead log) is copied aside and opened there, and
///    its rows are read one stretch at a time, stepping over rows SQLite cannot read and
///    dropping rows whose values are impossible (``Catalog/take(from:)`` checks every column).
/// 2. Files: every session folder and audio file no salvaged entry names gets one: a session
///    named after its folder, a take after its file (number, name and id prefix from
///    `NNN-name-ID.ext`), with the format and length a decoder reads. A pending file of a
///    recording whose entry was lost becomes a `recording` entry, which the next open recovers.
/// 3. Swap: the new catalog is written beside the old one (rollback journal, one file), synced,
///    the old files are copied into `quarantine/<time>/`, the old write-ahead files removed (so
///    they can never be applied to the new catalog), and the new file renamed over the old.
///    A crash at any point leaves either catalog whole; the rebuild can be run again.
extension DirectoryStorage {
    public var rebuildsCatalog: Bool { true }

    public func rebuildCatalog(inspect: (URL) -> RebuiltAudio?) throws -> CatalogRebuild {
        try holdingLibraryLock {
            try refuseWhileRecording()
            var report = CatalogRebuild()
            let salvaged = salvage(&report)
            var builder = RebuildPlan(salvaged: salvaged)
            try addFiles(to: &builder, inspect: inspect, report: &report)
            let temp = rootURL.appendingPathComponent(".catalog-rebuild-\(getpid()).sqlite")
            unlink(temp.path)
            do {
                try write(builder, to: temp)
                report.backup = try swapIn(temp)
            } catch {
                unlink(temp.path)
                unlink(temp.path + "-journal")
                throw error
            }
            return report
        }
    }

    /// Refuses while any take of the library is being recorded (its lock is held): its entry
    /// would be committed to the old catalog.
    private func refuseWhileRecording() throws {
        let sessions = rootURL.appendingPathComponent("sessions")
        for folder in (try? FileManager.default.contentsOfDirectory(atPath: sessions.path)) ?? [] {
            let entries = (try? FileManager.default.contentsOfDirectory(atPath: sessions.appendingPathComponent(folder).path)) ?? []
            for entry in entries where entry.hasPrefix(".") && entry.hasSuffix(".lock") && isLockHeld("sessions/\(folder)/\(entry)") {
                throw TapedeckError(.busy, "A take in sessions/\(folder) is being recorded. Rebuild the catalog once the recording has finished.")
            }
        }
    }

    // MARK: salvage

    struct SalvagedRows {
        var sessions: [(Session, folder: String)] = []
        var takes: [(Take, pendingFile: String?)] = []
    }

    /// The rows of the old catalog that read, from a copy (the original is not opened again).
    private func salvage(_ report: inout CatalogRebuild) -> SalvagedRows {
        var rows = SalvagedRows()
        guard FileManager.default.fileExists(atPath: catalogURL.path) else { return rows }
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-salvage-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: scratch) }
        do {
            try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
            let copy = scratch.appendingPathComponent("catalog.sqlite")
            try FileManager.default.copyItem(at: catalogURL, to: copy)
            if FileManager.default.fileExists(atPath: catalogURL.path + "-wal") {
                try FileManager.default.copyItem(atPath: catalogURL.path + "-wal", toPath: copy.path + "-wal")
            }
            let queue = try DatabaseQueue(path: copy.path)
            defer { try? queue.close() }
            // A damaged index can show a row twice: the first of each id is kept.
            var ids = Set<String>()
            for row in Self.readRows(queue, table: "session", unreadable: &report.unreadableEntries) {
                if let session = try? Catalog.session(from: row), ids.insert(session.0.id).inserted {
                    rows.sessions.append(session)
                } else {
                    report.unreadableEntries += 1
                }
            }
            var files = Set<String>()
            for row in Self.readRows(queue, table: "take", unreadable: &report.unreadableEntries) {
                if let take = try? Catalog.take(from: row), ids.insert(take.id).inserted, files.insert(take.file).inserted {
                    rows.takes.append((take, String.fromDatabaseValue(row.checked("pendingFile"))))
                } else {
                    report.unreadableEntries += 1
                }
            }
        } catch {
            // Nothing of the old catalog reads: every entry comes from the files.
            report.unreadableEntries += 1
        }
        report.salvagedSessions = rows.sessions.count
        report.salvagedTakes = rows.takes.count
        return rows
    }

    /// The rows of `table` that SQLite can read, in rowid order: after a read error the scan
    /// resumes past the rowid it reached, a little further each time, up to 10 000 errors.
    private static func readRows(_ queue: DatabaseQueue, table: String, unreadable: inout Int) -> [Row] {
        var rows: [Row] = []
        var after: Int64 = Int64.min
        var errors = 0
        while errors < 10_000 {
            do {
                try queue.read { db in
                    let cursor = try Row.fetchCursor(db, sql: "SELECT rowid AS rebuildRowID, * FROM \(table) WHERE rowid > ? ORDER BY rowid", arguments: [after])
                    while let row = try cursor.next() {
                        rows.append(row.copy())
                        after = Int64.fromDatabaseValue(row.checked("rebuildRowID")) ?? after
                    }
                }
                return rows
            } catch {
                errors += 1
                unreadable += 1
                if after == Int64.min { return rows }  // the table itself cannot be read
                after += Int64(errors)
            }
        }
        return rows
    }

    // MARK: files

    /// The entries of the new catalog, keyed by library-relative paths.
    struct RebuildPlan {
        var sessions: [(Session, folder: String)]
        var takes: [(Take, pendingFile: String?)]

        init(salvaged: SalvagedRows) {
            sessions = salvaged.sessions
            // A take whose session did not survive gets one made from its folder (below).
            takes = salvaged.takes
        }

        var namedFiles: Set<String> {
            Set(takes.flatMap { [$0.0.file] + ($0.pendingFile.map { [$0] } ?? []) })
        }
    }

    private func addFiles(to plan: inout RebuildPlan, inspect: (URL) -> RebuiltAudio?, report: inout CatalogRebuild) throws {
        let sessionsURL = rootURL.appendingPathComponent("sessions")
        var named = plan.namedFiles
        var usedIDs = Set(plan.takes.map(\.0.id) + plan.sessions.map(\.0.id))
        let folders = ((try? FileManager.default.contentsOfDirectory(atPath: sessionsURL.path)) ?? []).sorted()
        for folderName in folders {
            let folder = "sessions/" + folderName
            var st = stat()
            // Links and anything but a folder are not followed (doctor reports them).
            guard lstat(sessionsURL.appendingPathComponent(folderName).path, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR else { continue }
            let sessionID: String
            if let existing = plan.sessions.first(where: { $0.folder == folder }) {
                sessionID = existing.0.id
            } else if let orphan = plan.takes.first(where: { ($0.0.file as NSString).deletingLastPathComponent == folder }) {
                // Takes of this folder survived but their session's row did not: theirs is made below.
                sessionID = orphan.0.sessionID
            } else {
                let (name, prefix) = Self.parseFolder(folderName)
                let id = Self.newID(prefix: prefix, used: &usedIDs)
                let taken = plan.sessions.map(\.0.name)
                let finalName = try (try? StoreNames.sessionName(name, taken: taken)) ?? StoreNames.sessionName(nil, taken: taken)
                let created = Date(timeIntervalSince1970: TimeInterval(st.st_mtim.tv_sec))
                plan.sessions.append((Session(id: id, name: finalName, createdAt: created), folder))
                sessionID = id
                report.rebuiltSessions += 1
            }
            let folderURL = sessionsURL.appendingPathComponent(folderName)
            let entries = ((try? FileManager.default.contentsOfDirectory(atPath: folderURL.path)) ?? []).sorted()
            for entry in entries where !(entry.hasPrefix(".") && entry.hasSuffix(".lock")) {
                let relative = folder + "/" + entry
                guard !named.contains(relative) else { continue }
                // A take's companion (its chain) is not audio: it stays beside the take it names.
                if let audioName = TakeCompanions.audioName(of: entry), entries.contains(audioName) { continue }
                var fst = stat()
                guard lstat(folderURL.appendingPathComponent(entry).path, &fst) == 0, (fst.st_mode & S_IFMT) == S_IFREG else { continue }
                guard let audio = inspect(folderURL.appendingPathComponent(entry)) else {
                    report.unreadableFiles.append(relative)
                    continue
                }
                let siblings = plan.takes.filter { $0.0.sessionID == sessionID }.map(\.0)
                let take: Take
                var pending: String?
                if let id = Self.pendingID(entry) {
                    // A recording whose entry was lost: recovered as any interrupted take.
                    let number = (siblings.map(\.number).max() ?? 0) + 1
                    let name = try StoreNames.takeName(nil, number: number, taken: siblings.map(\.name), session: "")
                    let ext = (entry as NSString).pathExtension
                    take = Take(id: id, sessionID: sessionID, name: name, number: number,
                                createdAt: Date(timeIntervalSince1970: TimeInterval(fst.st_mtim.tv_sec)), state: .recording,
                                format: audio.format, encoding: audio.encoding,
                                file: folder + "/" + StoreNames.takeFile(number: number, name: name, id: id, fileExtension: ext),
                                frames: 0)
                    pending = relative
                    usedIDs.insert(id)
                } else {
                    let parsed = Self.parseTakeFile(entry)
                    let numbers = Set(siblings.map(\.number))
                    var number = parsed.number ?? ((siblings.map(\.number).max() ?? 0) + 1)
                    while numbers.contains(number) { number += 1 }
                    let taken = siblings.map(\.name)
                    let name = try (try? StoreNames.takeName(parsed.name, number: number, taken: taken, session: ""))
                        ?? StoreNames.takeName(nil, number: number, taken: taken, session: "")
                    let seconds = audio.format.seconds(forFrames: audio.frames)
                    take = Take(id: Self.newID(prefix: parsed.idPrefix, used: &usedIDs), sessionID: sessionID, name: name, number: number,
                                createdAt: Date(timeIntervalSince1970: TimeInterval(fst.st_mtim.tv_sec) - seconds), state: .complete,
                                format: audio.format, encoding: audio.encoding, file: relative, frames: audio.frames)
                }
                plan.takes.append((take, pending))
                named.insert(relative)
                report.rebuiltTakes += 1
            }
        }
        // Salvaged takes whose session row was lost and whose folder is gone too keep a session.
        let known = Set(plan.sessions.map(\.0.id))
        for (take, _) in plan.takes where !known.contains(take.sessionID) && !plan.sessions.contains(where: { $0.0.id == take.sessionID }) {
            let folder = (take.file as NSString).deletingLastPathComponent
            let name = try (try? StoreNames.sessionName(Self.parseFolder((folder as NSString).lastPathComponent).name, taken: plan.sessions.map(\.0.name)))
                ?? StoreNames.sessionName(nil, taken: plan.sessions.map(\.0.name))
            plan.sessions.append((Session(id: take.sessionID, name: name, createdAt: take.createdAt), folder))
            report.rebuiltSessions += 1
        }
    }

    /// A folder `gig-night-1f2e3d4c`: the name `gig night` and the id prefix `1f2e3d4c`.
    static func parseFolder(_ name: String) -> (name: String?, prefix: String?) {
        let parts = name.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count >= 2, let last = parts.last, isIDPrefix(last) else {
            return (name.replacingOccurrences(of: "-", with: " "), nil)
        }
        let words = parts.dropLast().joined(separator: " ")
        return (words.isEmpty ? nil : words, String(last))
    }

    /// A take file `003-opener-take-1f2e3d4c.flac`: number 3, name `opener take`, prefix `1f2e3d4c`;
    /// any other name: its stem as the name.
    static func parseTakeFile(_ file: String) -> (number: Int?, name: String?, idPrefix: String?) {
        let stem = (file as NSString).deletingPathExtension
        var parts = stem.split(separator: "-", omittingEmptySubsequences: false).map(String.init)
        guard parts.count >= 3, let number = Int(parts[0]), number > 0, isIDPrefix(Substring(parts[parts.count - 1])) else {
            return (nil, stem.isEmpty ? nil : stem, nil)
        }
        let prefix = parts.removeLast()
        parts.removeFirst()
        let name = parts.joined(separator: " ")
        return (number, name.isEmpty ? nil : name, prefix)
    }

    /// The id in a pending file's name `.ID.pending.EXT`, if it is one.
    static func pendingID(_ file: String) -> String? {
        guard file.hasPrefix("."), file.contains(".pending.") else { return nil }
        let id = String(file.dropFirst().prefix { $0 != "." })
        return UUID(uuidString: id) != nil ? id.lowercased() : nil
    }

    static func isIDPrefix(_ text: Substring) -> Bool {
        text.count == 8 && text.allSatisfy { $0.isHexDigit && !$0.isUppercase }
    }

    /// A new id, starting with `prefix` when one is given and free (so the short id shown and the
    /// one in the file name agree).
    static func newID(prefix: String?, used: inout Set<String>) -> String {
        while true {
            let fresh = UUID().uuidString.lowercased()
            let id = prefix.map { $0 + fresh.dropFirst(8) } ?? fresh
            if used.insert(id).inserted { return id }
        }
    }

    // MARK: writing and swapping

    /// Writes the plan into a new catalog file at `url` (rollback journal: one file to move).
    private func write(_ plan: RebuildPlan, to url: URL) throws {
        let queue = try DatabaseQueue(path: url.path)
        do {
            try Catalog.migrator.migrate(queue)
            try queue.write { db in
                try db.execute(sql: "PRAGMA journal_mode = DELETE")
                for (s, folder) in plan.sessions {
                    try db.execute(sql: "INSERT INTO session (id, name, createdAt, folder) VALUES (?, ?, ?, ?)",
                                   arguments: [s.id, s.name, s.createdAt.timeIntervalSince1970, folder])
                }
                for (t, pending) in plan.takes {
                    try db.execute(sql: """
                        INSERT INTO take (id, sessionId, name, number, createdAt, state, sampleRate, channels, sampleFormat,
                                          channelMask, encoding, file, pendingFile, frames, overruns, notes, tags, clippedSamples,
                                          runId, runIndex, runOffset, runBegan, runEnded, markers,
                                          loudnessIntegrated, loudnessRange, truePeak, maxMomentary, maxShortTerm, began)
                        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                        """, arguments: StatementArguments([t.id, t.sessionID, t.name, t.number, t.createdAt.timeIntervalSince1970, t.state.rawValue,
                                         t.format.sampleRate, t.format.channels, t.format.sampleFormat.rawValue,
                                         Catalog.channelMask(t.format), t.encoding, t.file, pending, t.frames,
                                         Catalog.encode(t.overruns), t.notes, Catalog.encode(t.tags), t.clippedSamples]
                                         + Catalog.runColumns(t.run) + [Catalog.encode(t.markers)] + Catalog.loudnessColumns(t.loudness)
                                         + [t.began?.timeIntervalSince1970]))
                }
            }
            try queue.close()
        } catch let error as DatabaseError {
            try? queue.close()
            throw Catalog.translate(error, url: url)
        }
        try files.syncFile(url)
    }

    /// Keeps copies of the old catalog files in quarantine, removes the old write-ahead files and
    /// renames `temp` over the catalog. - Returns: the quarantine folder, if there was a catalog.
    private func swapIn(_ temp: URL) throws -> String? {
        let old = [Self.catalogName, Self.catalogName + "-wal", Self.catalogName + "-shm"]
            .filter { FileManager.default.fileExists(atPath: rootURL.appendingPathComponent($0).path) }
        var backup: String?
        if !old.isEmpty {
            // A folder of its own, even for two rebuilds in one second.
            var stamp = "quarantine/" + UTCTimestamp.compact(Date()) + "-catalog"
            var st = stat()
            var n = 1
            while lstat(rootURL.appendingPathComponent(stamp).path, &st) == 0 {
                n += 1
                stamp = "quarantine/" + UTCTimestamp.compact(Date()) + "-catalog-\(n)"
            }
            try files.makeConfinedFolders(stamp.split(separator: "/").map(String.init), in: rootURL)
            for name in old {
                let copy = rootURL.appendingPathComponent(stamp + "/" + name)
                do {
                    try FileManager.default.copyItem(at: rootURL.appendingPathComponent(name), to: copy)
                } catch {
                    throw TapedeckError(.io, "Could not keep a copy of the old catalog file \(name) in \(stamp): \(error.localizedDescription). Nothing was changed.")
                }
                try files.syncFile(copy)
            }
            try files.syncDirectory(rootURL.appendingPathComponent(stamp))
            backup = stamp
        }
        // The old log must never be applied to the new catalog: gone before the rename.
        try files.remove(rootURL.appendingPathComponent(Self.catalogName + "-wal"))
        try files.remove(rootURL.appendingPathComponent(Self.catalogName + "-shm"))
        try files.replace(catalogURL, with: temp)
        try files.syncDirectory(rootURL)
        return backup
    }
}
