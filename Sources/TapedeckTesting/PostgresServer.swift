public import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A private PostgreSQL server for a test: `initdb` into a new temporary folder and `pg_ctl`
/// start it listening on a Unix socket in that folder only (no TCP port unless asked for TLS), with trust
/// authentication for its own user `tapedeck` and a database `tapedeck`. As root, the server runs
/// as the `postgres` user (PostgreSQL refuses root). Debian's `postgresql` package provides the
/// programs. ``stop(_:)`` ends it; ``kill()`` ends it as a crash would; ``remove()`` deletes all.
/// - Thread: any. Starting and stopping block while the programs run (seconds).
public final class PostgresServer: Sendable {
    public let folder: URL
    public let port: Int
    /// `postgres://tapedeck@/tapedeck?host=FOLDER&port=PORT`: the URL `sync.catalog.postgres` takes.
    public var url: String { "postgres://tapedeck@/tapedeck?host=\(folder.path)&port=\(port)" }
    private let bin: String
    private let asUser: [String]
    /// With `tls`: the certificate authority's PEM file (the server's self-signed certificate,
    /// for `localhost` and 127.0.0.1), and the URL over TCP to 127.0.0.1 (add `?sslmode=…`).
    public let certificate: URL?
    public var tcpURL: String { "postgres://tapedeck@127.0.0.1:\(port)/tapedeck" }
    private let tls: Bool

    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// The folder with Debian's PostgreSQL programs (the newest version installed), or `PATH`'s.
    static func programs() throws -> String {
        let root = "/usr/lib/postgresql"
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []).compactMap(Int.init).sorted()
        if let newest = versions.last { return "\(root)/\(newest)/bin" }
        for dir in (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":")
        where FileManager.default.isExecutableFile(atPath: "\(dir)/initdb") {
            return String(dir)
        }
        throw Failure(description: "PostgreSQL's initdb is not installed: apt-get install postgresql (scripts/install-deps installs it).")
    }

    /// - Parameter tls: also listen on 127.0.0.1 (the same port), taking TCP connections over
    ///   TLS only (a self-signed certificate made here, ``certificate``) and refusing plain ones.
    public init(tls: Bool) throws {
        bin = try Self.programs()
        self.tls = tls
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-pg-\(UUID().uuidString.prefix(8))")
        certificate = tls ? folder.appendingPathComponent("server.crt") : nil
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        asUser = getuid() == 0 ? ["runuser", "-u", "postgres", "--"] : []
        let owner = getuid() == 0 ? getpwnam("postgres").map { ($0.pointee.pw_uid, $0.pointee.pw_gid) } : nil
        if let owner { chown(folder.path, owner.0, owner.1) }
        // A port number names the socket file (.s.PGSQL.PORT) and seeds the server's System V
        // shared-memory key (and with `tls` is the TCP port). One of its own keeps servers
        // started together, or one restarted at once after a crash, from probing each other's memory.
        port = Int.random(in: 20_000...59_999)
        let data = folder.appendingPathComponent("data").path
        let initdb = try ChildProcess.run(asUser + ["\(bin)/initdb", "-D", data, "-U", "tapedeck", "--auth=trust", "-E", "UTF8", "--no-sync", "--locale=C"])
        guard initdb.status == 0 else {
            remove()
            throw Failure(description: "initdb failed (\(initdb.status)): \(initdb.output)")
        }
        if tls {
            do { try makeCertificate(data: data, owner: owner) } catch {
                remove()
                throw error
            }
        }
        try start()
        let created = try ChildProcess.run(asUser + ["\(bin)/createdb", "-h", folder.path, "-p", String(port), "-U", "tapedeck", "tapedeck"])
        guard created.status == 0 else {
            remove()
            throw Failure(description: "createdb failed (\(created.status)): \(created.output)")
        }
    }

    /// A server on a Unix socket only.
    public convenience init() throws {
        try self.init(tls: false)
    }

    /// A server made on a thread of its own: `initdb` and `pg_ctl` block for seconds, and a test
    /// task blocking meanwhile holds one of Swift's few cooperative threads, which on a loaded
    /// machine starves every other test's async work (a client's timeout then fires first).
    /// - Thread: any task. Suspends until the server accepts connections.
    public static func startAsync(tls: Bool = false) async throws -> PostgresServer {
        try await OwnThread.run { try PostgresServer(tls: tls) }
    }

    /// ``kill()`` on a thread of its own. - Thread: any task; suspends until it is gone.
    public func killAsync() async {
        _ = try? await OwnThread.run { self.kill() }
    }

    /// ``start()`` (again) on a thread of its own. - Thread: any task; suspends until it accepts
    /// connections.
    public func restartAsync() async throws {
        try await OwnThread.run { try self.start() }
    }

    /// A self-signed certificate for localhost and 127.0.0.1 (its key readable by the server
    /// only, as PostgreSQL demands), and connections from 127.0.0.1 over TLS only.
    private func makeCertificate(data: String, owner: (uid_t, gid_t)?) throws {
        let key = folder.appendingPathComponent("server.key").path
        let made = try ChildProcess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=localhost",
                                         "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout", key, "-out", folder.appendingPathComponent("server.crt").path])
        guard made.status == 0 else { throw Failure(description: "openssl could not make the certificate: \(made.output)") }
        chmod(key, 0o600)
        if let owner {
            chown(key, owner.0, owner.1)
            chown(folder.appendingPathComponent("server.crt").path, owner.0, owner.1)
        }
        let hba = "local all all trust\nhostssl all all 127.0.0.1/32 trust\nhostnossl all all 127.0.0.1/32 reject\n"
        try hba.write(toFile: data + "/pg_hba.conf", atomically: false, encoding: .utf8)
    }

    /// Starts the server (again) over the same data, waiting until it accepts connections.
    /// A start that fails (a crashed server's last processes may still be leaving on a loaded
    /// machine) is tried twice more, a second apart.
    public func start() throws {
        let data = folder.appendingPathComponent("data").path
        var options = "-k \(folder.path) -c listen_addresses=\(tls ? "127.0.0.1" : "''") -p \(port) -c fsync=off -c full_page_writes=off"
        if tls {
            options += " -c log_connections=on -c ssl=on -c ssl_cert_file=\(folder.path)/server.crt -c ssl_key_file=\(folder.path)/server.key"
        }
        var said = ""
        for attempt in 1...3 {
            let r = try ChildProcess.run(asUser + ["\(bin)/pg_ctl", "-D", data, "-o", options, "-l", folder.appendingPathComponent("server.log").path, "-w", "-t", "30", "start"])
            if r.status == 0 { return }
            said += "attempt \(attempt): pg_ctl start failed (\(r.status)): \(r.output)\n"
            Thread.sleep(forTimeInterval: 1)
        }
        // The log's end says why; the whole log can be long.
        throw Failure(description: said + "server log (end): " + String(log.suffix(1500)))
    }

    /// Stops the server: `fast` finishes as a clean shutdown, `immediate` as a crash.
    public func stop(_ mode: String = "fast") {
        let data = folder.appendingPathComponent("data").path
        _ = try? ChildProcess.run(asUser + ["\(bin)/pg_ctl", "-D", data, "-m", mode, "-w", "-t", "30", "stop"])
    }

    /// Ends the server as a crash would (`pg_ctl stop -m immediate`).
    public func kill() { stop("immediate") }

    /// Runs SQL with psql as the server's superuser. - Returns: its status and output.
    @discardableResult
    public func psql(_ sql: String, database: String = "tapedeck") throws -> (status: Int32, output: String) {
        try ChildProcess.run(asUser + ["\(bin)/psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", folder.path, "-p", String(port),
                                       "-U", "tapedeck", "-d", database, "-c", sql])
    }

    public var log: String { (try? String(contentsOf: folder.appendingPathComponent("server.log"), encoding: .utf8)) ?? "" }

    /// Stops the server and deletes its folder.
    public func remove() {
        if FileManager.default.fileExists(atPath: folder.appendingPathComponent("data/postmaster.pid").path) { stop("immediate") }
        try? FileManager.default.removeItem(at: folder)
    }

    deinit { remove() }
}
