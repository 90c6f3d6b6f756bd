import Foundation
public import Logging
import NIOCore
import NIOPosix
import NIOSSL
import PostgresNIO
public import TapedeckCore

/// The fleet index (`FleetIndex`) in PostgreSQL, over postgres-nio: the takes' manifests and
/// the recorders' heartbeats in two tables, searched with indexes (machine and time; PostgreSQL's
/// full-text search for words; a GIN index for tags). Every statement is a fixed text with its
/// values bound as parameters; nothing a user typed becomes SQL. The schema is versioned
/// (`PostgresFleetSchema`) and brought up to date by ``prepare()`` under an advisory lock, so
/// machines starting together never race.
///
/// Safe on any thread; every method suspends while the server answers (each at most
/// ``timeout``), none blocks a thread. A server that cannot be reached is `.remoteUnavailable`.
public final class PostgresFleetIndex: FleetIndex {
    public let location: String
    /// The longest a statement may take before it is given up as unreachable.
    public let timeout: Duration
    private let client: PostgresClient
    /// One connection of its own for ``prepare()``: a refused login or a missing database is
    /// said at once (the pool would keep trying until the timeout).
    private let direct: PostgresConnection.Configuration
    private let running: Task<Void, Never>
    /// Its own event loop: a loop another part of the process keeps busy never holds it up.
    private let loop: MultiThreadedEventLoopGroup
    private let logger: Logger

    /// Connects (lazily, at the first statement) as `settings` say.
    /// - Throws: `.configuration` for a URL that is not one (its message says what to write).
    public init(_ settings: PostgresSettings, logger: Logger, timeout: Duration = .seconds(15)) throws {
        var configuration: PostgresClient.Configuration
        switch settings.endpoint {
        case .socket(let path):
            configuration = PostgresClient.Configuration(unixSocketPath: path, username: settings.user, password: settings.password, database: settings.database)
            direct = PostgresConnection.Configuration(unixSocketPath: path, username: settings.user, password: settings.password, database: settings.database)
        case .tcp(let host, let port):
            let tlsConfiguration = try Self.tlsConfiguration(settings)
            let tls: PostgresClient.Configuration.TLS = switch settings.tls {
            case .disable: .disable
            case .prefer: .prefer(tlsConfiguration)
            case .require, .verifyCA, .verifyFull: .require(tlsConfiguration)
            }
            configuration = PostgresClient.Configuration(host: host, port: port, username: settings.user, password: settings.password,
                                                          database: settings.database, tls: tls)
            let context: NIOSSLContext
            do { context = try NIOSSLContext(configuration: tlsConfiguration) } catch {
                throw TapedeckError(.configuration, "TLS to the fleet catalog at \(settings.location) cannot be set up: \(error). Check sslrootcert in sync.catalog.postgres.")
            }
            let directTLS: PostgresConnection.Configuration.TLS = switch settings.tls {
            case .disable: .disable
            case .prefer: .prefer(context)
            case .require, .verifyCA, .verifyFull: .require(context)
            }
            direct = PostgresConnection.Configuration(host: host, port: port, username: settings.user, password: settings.password,
                                                      database: settings.database, tls: directTLS)
        }
        configuration.options.connectTimeout = .seconds(10)
        configuration.options.maximumConnections = 8
        configuration.options.keepAliveBehavior = nil
        loop = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        client = PostgresClient(configuration: configuration, eventLoopGroup: loop, backgroundLogger: logger)
        let client = client
        running = Task { await client.run() }
        location = settings.location
        self.logger = logger
        self.timeout = timeout
    }

    /// TLS as libpq's `sslmode` means it: `prefer` and `require` encrypt without checking the
    /// server's certificate; `verify-ca` checks it against `sslrootcert` (else the system's
    /// roots); `verify-full` also checks that it names the host.
    static func tlsConfiguration(_ settings: PostgresSettings) throws -> TLSConfiguration {
        var c = TLSConfiguration.makeClientConfiguration()
        switch settings.tls {
        case .disable, .prefer, .require: c.certificateVerification = .none
        case .verifyCA: c.certificateVerification = .noHostnameVerification
        case .verifyFull: c.certificateVerification = .fullVerification
        }
        if let root = settings.rootCertificate {
            guard FileManager.default.isReadableFile(atPath: root) else {
                throw TapedeckError(.configuration, "sync.catalog.postgres: sslrootcert=\(root) cannot be read. Name the PEM file of the certificate authority that signed the server's certificate.")
            }
            c.trustRoots = .file(root)
        }
        return c
    }

