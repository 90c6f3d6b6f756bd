import Foundation
import GRDB
import GRDBSQLite
import Synchronization
import TapedeckCore

/// How many SQL statements a catalog connection has run: the tests hold keyed reads to a bound
/// whatever the library's size (a counter, not a timer).
final class StatementCounter: Sendable {
    private let count = Mutex(0)
    var value: Int { count.withLock { $0 } }
    func add() { count.withLock { $0 += 1 } }
}

/// The SQLite catalog (`catalog.sqlite`) of a directory library: WAL journal synced at every
/// commit (`synchronous = FULL`, so a commit that returned survives power loss), a busy timeout so
/// concurrent `tapedeck` processes wait instead of failing, and every write in an immediate
/// transaction.
struct Catalog: Sendable {
    /// The open catalog, or why a damaged one could not be opened: then every read and write
    /// throws that damage (with the advice to rebuild), while the library's folders can still be
    /// examined and the catalog rebuilt (`tapedeck doctor --rebuild-catalog`).
    private let opened: Result<DatabaseQueue, TapedeckError>

    /// The catalog's connection. - Throws: the damage found when it was opened.
    var queue: DatabaseQueue {
        get throws { try opened.get() }
    }

    /// The damage that kept the catalog from opening, if any.
    var damage: TapedeckError? {
        if case .failure(let error) = opened { return error }
        return nil
    }

    /// Statements run on this catalog's connection.
    let statements = StatementCounter()

    /// Whether this process may only read the catalog (a read-only mount, another user's library):
    /// it is then opened read-only, without migrating, and every write says why it fails.
    let readOnly: Bool

    /// The folder holding the catalog: a failure there on a full disk is called a full disk.
    private let folder: URL

    init(url: URL, busyTimeout: TimeInterval) throws {
        folder = url.deletingLastPathComponent()
        readOnly = FileManager.default.fileExists(atPath: url.path)
            && (access(url.path, W_OK) != 0 || access(url.deletingLastPathComponent().path, W_OK) != 0)
        if readOnly {
            opened = Self.openReadOnly(url: url, busyTimeout: busyTimeout)
            return
        }
        do {
            opened = try Self.openWritable(url: url, busyTimeout: busyTimeout, statements: statements, heapIndex: false)
        } catch let error as DatabaseError {
            // The WAL index (-shm) could not be made: another SQLite client that closed the
            // catalog last removed it, or the library was copied without it, and the disk is
            // full. The catalog is opened again with the index in this process's memory (see
            // ``openWritable(url:busyTimeout:statements:heapIndex:)``), so that list, show,
            // doctor and delete still work and room can be made.
            guard Self.mayNeedHeapIndex(error), FileManager.default.fileExists(atPath: url.path),
                  let fallback = try? Self.openWritable(url: url, busyTimeout: busyTimeout, statements: statements, heapIndex: true) else {
                throw Self.translate(error, url: url, folder: folder)
            }
            opened = fallback
        }
    }

