import Foundation
import GRDB
import TapedeckCore

/// The SQLite catalog (`catalog.sqlite`) of a directory library: WAL journal synced at every
/// commit (`synchronous = FULL`, so a commit that returned survives power loss), a busy timeout so
/// concurrent `tapedeck` processes wait instead of failing, and every write in an immediate
/// transaction.
struct Catalog: Sendable {
    let queue: DatabaseQueue

    init(url: URL, busyTimeout: TimeInterval) throws {
        var config = Configuration()
        config.journalMode = .wal
        config.busyMode = .timeout(busyTimeout)
        config.foreignKeysEnabled = true
        config.label = "tapedeck.catalog"
        do {
            queue = try DatabaseQueue(path: url.path, configuration: config)
            // GRDB sets `synchronous = NORMAL` with WAL, which syncs the WAL only at checkpoints:
            // a power loss could then undo commits that had returned, a finished take's entry
            // among them (scripts/reliability-powerloss found it). FULL syncs the WAL at every commit.
            try queue.writeWithoutTransaction { try $0.execute(sql: "PRAGMA synchronous = FULL") }
            try Self.migrator.migrate(queue)
        } catch let error as DatabaseError {
            throw Self.translate(error, url: url)
        }
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
        return m
    }

    /// Runs a read, translating SQLite errors.
    func read<T>(_ body: (Database) throws -> T) throws -> T {
        do { return try queue.read(body) } catch let e as DatabaseError { throw Self.translate(e, url: nil) }
    }

    /// Runs an immediate write transaction, translating SQLite errors.
    func write<T>(_ body: (Database) throws -> T) throws -> T {
        do { return try queue.write(body) } catch let e as DatabaseError { throw Self.translate(e, url: nil) }
    }

    static func translate(_ error: DatabaseError, url: URL?) -> TapedeckError {
        let place = url.map { " (\($0.path))" } ?? ""
        switch error.resultCode {
        case .SQLITE_BUSY, .SQLITE_LOCKED:
            return TapedeckError(.busy, "The library catalog\(place) stayed locked by another tapedeck process. Try again when it has finished.")
        case .SQLITE_FULL:
            return TapedeckError(.diskFull, "The disk holding the library catalog\(place) is full. Free some space and try again.")
        case .SQLITE_CORRUPT, .SQLITE_NOTADB:
            return TapedeckError(.corruptFile, "The library catalog\(place) is damaged: \(error.message ?? "unknown damage"). Run `tapedeck doctor` or restore it from a backup.")
        case .SQLITE_CANTOPEN, .SQLITE_PERM, .SQLITE_READONLY:
            return TapedeckError(.io, "The library catalog\(place) cannot be opened for writing: \(error.message ?? ""). Check the folder's permissions or choose another library path.")
        default:
            return TapedeckError(.io, "The library catalog\(place) failed: \(error.message ?? "\(error)").")
        }
    }

    // MARK: rows

    static func session(from row: Row) -> (Session, folder: String) {
        (Session(id: row["id"], name: row["name"], createdAt: Date(timeIntervalSince1970: row["createdAt"])), row["folder"])
    }

    static func take(from row: Row) -> Take {
        let overrunsJSON: String = row["overruns"]
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .secondsSince1970
        let overruns = (try? decoder.decode([OverrunEvent].self, from: Data(overrunsJSON.utf8))) ?? []
        let sampleFormat = SampleFormat(rawValue: row["sampleFormat"]) ?? .s16
        return Take(
            id: row["id"], sessionID: row["sessionId"], name: row["name"], number: row["number"],
            createdAt: Date(timeIntervalSince1970: row["createdAt"]),
            state: TakeState(rawValue: row["state"]) ?? .recording,
            format: AudioFormat(sampleRate: row["sampleRate"], channels: row["channels"], sampleFormat: sampleFormat),
            encoding: row["encoding"], file: row["file"], frames: row["frames"], overruns: overruns, notes: row["notes"],
            tags: decodeTags(row["tags"]), clippedSamples: row["clippedSamples"] ?? 0)
    }

    static func decodeTags(_ json: String?) -> [String: String] {
        json.flatMap { try? JSONDecoder().decode([String: String].self, from: Data($0.utf8)) } ?? [:]
    }

    static func encode(_ tags: [String: String]) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return String(decoding: (try? encoder.encode(tags)) ?? Data("{}".utf8), as: UTF8.self)
    }

    static func encode(_ overruns: [OverrunEvent]) -> String {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .secondsSince1970
        let data = (try? encoder.encode(overruns)) ?? Data("[]".utf8)
        return String(decoding: data, as: UTF8.self)
    }
}