    /// Runs `body` on a connection within ``timeout``, a failure named as the server's.
    private func run<T: Sendable>(_ what: String, _ body: @escaping @Sendable (PostgresClient) async throws -> T) async throws -> T {
        let (client, timeout, location) = (client, timeout, location)
        do {
            return try await withThrowingTaskGroup(of: T?.self) { group in
                group.addTask { try await body(client) }
                group.addTask {
                    try await Task.sleep(for: timeout)
                    return nil
                }
                defer { group.cancelAll() }
                guard let first = try await group.next(), let value = first else {
                    throw TapedeckError(.remoteUnavailable, "The fleet catalog at \(location) did not answer within \(timeout.components.seconds) s (\(what)). Check that PostgreSQL runs and is reachable from here.")
                }
                return value
            }
        } catch let error as TapedeckError {
            throw error
        } catch let error as PostgresTransactionError {
            // What went wrong inside the transaction, not the wrapper.
            let cause = error.closureError ?? error.beginError ?? error.commitError ?? error.rollbackError
            if let cause = cause as? TapedeckError { throw cause }
            if let cause = cause as? PSQLError { throw Self.described(cause, location: location, what: what) }
            throw TapedeckError(.remoteUnavailable, "The fleet catalog at \(location) failed \(what): \(cause.map { "\($0)" } ?? "\(error)").")
        } catch let error as PSQLError {
            throw Self.described(error, location: location, what: what)
        } catch {
            throw TapedeckError(.remoteUnavailable, "The fleet catalog at \(location) could not be reached (\(what)): \(error). Check that PostgreSQL runs and is reachable from here.")
        }
    }

    /// A server's error as Tapedeck says it: refused credentials and missing rights are the
    /// configuration's; the rest is the server being unavailable.
    static func described(_ error: PSQLError, location: String, what: String) -> TapedeckError {
        let server = error.serverInfo
        let message = server?[.message] ?? Self.connectionProblem(error)
        let state = server?[.sqlState] ?? ""
        switch state {
        case "28P01", "28000":
            return TapedeckError(.configuration, "The fleet catalog at \(location) refused the login: \(message). Check sync.catalog.user and the password (sync.catalog.password-env or password-file).")
        case "42501":
            return TapedeckError(.configuration, "The fleet catalog at \(location) refused \(what): \(message). A recorder's user needs GRANT SELECT, INSERT, UPDATE, DELETE ON tapedeck_takes, tapedeck_heartbeats and SELECT ON tapedeck_schema (one that only reads, SELECT); the tables are made and upgraded by the database's owner (createdb --owner USER, then any tapedeck fleet command as USER).")
        case "3D000":
            return TapedeckError(.configuration, "The fleet catalog at \(location): \(message). Create the database (createdb) or name another in sync.catalog.postgres.")
        default:
            if state.isEmpty {
                return TapedeckError(.remoteUnavailable, "The fleet catalog at \(location) could not be reached (\(what)): \(message). Check that PostgreSQL runs and is reachable from here.")
            }
            return TapedeckError(.remoteUnavailable, "The fleet catalog at \(location) failed \(what): \(message) (SQLSTATE \(state)).")
        }
    }

    /// Why a connection failed, in words: the system's for a socket error (nothing listening
    /// is said as such), else the underlying error's description.
    static func connectionProblem(_ error: PSQLError) -> String {
        guard let underlying = error.underlying else { return "\(error.code)" }
        if let io = underlying as? IOError {
            let text = String(cString: strerror(io.errnoCode))
            return [ENOENT, ECONNREFUSED].contains(io.errnoCode) ? "nothing listens there (\(text))" : text
        }
        return "\(underlying)"
    }

    public func prepare() async throws {
        let (logger, direct, loop) = (logger, direct, loop)
        try await run("preparing its tables") { _ in
            let connection = try await PostgresConnection.connect(on: loop.next(), configuration: direct, id: 0, logger: logger)
            do {
                try await connection.withTransaction(logger: logger) { connection in
                    try await PostgresFleetSchema.migrate(connection, logger: logger)
                }
            } catch {
                try? await connection.close()
                throw error
            }
            try? await connection.close()
        }
    }