    /// Opens the catalog for reading and writing: WAL journal kept when the last connection
    /// closes, `synchronous = FULL`, migrated to this version's schema.
    ///
    /// With `heapIndex`, in exclusive locking mode set before the first read: SQLite then keeps
    /// the WAL index in this process's memory and needs no `-shm` file ("Use of WAL Without
    /// Shared-Memory", sqlite.org/wal.html), and the journal mode is not set again (the
    /// catalog's header keeps it, and setting it writes). The connection holds the catalog
    /// alone until it closes: another tapedeck process waits for it up to the busy timeout, as
    /// for any write. Only a short-lived process that found the disk full opens it so.
    /// - Returns: the open queue, or the damage found in the catalog.
    /// - Throws: SQLite's own error (`DatabaseError`) when it could not open the catalog, for
    ///   the caller to translate or to try again; a ``TapedeckError`` otherwise.
    /// - Thread: any. Blocks on disk I/O and on another process holding the catalog.
    private static func openWritable(url: URL, busyTimeout: TimeInterval, statements: StatementCounter,
                                     heapIndex: Bool) throws -> Result<DatabaseQueue, TapedeckError> {
        var config = Configuration()
        config.journalMode = heapIndex ? .default : .wal
        config.busyMode = .timeout(busyTimeout)
        config.foreignKeysEnabled = true
        config.label = "tapedeck.catalog"
        // The write-ahead log and its index (-wal, -shm) stay when the last connection closes,
        // at the size they grew to: opening, reading and small commits (a delete that makes
        // room) then need no new disk blocks, so a disk another program filled still lets the
        // library be listed and cleaned up.
        config.prepareDatabase { db in
            var persist: Int32 = 1
            _ = sqlite3_file_control(db.sqliteConnection, "main", SQLITE_FCNTL_PERSIST_WAL, &persist)
            if heapIndex { try db.execute(sql: "PRAGMA locking_mode = EXCLUSIVE") }
            db.trace(options: .statement) { _ in statements.add() }
        }
        do {
            let queue = try DatabaseQueue(path: url.path, configuration: config)
            // GRDB sets `synchronous = NORMAL` with WAL, which syncs the WAL only at checkpoints:
            // a power loss could then undo commits that had returned, a finished take's entry
            // among them (scripts/reliability-powerloss found it). FULL syncs the WAL at every commit.
            try queue.writeWithoutTransaction { try $0.execute(sql: "PRAGMA synchronous = FULL") }
            // A catalog a newer Tapedeck wrote is not used, or written, blindly.
            if try queue.read({ try Self.migrator.hasBeenSuperseded($0) }) {
                throw TapedeckError(.configuration,
                    "The library catalog \(url.path) was written by a newer version of Tapedeck. Use that version, or keep this version's libraries elsewhere (storage.directory.path).")
            }
            try Self.migrator.migrate(queue)
            return .success(queue)
        } catch let error as DatabaseError {
            // A damaged catalog is kept as damage (see ``opened``); anything else stops the open.
            guard translate(error, url: url).code == .corruptFile else { throw error }
            return .failure(translate(error, url: url))
        } catch let error as TapedeckError {
            throw error
        } catch {
            // GRDB could not decode its own migration table (a NULL or wrong-typed identifier).
            return .failure(damaged(url: url, "\(error)"))
        }
    }

    /// Whether opening failed in a way the WAL index in memory may get around: SQLite reports a
    /// `-shm` it could not create or grow as an I/O error (`SQLITE_IOERR_SHMOPEN`,
    /// `_SHMSIZE`, `_SHMMAP`, or a plain disk I/O error), and a write it could not make as
    /// `SQLITE_FULL`. - Thread: any. Never blocks.
    static func mayNeedHeapIndex(_ error: DatabaseError) -> Bool {
        error.resultCode == .SQLITE_IOERR || error.resultCode == .SQLITE_FULL
    }

    /// Whether the disk holding `folder` is full: less free than the library's catalog reserve.
    /// - Thread: any. A system call; does not block for long.
    static func diskIsFull(_ folder: URL) -> Bool {
        FreeSpace.available(at: folder.path).map { $0 < Int64(SpaceReserve.libraryBytes) } ?? false
    }

    /// Opens a catalog this process may not write: no journal-mode change, no migration; a
    /// catalog that needs one is refused with what to do.
    private static func openReadOnly(url: URL, busyTimeout: TimeInterval) -> Result<DatabaseQueue, TapedeckError> {
        var config = Configuration()
        config.readonly = true
        config.busyMode = .timeout(busyTimeout)
        config.label = "tapedeck.catalog"
        do {
            let queue = try DatabaseQueue(path: url.path, configuration: config)
            let (current, superseded) = try queue.read { db in
                (try migrator.hasCompletedMigrations(db), try migrator.hasBeenSuperseded(db))
            }
            if superseded {
                return .failure(TapedeckError(.configuration, "The library catalog \(url.path) was written by a newer version of Tapedeck. Use that version."))
            }
            if !current {
                return .failure(TapedeckError(.notWritable, "The library catalog \(url.path) is from an older Tapedeck and must be upgraded, which needs write access; this process may only read it. Run a command that writes (e.g. `tapedeck doctor`) as a user who may write the library."))
            }
            return .success(queue)
        } catch let error as DatabaseError {
            return .failure(translate(error, url: url))
        } catch {
            return .failure(damaged(url: url, "\(error)"))
        }
    }

