public import TapedeckCore
import Foundation
import GRDB
#if canImport(Glibc)
import Glibc
#endif

/// The keyed reads that keep commands fast in a library of any size: listing one session at a
/// time, and finding what a user's reference names without reading every take.
extension DirectoryStorage {
    /// One read transaction; each session's takes come from the `take_session` index, so memory
    /// holds one session's takes at a time.
    public func forEachSession(_ body: (Session) throws -> Void) throws {
        var failure: (any Error)?
        try catalog.read { db in
            for row in try Row.fetchAll(db, sql: "SELECT * FROM session ORDER BY createdAt, rowid") {
                // A damaged row is left out (`doctor` lists it), as in sessions().
                guard var session = try? Catalog.session(from: row).0 else { continue }
                session.takes = try Self.takes(db, sessionID: session.id)
                do { try body(session) } catch {
                    failure = error  // the caller's error, not the catalog's
                    return
                }
            }
        }
        if let failure { throw failure }
    }

    /// Id prefixes through the primary-key indexes, session names among the sessions only, and
    /// `last` through the `take_created` index; then those sessions with their takes.
    public func sessions(matching text: String) throws -> [Session] {
        try catalog.read { db in
            var ids: [String] = []
            func add(_ rows: [Row], _ column: String) {
                for row in rows {
                    if let id = String.fromDatabaseValue(row.checked(column)), !ids.contains(id) { ids.append(id) }
                }
            }
            let keys = ReferenceKeys(text)
            if let prefix = keys.idPrefix {
                // Ids are lowercase hex and dashes, all below "~": [prefix, prefix~) is every id
                // that starts with it.
                let range: StatementArguments = [prefix, prefix + "~"]
                add(try Row.fetchAll(db, sql: "SELECT id FROM session WHERE id >= ? AND id < ?", arguments: range), "id")
                add(try Row.fetchAll(db, sql: "SELECT sessionId FROM take WHERE id >= ? AND id < ?", arguments: range), "sessionId")
            }
            // Compared as Swift compares names (canonically equivalent spellings are one name),
            // among the sessions only.
            add(try Row.fetchAll(db, sql: "SELECT id, name FROM session ORDER BY createdAt, rowid").filter {
                String.fromDatabaseValue($0.checked("name")).map(keys.sessionNames.contains) ?? false
            }, "id")
            if keys.isLast {
                // The newest takes' sessions (a few, in case the newest row is damaged).
                add(try Row.fetchAll(db, sql: "SELECT sessionId FROM take ORDER BY createdAt DESC LIMIT 8"), "sessionId")
            }
            guard !ids.isEmpty else { return [] }
            let marks = Array(repeating: "?", count: ids.count).joined(separator: ", ")
            return try Row.fetchAll(db, sql: "SELECT * FROM session WHERE id IN (\(marks)) ORDER BY createdAt, rowid",
                                    arguments: StatementArguments(ids)).compactMap { row -> Session? in
                guard var session = try? Catalog.session(from: row).0 else { return nil }
                session.takes = try Self.takes(db, sessionID: session.id)
                return session
            }
        }
    }

    /// Each take folder is confined once (no link on the way) and opened; each file in it is
    /// then looked at with `fstatat` without following a link: one system call per take.
    public func audioFiles(of session: Session) -> [String: AudioFileInfo] {
        var found: [String: AudioFileInfo] = [:]
        var folders: [String: Int32] = [:]
        defer { for fd in folders.values where fd >= 0 { close(fd) } }
        for take in session.takes {
            // folder/name split on bytes (NSString's path methods cost more than the stat).
            let slash = take.file.utf8.lastIndex(of: UInt8(ascii: "/"))
            let folder = slash.map { String(take.file[..<$0]) } ?? ""
            let name = slash.map { String(take.file[take.file.index(after: $0)...]) } ?? take.file
            guard !folder.isEmpty, LibraryPath.isPlainName(name) else {
                found[take.id] = (try? confined(take.file)).map { AudioFileInfo(path: $0.path, bytes: nil) } ?? AudioFileInfo(path: nil, bytes: nil)
                continue
            }
            if folders[folder] == nil {
                folders[folder] = (try? confined(folder)).map { open($0.path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) } ?? -1
            }
            guard let fd = folders[folder], fd >= 0 else {
                found[take.id] = AudioFileInfo(path: nil, bytes: nil)
                continue
            }
            var st = stat()
            if fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 {
                found[take.id] = AudioFileInfo(path: rootURL.path + "/" + take.file, bytes: nil)  // missing
            } else if (st.st_mode & S_IFMT) == S_IFLNK {
                found[take.id] = AudioFileInfo(path: nil, bytes: nil)  // a link: never followed
            } else {
                found[take.id] = AudioFileInfo(path: rootURL.path + "/" + take.file, bytes: Int64(st.st_size))
            }
        }
        return found
    }

    /// SQL statements the catalog has run since this store opened (for tests that hold keyed
    /// reads to a bound). - Thread: any; never blocks.
    package var catalogStatements: Int { catalog.statements.value }

    /// A session's takes in recording order, damaged rows left out.
    /// Rows are read through a cursor (no copy of each row) with the statement's column
    /// positions found once.
    static func takes(_ db: Database, sessionID: String) throws -> [Take] {
        let statement = try db.cachedStatement(sql: "SELECT * FROM take WHERE sessionId = ? ORDER BY number, createdAt")
        let positions = Catalog.ColumnPositions(statement.columnNames)
        let rows = try Row.fetchCursor(statement, arguments: [sessionID])
        var takes: [Take] = []
        while let row = try rows.next() {
            if let take = try? Catalog.take(from: row, positions: positions) { takes.append(take) }
        }
        return takes
    }
}
