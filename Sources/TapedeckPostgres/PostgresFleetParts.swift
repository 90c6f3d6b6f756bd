import Foundation
import Logging
import PostgresNIO
import TapedeckCore

/// Where the fleet catalog is and how to log in: `sync.catalog.postgres`, a libpq-style URL,
/// `postgres://USER@HOST[:PORT]/DATABASE[?sslmode=disable|prefer|require|verify-ca|verify-full[&sslrootcert=CA.pem]]`, or a Unix socket's
/// folder as `postgres://USER@/DATABASE?host=/run/postgresql[&port=PORT]`. The password never comes from the
/// URL: `sync.catalog.password-env` names a variable, or the server needs none (peer or trust).
/// A plain value.
public struct PostgresSettings: Sendable, Hashable {
    public enum Endpoint: Sendable, Hashable {
        case tcp(host: String, port: Int)
        /// The socket file itself (`FOLDER/.s.PGSQL.PORT`).
        case socket(String)
    }

    /// libpq's `sslmode`: `prefer` (the default) and `require` encrypt without checking the
    /// certificate, `verify-ca` checks it, `verify-full` checks it and the host's name.
    public enum TLS: String, Sendable, Hashable {
        case disable, prefer, require
        case verifyCA = "verify-ca"
        case verifyFull = "verify-full"
    }

    public var endpoint: Endpoint
    public var user: String
    public var database: String
    public var tls: TLS
    /// `sslrootcert`: the PEM file of the authority the server's certificate must chain to
    /// (`verify-ca`, `verify-full`); `nil`: the system's roots.
    public var rootCertificate: String?
    public var password: String?