    /// The error for a catalog whose contents are damaged, with what to do.
    static func damaged(url: URL?, _ what: String) -> TapedeckError {
        let place = url.map { " \($0.path)" } ?? ""
        return TapedeckError(.corruptFile, "The library catalog\(place) is damaged: \(SettingProblem.shown(what)). Run `tapedeck doctor --rebuild-catalog`: it keeps every entry that still reads and makes entries for the audio files; no audio is touched.")
    }

    static var migrator: DatabaseMigrator {
        var m = DatabaseMigrator()
        m.registerMigration("v1") { db in
            try db.execute(sql: """
                CREATE TABLE session (
                    id TEXT PRIMARY KEY NOT NULL,
                    name TEXT NOT NULL,
                    createdAt DOUBLE NOT NULL,
                    folder TEXT NOT NULL
                );
                CREATE TABLE take (
                    id TEXT PRIMARY KEY NOT NULL,
                    sessionId TEXT NOT NULL REFERENCES session(id) ON DELETE CASCADE,
                    name TEXT NOT NULL,
                    number INTEGER NOT NULL,
                    createdAt DOUBLE NOT NULL,
                    state TEXT NOT NULL,
                    sampleRate INTEGER NOT NULL,
                    channels INTEGER NOT NULL,
                    sampleFormat TEXT NOT NULL,
                    encoding TEXT NOT NULL,
                    file TEXT NOT NULL,
                    pendingFile TEXT,
                    frames INTEGER NOT NULL DEFAULT 0,
                    overruns TEXT NOT NULL DEFAULT '[]',
                    notes TEXT NOT NULL DEFAULT ''
                );
                CREATE INDEX take_session ON take(sessionId, number);
                """)
        }
        m.registerMigration("v2: tags and clip counts") { db in
            try db.execute(sql: """
                ALTER TABLE take ADD COLUMN tags TEXT NOT NULL DEFAULT '{}';
                ALTER TABLE take ADD COLUMN clippedSamples INTEGER NOT NULL DEFAULT 0;
                """)
        }
        m.registerMigration("v3: channel layout") { db in
            // NULL: the conventional layout for the channel count (every take from before).
            try db.execute(sql: "ALTER TABLE take ADD COLUMN channelMask INTEGER")
        }
        m.registerMigration("v4: indexes for keyed reads") { db in
            // `last` (the newest take) and the recovery at every open (takes left recording)
            // without reading every take.
            try db.execute(sql: """
                CREATE INDEX take_created ON take(createdAt);
                CREATE INDEX take_recording ON take(state) WHERE state = 'recording';
                """)
        }
        m.registerMigration("v5: runs") { db in
            // NULL runId: a take recorded on its own (every take from before).
            try db.execute(sql: """
                ALTER TABLE take ADD COLUMN runId TEXT;
                ALTER TABLE take ADD COLUMN runIndex INTEGER;
                ALTER TABLE take ADD COLUMN runOffset INTEGER;
                ALTER TABLE take ADD COLUMN runBegan TEXT;
                ALTER TABLE take ADD COLUMN runEnded TEXT;
                ALTER TABLE take ADD COLUMN markers TEXT NOT NULL DEFAULT '[]';
                CREATE INDEX take_run ON take(runId, runIndex) WHERE runId IS NOT NULL;
                """)
        }
        m.registerMigration("v6: loudness") { db in
            // NULL loudnessRange: never measured (every take from before). The other values are
            // NULL where silence makes them infinite.
            try db.execute(sql: """
                ALTER TABLE take ADD COLUMN loudnessIntegrated REAL;
                ALTER TABLE take ADD COLUMN loudnessRange REAL;
                ALTER TABLE take ADD COLUMN truePeak REAL;
                ALTER TABLE take ADD COLUMN maxMomentary REAL;
                ALTER TABLE take ADD COLUMN maxShortTerm REAL;
                ALTER TABLE take ADD COLUMN began REAL;
                """)
        }
        return m
    }

