import Foundation
import Logging
import TapedeckCore
import TapedeckPostgres
import TapedeckTesting
import Testing

/// The fleet index against a real PostgreSQL the test starts (and the in-memory one), the same
/// conformance suite for both; then what only a server can do: its schema's versions, a server
/// that is gone, a URL that holds a password.
@Suite("the fleet index", .serialized)
struct PostgresFleetIndexTests {
    let logger = Logger(label: "fleet-index-test")

    @Test("the conformance suite, in memory")
    func inMemory() async throws {
        let shared = InMemoryFleetIndex()
        try await FleetIndexConformance.check { shared }
    }

    @Test("the conformance suite, in PostgreSQL")
    func postgres() async throws {
        let server = try await PostgresServer.startAsync()
        defer { server.remove() }
        let settings = try PostgresSettings(url: server.url, password: nil)
        try await FleetIndexConformance.check { try PostgresFleetIndex(settings, logger: logger) }
        // What the tables hold: no audio, no credentials; the schema's version.
        #expect(try server.psql("SELECT version FROM tapedeck_schema").output.trimmingCharacters(in: .whitespacesAndNewlines) == "1")
    }

    @Test("a schema made by this version is kept with its rows; one newer than it knows is refused; a missing database is named")
    func schema() async throws {
        let server = try await PostgresServer.startAsync()
        defer { server.remove() }
        let settings = try PostgresSettings(url: server.url, password: nil)
        let index = try PostgresFleetIndex(settings, logger: logger)
        try await index.prepare()
        let take = FleetIndexConformance.manifest("studio", session: "Gig", take: "Take 1", minute: 1)
        #expect(try await index.upsert([take]).isEmpty)
        await index.shutdown()
        let again = try PostgresFleetIndex(settings, logger: logger)
        try await again.prepare()
        #expect(try await again.search(FleetQuery()).manifests == [take])
        await again.shutdown()
        #expect(try server.psql("UPDATE tapedeck_schema SET version = 99").status == 0)
        let newer = try PostgresFleetIndex(settings, logger: logger)
        await #expect(throws: TapedeckError.self) { try await newer.prepare() }
        do { try await newer.prepare() } catch let error as TapedeckError {
            #expect(error.code == .configuration && error.message.contains("newer than this Tapedeck knows"), "\(error.message)")
        }
        await newer.shutdown()
        let missing = try PostgresFleetIndex(try PostgresSettings(url: "postgres://tapedeck@/nosuch?host=\(server.folder.path)&port=\(server.port)", password: nil), logger: logger)
        do {
            try await missing.prepare()
            Issue.record("a missing database was not refused")
        } catch let error as TapedeckError {
            #expect(error.code == .configuration && error.message.contains("nosuch"), "\(error.message)")
        }
        await missing.shutdown()
    }