    /// - Throws: `.configuration` naming what is wrong and what to write.
    public init(url text: String, password: String?, key: String = "sync.catalog.postgres") throws {
        let usage = "Write postgres://USER@HOST[:PORT]/DATABASE (add ?sslmode=require for TLS, ?sslmode=verify-full&sslrootcert=CA.pem to check the server), or postgres://USER@/DATABASE?host=/run/postgresql for a local socket."
        guard let parts = URLComponents(string: text), ["postgres", "postgresql"].contains(parts.scheme?.lowercased() ?? "") else {
            throw TapedeckError(.configuration, "\(key): \"\(text)\" is not a PostgreSQL URL. \(usage)")
        }
        guard parts.password == nil else {
            throw TapedeckError(.configuration, "\(key): the URL holds a password, and the config never holds secrets. Remove it and name a variable that holds it with sync.catalog.password-env.")
        }
        guard let user = parts.user, !user.isEmpty else {
            throw TapedeckError(.configuration, "\(key): \"\(text)\" names no user. \(usage)")
        }
        let database = String(parts.path.drop { $0 == "/" })
        guard !database.isEmpty, !database.contains("/") else {
            throw TapedeckError(.configuration, "\(key): \"\(text)\" names no database. \(usage)")
        }
        let items = Dictionary((parts.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { $1 })
        // libpq's ?port= too: a socket folder's URL has no authority to hold one.
        let port = parts.port ?? items["port"].map { Int($0) ?? 0 } ?? 5432
        guard (1...65_535).contains(port) else {
            throw TapedeckError(.configuration, "\(key): port \(parts.port.map(String.init) ?? items["port"] ?? "") is not one. \(usage)")
        }
        if let folder = items["host"], folder.hasPrefix("/") {
            endpoint = .socket(folder + "/.s.PGSQL.\(port)")
            tls = .disable
        } else if let host = parts.host, !host.isEmpty {
            endpoint = .tcp(host: host, port: port)
            guard let mode = TLS(rawValue: items["sslmode"] ?? "prefer") else {
                throw TapedeckError(.configuration, "\(key): sslmode=\(items["sslmode"] ?? "") is not one of disable, prefer, require, verify-ca, verify-full.")
            }
            tls = mode
        } else {
            throw TapedeckError(.configuration, "\(key): \"\(text)\" names no host. \(usage)")
        }
        self.user = user
        self.database = database
        self.password = password
        rootCertificate = items["sslrootcert"].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// The URL for messages: without a password, ever.
    public var location: String {
        switch endpoint {
        case .tcp(let host, let port): "postgres://\(user)@\(host)\(port == 5432 ? "" : ":\(port)")/\(database)"
        case .socket(let path):
            "postgres://\(user)@/\(database)?host=\((path as NSString).deletingLastPathComponent)"
                + (path.hasSuffix(".s.PGSQL.5432") ? "" : "&port=\((path as NSString).pathExtension)")
        }
    }
}

/// A manifest as a row of `tapedeck_takes`: the columns searches use, and the manifest itself.
struct PostgresFleetRow: Sendable {
    static let encoder: JSONEncoder = {
        let e = JSONEncoder()
        e.dateEncodingStrategy = .iso8601
        e.outputFormatting = [.sortedKeys]
        return e
    }()
    static let decoder: JSONDecoder = {
        let d = JSONDecoder()
        d.dateDecodingStrategy = .iso8601
        return d
    }()

    var takeID, machine, sessionID, sessionName, state, tags, words, sha256, manifest: String
    var recordedAt: Date
    var seconds: Double
    var lufs: Double?
    var hasMarkers: Bool

    init(_ m: RemoteManifest) throws {
        takeID = m.take.id
        machine = m.machine
        sessionID = m.session.id
        sessionName = m.session.name
        state = m.take.state.rawValue
        tags = String(decoding: try Self.encoder.encode(m.take.tags), as: UTF8.self)
        // The words as the in-memory index splits them, so both engines find the same takes.
        words = FleetQuery.words(m.searchableText).joined(separator: " ")
        sha256 = m.audio.sha256
        manifest = String(decoding: try m.encoded(), as: UTF8.self)
        recordedAt = m.recordedAt
        seconds = m.seconds
        lufs = m.take.loudness?.integrated
        hasMarkers = !m.take.markers.isEmpty
    }
}

/// A `FleetQuery` as a `WHERE` clause of fixed text, its values bound as `$1`, `$2`, ….
enum PostgresFleetQuery {
    static func filter(_ query: FleetQuery) throws -> (String, PostgresBindings) {
        var clauses: [String] = []
        var binds = PostgresBindings()
        func bind<T: PostgresThrowingDynamicTypeEncodable>(_ value: T) throws -> String {
            try binds.append(value)
            return "$\(binds.count)"
        }
        if let machine = query.machine { clauses.append("machine = \(try bind(machine))") }
        if let session = query.session {
            let p = try bind(session)
            clauses.append("(session_name = \(p) OR session_id = \(p))")
        }
        if let from = query.from { clauses.append("recorded_at >= \(try bind(from))") }
        if let to = query.to { clauses.append("recorded_at < \(try bind(to))") }
        if let text = query.text {
            let words = FleetQuery.words(text)
            // Words are letters and digits only: joined with & they are a tsquery as they are.
            clauses.append(words.isEmpty ? "TRUE" : "to_tsvector('simple', words) @@ to_tsquery('simple', \(try bind(words.joined(separator: " & "))))")
        }
        if !query.tags.isEmpty {
            let json = String(decoding: try PostgresFleetRow.encoder.encode(query.tags), as: UTF8.self)
            clauses.append("tags @> \(try bind(json))::jsonb")
        }
        if let marked = query.hasMarkers { clauses.append("has_markers = \(try bind(marked))") }
        if let range = query.loudness { clauses.append("lufs BETWEEN \(try bind(range.lowerBound)) AND \(try bind(range.upperBound))") }
        if !query.states.isEmpty { clauses.append("state = ANY(\(try bind(query.states.map(\.rawValue).sorted())))") }
        if let range = query.seconds { clauses.append("seconds BETWEEN \(try bind(range.lowerBound)) AND \(try bind(range.upperBound))") }
        return (clauses.isEmpty ? "" : " WHERE " + clauses.joined(separator: " AND "), binds)
    }
}

/// The catalog's schema, one migration per version, applied in order inside a transaction that
/// holds an advisory lock; `tapedeck_schema` records the version. A database at a newer version
/// than this Tapedeck knows is refused (an older Tapedeck never writes a newer schema's tables).
enum PostgresFleetSchema {
    static let lockKey: Int64 = 0x7461_7065_6465_636B  // "tapedeck"
    static let migrations: [[String]] = [
        [
            """
            CREATE TABLE tapedeck_takes (
                take_id text PRIMARY KEY, machine text NOT NULL, session_id text NOT NULL, session_name text NOT NULL,
                recorded_at timestamptz NOT NULL, seconds double precision NOT NULL, state text NOT NULL,
                lufs double precision, has_markers boolean NOT NULL, tags jsonb NOT NULL, words text NOT NULL,
                sha256 text NOT NULL, manifest jsonb NOT NULL, updated_at timestamptz NOT NULL DEFAULT now())
            """,
            "CREATE INDEX tapedeck_takes_machine_time ON tapedeck_takes (machine, recorded_at, take_id)",
            "CREATE INDEX tapedeck_takes_time ON tapedeck_takes (recorded_at, take_id)",
            "CREATE INDEX tapedeck_takes_words ON tapedeck_takes USING gin (to_tsvector('simple', words))",
            "CREATE INDEX tapedeck_takes_tags ON tapedeck_takes USING gin (tags jsonb_path_ops)",
            """
            CREATE TABLE tapedeck_heartbeats (
                machine text NOT NULL, role text NOT NULL, sent_at timestamptz NOT NULL, beat jsonb NOT NULL,
                seen_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (machine, role))
            """,
        ],
    ]

    static var currentVersion: Int { migrations.count }

    static func migrate(_ connection: PostgresConnection, logger: Logger) async throws {
        _ = try await connection.query("SELECT pg_advisory_xact_lock(\(lockKey))", logger: logger)
        // Created only when missing: a user with only the rights to read and write the rows
        // (no CREATE) works with a catalog whose schema is current.
        var exists = false
        for try await found in try await connection.query("SELECT to_regclass('tapedeck_schema') IS NOT NULL", logger: logger).decode(Bool.self) {
            exists = found
        }
        if !exists {
            _ = try await connection.query("CREATE TABLE tapedeck_schema (version integer NOT NULL)", logger: logger)
        }
        var version = 0
        var rows = 0
        for try await v in try await connection.query("SELECT version FROM tapedeck_schema", logger: logger).decode(Int.self) {
            version = max(version, v)
            rows += 1
        }
        guard version <= currentVersion else {
            throw TapedeckError(.configuration, "The fleet catalog's schema is version \(version), newer than this Tapedeck knows (\(currentVersion)). Update Tapedeck on this machine.")
        }
        for step in migrations.indices where step >= version {
            for statement in migrations[step] {
                _ = try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
            }
        }
        if version < currentVersion {
            if rows == 0 {
                _ = try await connection.query("INSERT INTO tapedeck_schema (version) VALUES (\(currentVersion))", logger: logger)
            } else {
                _ = try await connection.query("UPDATE tapedeck_schema SET version = \(currentVersion)", logger: logger)
            }
            logger.notice("The fleet catalog's schema was brought from version \(version) to \(currentVersion).")
        }
    }
}