    /// Runs a read, translating SQLite errors.
    func read<T>(_ body: (Database) throws -> T) throws -> T {
        do { return try queue.read(body) } catch let e as DatabaseError { throw Self.translate(e, url: nil, folder: folder) } catch let e as TapedeckError { throw e } catch {
            throw Self.damaged(url: nil, "\(error)")  // a value GRDB could not decode
        }
    }

    /// Runs an immediate write transaction, translating SQLite errors.
    func write<T>(_ body: (Database) throws -> T) throws -> T {
        do { return try queue.write(body) } catch let e as DatabaseError { throw Self.translate(e, url: nil, folder: folder) } catch let e as TapedeckError { throw e } catch {
            throw Self.damaged(url: nil, "\(error)")  // a value GRDB could not decode
        }
    }

    /// The ``TapedeckError`` for SQLite's `error`, with what to do. An I/O error where the disk
    /// holding the catalog (`folder`, else `url`'s folder) is full is called a full disk: SQLite
    /// reports a `-shm` or journal it could not grow on a full disk as "disk I/O error".
    static func translate(_ error: DatabaseError, url: URL?, folder: URL? = nil) -> TapedeckError {
        let place = url.map { " (\($0.path))" } ?? ""
        let fullDisk = "Free some space and try again: `tapedeck delete` removes takes on a full disk, and list, show and doctor work."
        switch error.resultCode {
        case .SQLITE_BUSY, .SQLITE_LOCKED:
            return TapedeckError(.busy, "The library catalog\(place) stayed locked by another tapedeck process. Try again when it has finished.")
        case .SQLITE_FULL:
            return TapedeckError(.diskFull, "The disk holding the library catalog\(place) is full. \(fullDisk)", systemCode: ENOSPC)
        case .SQLITE_IOERR where (folder ?? url?.deletingLastPathComponent()).map(diskIsFull) ?? false:
            return TapedeckError(.diskFull, "The disk holding the library catalog\(place) is full (SQLite: \(error.message ?? "disk I/O error")). \(fullDisk)",
                                 systemCode: ENOSPC)
        case .SQLITE_CORRUPT, .SQLITE_NOTADB:
            return damaged(url: url, error.message ?? "unknown damage")
        case .SQLITE_CANTOPEN, .SQLITE_PERM, .SQLITE_READONLY:
            return TapedeckError(.io, "The library catalog\(place) cannot be opened for writing: \(error.message ?? ""). Check the folder's permissions or choose another library path.")
        default:
            return TapedeckError(.io, "The library catalog\(place) failed: \(error.message ?? "\(error)").")
        }
    }

    // MARK: rows

    static func session(from row: Row) throws -> (Session, folder: String) {
        let r = RowReader(row: row, what: "session")
        return (Session(id: try r.text("id"), name: try r.text("name"), createdAt: Date(timeIntervalSince1970: try r.number("createdAt"))),
                try r.text("folder"))
    }