    @Test("least privilege: a user with only the rights on the rows records and reads; one without them is told what to grant")
    func leastPrivilege() async throws {
        let server = try await PostgresServer.startAsync()
        defer { server.remove() }
        let owner = try PostgresFleetIndex(try PostgresSettings(url: server.url, password: nil), logger: logger)
        try await owner.prepare()
        await owner.shutdown()
        // As the guide sets them up: the recorders' user may read and write the rows, nothing else.
        #expect(try server.psql("""
            CREATE ROLE recorder LOGIN; CREATE ROLE viewer LOGIN; REVOKE CREATE ON SCHEMA public FROM PUBLIC;
            GRANT SELECT, INSERT, UPDATE, DELETE ON tapedeck_takes, tapedeck_heartbeats TO recorder;
            GRANT SELECT ON tapedeck_schema TO recorder, viewer;
            """).status == 0)
        func index(_ user: String) throws -> PostgresFleetIndex {
            try PostgresFleetIndex(try PostgresSettings(url: server.url.replacingOccurrences(of: "tapedeck@", with: "\(user)@"), password: nil),
                                   logger: logger)
        }
        let recorder = try index("recorder")
        try await recorder.prepare()
        let take = FleetIndexConformance.manifest("studio", session: "Gig", take: "Take 1", minute: 1)
        #expect(try await recorder.upsert([take]).isEmpty)
        try await recorder.beat(RecorderHeartbeat(machine: "studio", role: "record", version: "test", state: .recording, sentAt: Date(), intervalSeconds: 10))
        #expect(try await recorder.search(FleetQuery(machine: "studio")).manifests == [take])
        #expect(try await recorder.heartbeats().count == 1)
        await recorder.shutdown()
        // A user without the rights on the rows: a configuration error that says what to grant.
        let viewer = try index("viewer")
        try await viewer.prepare()
        do {
            _ = try await viewer.search(FleetQuery())
            Issue.record("a user without SELECT read the takes")
        } catch let error as TapedeckError {
            #expect(error.code == .configuration && error.message.contains("GRANT"), "\(error.message)")
        }
        await viewer.shutdown()
    }

    @Test("a server that is gone is remote-unavailable within the timeout, and the index works again once it is back")
    func serverGone() async throws {
        let server = try await PostgresServer.startAsync()
        defer { server.remove() }
        // The tables made with the usual timeout (a loaded machine may take seconds), then an
        // index that gives up after 5 s.
        let owner = try PostgresFleetIndex(try PostgresSettings(url: server.url, password: nil), logger: logger)
        try await owner.prepare()
        await owner.shutdown()
        let index = try PostgresFleetIndex(try PostgresSettings(url: server.url, password: nil), logger: logger, timeout: .seconds(5))
        defer { Task { await index.shutdown() } }
        await server.killAsync()
        let started = ContinuousClock.now
        do {
            _ = try await index.upsert([FleetIndexConformance.manifest("studio", session: "Gig", take: "Lost", minute: 2)])
            Issue.record("an upsert to a stopped server succeeded")
        } catch let error as TapedeckError {
            #expect(error.code == .remoteUnavailable, "\(error.message)")
            #expect(error.message.contains("postgres://tapedeck@/tapedeck"), "\(error.message)")
        }
        #expect(ContinuousClock.now - started < .seconds(12), "within the 5 s timeout, with room for a loaded machine")
        try await server.restartAsync()
        var back = false
        for _ in 0..<60 where !back {
            back = (try? await index.upsert([FleetIndexConformance.manifest("studio", session: "Gig", take: "Back", minute: 3)]))?.isEmpty == true
            if !back { try await Task.sleep(for: .milliseconds(500)) }
        }
        #expect(back, "the index did not reconnect")
    }

    @Test("TLS as libpq's sslmode means it: require encrypts, verify-full checks the certificate and the name; a server that takes TLS only refuses disable")
    func tls() async throws {
        let server = try await PostgresServer.startAsync(tls: true)
        defer { server.remove() }
        let ca = try #require(server.certificate).path
        func works(_ query: String) async throws -> Bool {
            let index = try PostgresFleetIndex(try PostgresSettings(url: server.tcpURL + query, password: nil), logger: logger, timeout: .seconds(10))
            defer { Task { await index.shutdown() } }
            do {
                try await index.prepare()
                try await index.beat(RecorderHeartbeat(machine: "studio", role: "record", version: "test", state: .idle, sentAt: Date(), intervalSeconds: 10))
                return try await index.heartbeats().count == 1
            } catch let error as TapedeckError {
                #expect(!error.message.contains("hunter2"))
                return false
            }
        }
        #expect(try await works("?sslmode=require"), "a self-signed certificate: encrypted, not checked (as libpq)")
        #expect(try await works("?sslmode=prefer"))
        #expect(try await works("?sslmode=verify-full&sslrootcert=\(ca)"))
        #expect(try await works("?sslmode=verify-ca&sslrootcert=\(ca)"))
        #expect(try await !works("?sslmode=verify-full"), "an authority the system does not know is refused")
        #expect(try await !works("?sslmode=disable"), "the server takes TLS only")
        // The TLS was real: the server logged each connection it authorized as encrypted.
        #expect(server.log.contains("SSL enabled (protocol=TLS"), "\(server.log.suffix(2000))")
        let unreadable = "?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem"
        #expect(throws: TapedeckError.self) { try PostgresFleetIndex(try PostgresSettings(url: server.tcpURL + unreadable, password: nil), logger: logger) }
    }

    @Test("sync.catalog.postgres: a password in the URL, a URL without a user or database, and a bad sslmode are refused with what to write")
    func settings() throws {
        for (url, said) in [("postgres://u:hunter2@db/t", "never holds secrets"), ("postgres://db/t", "names no user"),
                            ("postgres://u@db/", "names no database"), ("postgres://u@db/t?sslmode=maybe", "sslmode=maybe"),
                            ("mysql://u@db/t", "not a PostgreSQL URL")] {
            #expect(throws: TapedeckError.self, "\(url)") { try PostgresSettings(url: url, password: nil) }
            do { _ = try PostgresSettings(url: url, password: nil) } catch let e as TapedeckError {
                #expect(e.code == .configuration && e.message.contains(said) && !e.message.contains("hunter2"), "\(url): \(e.message)")
            }
        }
        let tcp = try PostgresSettings(url: "postgresql://tapedeck@db.example:6543/fleet?sslmode=require", password: "pw")
        #expect(tcp.endpoint == .tcp(host: "db.example", port: 6543) && tcp.tls == .require && tcp.database == "fleet")
        let checked = try PostgresSettings(url: "postgres://rec@db.example/fleet?sslmode=verify-full&sslrootcert=/etc/ca.pem", password: nil)
        #expect(checked.tls == .verifyFull && checked.rootCertificate == "/etc/ca.pem")
        #expect(tcp.location == "postgres://tapedeck@db.example:6543/fleet")
        let socket = try PostgresSettings(url: "postgres://rec@/tapedeck?host=/run/postgresql", password: nil)
        #expect(socket.endpoint == .socket("/run/postgresql/.s.PGSQL.5432") && socket.location == "postgres://rec@/tapedeck?host=/run/postgresql")
        let other = try PostgresSettings(url: "postgres://rec@/tapedeck?host=/tmp/pg&port=6001", password: nil)
        #expect(other.endpoint == .socket("/tmp/pg/.s.PGSQL.6001") && other.location == "postgres://rec@/tapedeck?host=/tmp/pg&port=6001")
        #expect(throws: TapedeckError.self) { try PostgresSettings(url: "postgres://rec@/tapedeck?host=/tmp/pg&port=x", password: nil) }
    }
}