    public func upsert(_ manifests: [RemoteManifest]) async throws -> [FleetConflict] {
        let logger = logger
        let rows = try manifests.map { try PostgresFleetRow($0) }
        return try await run("storing \(manifests.count) takes") { client in
            try await client.withTransaction(logger: logger) { connection in
                var conflicts: [FleetConflict] = []
                for row in rows {
                    let stored = try await connection.query("""
                        INSERT INTO tapedeck_takes (take_id, machine, session_id, session_name, recorded_at, seconds, state, lufs,
                                                    has_markers, tags, words, sha256, manifest)
                        VALUES (\(row.takeID), \(row.machine), \(row.sessionID), \(row.sessionName), \(row.recordedAt), \(row.seconds),
                                \(row.state), \(row.lufs), \(row.hasMarkers), \(row.tags)::jsonb, \(row.words), \(row.sha256), \(row.manifest)::jsonb)
                        ON CONFLICT (take_id) DO UPDATE SET machine = EXCLUDED.machine, session_id = EXCLUDED.session_id,
                            session_name = EXCLUDED.session_name, recorded_at = EXCLUDED.recorded_at, seconds = EXCLUDED.seconds,
                            state = EXCLUDED.state, lufs = EXCLUDED.lufs, has_markers = EXCLUDED.has_markers, tags = EXCLUDED.tags,
                            words = EXCLUDED.words, manifest = EXCLUDED.manifest, updated_at = now()
                        WHERE tapedeck_takes.sha256 = EXCLUDED.sha256
                        RETURNING take_id
                        """, logger: logger)
                    var written = false
                    for try await _ in stored.decode(String.self) { written = true }
                    if !written {
                        let held = try await connection.query("SELECT machine, sha256 FROM tapedeck_takes WHERE take_id = \(row.takeID)", logger: logger)
                        for try await (machine, sha) in held.decode((String, String).self) {
                            conflicts.append(FleetConflict(takeID: row.takeID, machine: machine, held: sha, offered: row.sha256))
                        }
                    }
                }
                return conflicts
            }
        }
    }

    public func search(_ query: FleetQuery) async throws -> FleetPage {
        let logger = logger
        let (filter, binds) = try PostgresFleetQuery.filter(query)
        var pageBinds = binds
        pageBinds.append(max(0, query.limit))
        pageBinds.append(max(0, query.offset))
        let n = binds.count
        let page = PostgresQuery(unsafeSQL: "SELECT manifest::text, machine, session_id, take_id FROM tapedeck_takes\(filter) ORDER BY recorded_at, take_id LIMIT $\(n + 1) OFFSET $\(n + 2)", binds: pageBinds)
        let count = PostgresQuery(unsafeSQL: "SELECT count(*) FROM tapedeck_takes\(filter)", binds: binds)
        return try await run("searching") { client in
            var manifests: [RemoteManifest] = []
            for try await (text, machine, session, take) in try await client.query(page, logger: logger).decode((String, String, String, String).self) {
                // Checked as any manifest is: against the key its row names.
                manifests.append(try RemoteManifest.decode(Data(text.utf8), key: "\(machine)/\(session)/\(take).json"))
            }
            var total = 0
            for try await n in try await client.query(count, logger: logger).decode(Int.self) { total = n }
            return FleetPage(manifests: manifests, total: total)
        }
    }

    public func takeIDs() async throws -> [String: String] {
        let logger = logger
        return try await run("listing its takes") { client in
            var ids: [String: String] = [:]
            for try await (id, machine) in try await client.query("SELECT take_id, machine FROM tapedeck_takes", logger: logger).decode((String, String).self) {
                ids[id] = machine
            }
            return ids
        }
    }

    public func remove(takeIDs: [String]) async throws {
        let logger = logger
        try await run("removing \(takeIDs.count) takes") { client in
            _ = try await client.query("DELETE FROM tapedeck_takes WHERE take_id = ANY(\(takeIDs))", logger: logger)
        }
    }

    public func beat(_ heartbeat: RecorderHeartbeat) async throws {
        let logger = logger
        let json = String(decoding: try PostgresFleetRow.encoder.encode(heartbeat), as: UTF8.self)
        let (machine, role, sent) = (heartbeat.machine, heartbeat.role, heartbeat.sentAt)
        try await run("storing a heartbeat") { client in
            _ = try await client.query("""
                INSERT INTO tapedeck_heartbeats (machine, role, sent_at, beat, seen_at) VALUES (\(machine), \(role), \(sent), \(json)::jsonb, clock_timestamp())
                ON CONFLICT (machine, role) DO UPDATE SET sent_at = EXCLUDED.sent_at, beat = EXCLUDED.beat, seen_at = clock_timestamp()
                """, logger: logger)
        }
    }

    public func heartbeats() async throws -> [RecorderHeartbeat] {
        let logger = logger
        return try await run("reading the heartbeats") { client in
            var beats: [RecorderHeartbeat] = []
            // How long ago, and the sender's clock against the server's, by the server's clock.
            let rows = try await client.query("""
                SELECT beat::text, EXTRACT(EPOCH FROM clock_timestamp() - seen_at)::float8, EXTRACT(EPOCH FROM sent_at - seen_at)::float8
                FROM tapedeck_heartbeats ORDER BY machine, role
                """, logger: logger)
            for try await (text, ago, offset) in rows.decode((String, Double, Double).self) {
                var beat = try PostgresFleetRow.decoder.decode(RecorderHeartbeat.self, from: Data(text.utf8))
                beat.heardSecondsAgo = max(0, ago)
                beat.clockOffsetSeconds = offset
                beats.append(beat)
            }
            return beats
        }
    }

    public func shutdown() async {
        running.cancel()
        _ = await running.value
        try? await loop.shutdownGracefully()
    }
}