    /// A take's row, every column checked: a wrong type or an impossible value (a sample rate
    /// of 0, an unknown state) is a damaged row, never a crash and never a guess.
    /// - Parameter positions: the statement's column positions, when many rows of one statement
    ///   are read (``ColumnPositions`` once, not a lookup table per row).
    static func take(from row: Row, positions: ColumnPositions? = nil) throws -> Take {
        let r = RowReader(row: row, what: "take", positions: positions)
        // Most takes have no overruns: their "[]" is not handed to a JSON decoder.
        let overrunText = try r.text("overruns")
        var overruns: [OverrunEvent] = []
        if overrunText != "[]" {
            let decoder = JSONDecoder()
            decoder.dateDecodingStrategy = .secondsSince1970
            overruns = (try? decoder.decode([OverrunEvent].self, from: Data(overrunText.utf8))) ?? []
        }
        guard let sampleFormat = SampleFormat(rawValue: try r.text("sampleFormat")) else { throw r.damaged("sampleFormat") }
        guard let state = TakeState(rawValue: try r.text("state")) else { throw r.damaged("state") }
        let channels = try r.integer("channels")
        var layout: ChannelLayout?
        if let mask = try r.optionalInteger64("channelMask") {
            guard let known = UInt32(exactly: mask).flatMap({ ChannelLayout(mask: $0, channels: channels) }) else { throw r.damaged("channelMask") }
            layout = known
        }
        let format = AudioFormat(sampleRate: try r.integer("sampleRate"), channels: channels, sampleFormat: sampleFormat, layout: layout)
        guard (try? format.validate()) != nil else { throw r.damaged("sampleRate") }
        let frames = try r.integer64("frames")
        guard frames >= 0 else { throw r.damaged("frames") }
        let created = try r.number("createdAt")
        guard created.isFinite else { throw r.damaged("createdAt") }
        return Take(
            id: try r.text("id"), sessionID: try r.text("sessionId"), name: try r.text("name"), number: try r.integer("number"),
            createdAt: Date(timeIntervalSince1970: created), state: state, format: format,
            encoding: try r.text("encoding"), file: try r.text("file"), frames: frames, overruns: overruns, notes: try r.text("notes"),
            tags: decodeTags(String.fromDatabaseValue(r.value("tags"))), clippedSamples: (try? r.integer64("clippedSamples")) ?? 0,
            run: try run(r), markers: markers(String.fromDatabaseValue(r.value("markers"))), loudness: try loudness(r),
            began: try r.optionalNumber("began").map { Date(timeIntervalSince1970: $0) })
    }

    /// The loudness columns as a ``Loudness``; `nil` when loudnessRange is NULL (never measured).
    static func loudness(_ r: RowReader) throws -> Loudness? {
        guard let range = try r.optionalNumber("loudnessRange") else { return nil }
        let value = Loudness(integrated: try r.optionalNumber("loudnessIntegrated"), range: range, truePeak: try r.optionalNumber("truePeak"),
                             maxMomentary: try r.optionalNumber("maxMomentary"), maxShortTerm: try r.optionalNumber("maxShortTerm"))
        guard (try? value.validate()) != nil else { throw r.damaged("loudnessRange") }
        return value
    }

    /// The loudness columns' values, in the order loudnessIntegrated, loudnessRange, truePeak,
    /// maxMomentary, maxShortTerm.
    static func loudnessColumns(_ l: Loudness?) -> [(any DatabaseValueConvertible)?] {
        [l?.integrated, l?.range, l?.truePeak, l?.maxMomentary, l?.maxShortTerm]
    }

    /// The markers column: `[]` (or absent) without a JSON decoder; damaged JSON reads as none.
    static func markers(_ json: String?) -> [TakeMarker] {
        guard let json, json != "[]" else { return [] }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .secondsSince1970
        return (try? decoder.decode([TakeMarker].self, from: Data(json.utf8))) ?? []
    }

    /// The run columns as a ``TakeRun``; `nil` when runId is NULL. A boundary this build does not
    /// know (written by a newer one) reads as not known.
    static func run(_ r: RowReader) throws -> TakeRun? {
        guard case .string(let id) = r.value("runId").storage else { return nil }
        guard let index = try r.optionalInteger64("runIndex"), let i = Int(exactly: index), i >= 1 else { throw r.damaged("runIndex") }
        let offset = try r.optionalInteger64("runOffset")
        guard (offset ?? 0) >= 0 else { throw r.damaged("runOffset") }
        return TakeRun(id: id, index: i, offset: offset,
                       began: String.fromDatabaseValue(r.value("runBegan")).flatMap(TakeBoundary.init(rawValue:)),
                       ended: String.fromDatabaseValue(r.value("runEnded")).flatMap(TakeBoundary.init(rawValue:)))
    }

    /// The run columns' values for `run`, in the order runId, runIndex, runOffset, runBegan, runEnded.
    static func runColumns(_ run: TakeRun?) -> [(any DatabaseValueConvertible)?] {
        [run?.id, run?.index, run?.offset, run?.began?.rawValue, run?.ended?.rawValue]
    }

    /// Reads one row's columns with their types checked (GRDB's plain subscripts trap on a value
    /// of the wrong type).
    /// Where each column of a statement's rows is (GRDB's lookup by name lowercases both names at
    /// every call, which dominated listing a large library): made once per statement, or once
    /// per row for a single row.
    struct ColumnPositions {
        let positions: [String: Int]

        init<Names: Sequence<String>>(_ names: Names) {
            var positions: [String: Int] = [:]
            for (i, name) in names.enumerated() where positions[name] == nil { positions[name] = i }
            self.positions = positions
        }
    }

    struct RowReader {
        let row: Row
        let what: String
        private let positions: ColumnPositions

        init(row: Row, what: String, positions: ColumnPositions? = nil) {
            self.row = row
            self.what = what
            self.positions = positions ?? ColumnPositions(row.columnNames)
        }

        /// The value of `column`: by position when the row has it under that exact name, else
        /// as ``Row/checked(_:)`` finds it (another case, or NULL when absent).
        func value(_ column: String) -> DatabaseValue {
            if let i = positions.positions[column], i < row.count { return row[i] }
            return row.checked(column)
        }

        func damaged(_ column: String) -> TapedeckError {
            let id = String.fromDatabaseValue(row.checked("id")) ?? "(no id)"
            return TapedeckError(.corruptFile, "The catalog's row for \(what) \(id) is damaged: its \(column) holds \(SettingProblem.shown(row.checked(column).description)); the \(what) is left out of every listing.")
        }
        func text(_ column: String) throws -> String {
            guard let v = String.fromDatabaseValue(value(column)) else { throw damaged(column) }
            return v
        }
        func integer(_ column: String) throws -> Int {
            guard case .int64(let n) = value(column).storage, let v = Int(exactly: n) else { throw damaged(column) }
            return v
        }
        /// A nullable integer column: `nil` for NULL (or a column this catalog does not have).
        func optionalInteger64(_ column: String) throws -> Int64? {
            switch value(column).storage {
            case .null: return nil
            case .int64(let n): return n
            default: throw damaged(column)
            }
        }
        func integer64(_ column: String) throws -> Int64 {
            guard case .int64(let n) = value(column).storage else { throw damaged(column) }
            return n
        }
        /// A nullable real column: `nil` for NULL (or a column this catalog does not have).
        func optionalNumber(_ column: String) throws -> Double? {
            switch value(column).storage {
            case .null: return nil
            case .int64(let n): return Double(n)
            case .double(let d) where d.isFinite: return d
            default: throw damaged(column)
            }
        }
        func number(_ column: String) throws -> Double {
            switch value(column).storage {
            case .int64(let n): return Double(n)
            case .double(let d) where d.isFinite: return d
            default: throw damaged(column)
            }
        }
    }

    /// The `channelMask` column's value: NULL for the conventional layout of the channel count.
    static func channelMask(_ format: AudioFormat) -> Int64? {
        format.layout == .conventional(channels: format.channels) ? nil : Int64(format.layout.mask)
    }

    static func decodeTags(_ json: String?) -> [String: String] {
        guard let json, json != "{}" else { return [:] }
        return (try? JSONDecoder().decode([String: String].self, from: Data(json.utf8))) ?? [:]
    }

    static func encode(_ tags: [String: String]) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return String(decoding: (try? encoder.encode(tags)) ?? Data("{}".utf8), as: UTF8.self)
    }

    static func encode(_ markers: [TakeMarker]) -> String {
        guard !markers.isEmpty else { return "[]" }
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .secondsSince1970
        encoder.outputFormatting = .sortedKeys
        return String(decoding: (try? encoder.encode(markers)) ?? Data("[]".utf8), as: UTF8.self)
    }

    static func encode(_ overruns: [OverrunEvent]) -> String {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .secondsSince1970
        let data = (try? encoder.encode(overruns)) ?? Data("[]".utf8)
        return String(decoding: data, as: UTF8.self)
    }
}

extension Row {
    /// The value of `column`, or NULL when the row has no such column (a damaged schema): GRDB's
    /// typed subscripts trap on a missing column or an undecodable value; this never does.
    func checked(_ column: String) -> DatabaseValue {
        hasColumn(column) ? self[column] : .null
    }
}
