public import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A private Icecast server for tests (Debian's `icecast2`), on loopback on a port of its own,
/// with its configuration, logs and process in a temporary folder, and the sources that feed it:
/// `ffmpeg` (test side only) encoding a WAV file in real time to a mount. Run as root, the server
/// drops to `nobody` (icecast refuses to run as root). Every member blocks.
public final class IcecastServer: @unchecked Sendable {
    public let port: Int
    public let sourcePassword = "tapedeck-source"
    let folder: URL
    private var pid: pid_t?
    private var feeders: [pid_t] = []

    /// Starts the server and waits until it answers (at most 20 s).
    public init(port: Int? = nil) throws {
        self.port = try port ?? S3Server.freePort()
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-icecast-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder.appendingPathComponent("log"), withIntermediateDirectories: true)
        chmod(folder.path, 0o777)
        chmod(folder.appendingPathComponent("log").path, 0o777)
        try start()
    }

    /// ``init(port:)`` on a thread of its own, awaited.
    public static func startAsync(port: Int? = nil) async throws -> IcecastServer {
        try await OwnThread.run { try IcecastServer(port: port) }
    }

    /// `http://127.0.0.1:PORT/MOUNT`.
    public func url(_ mount: String) -> String { "http://127.0.0.1:\(port)/\(mount)" }

    private var configuration: String {
        let owner = getuid() == 0 ? "<changeowner><user>nobody</user><group>nogroup</group></changeowner>" : ""
        return """
        <icecast>
          <location>test</location><admin>test@localhost</admin>
          <limits><clients>50</clients><sources>10</sources><queue-size>1048576</queue-size><client-timeout>30</client-timeout>
            <header-timeout>15</header-timeout><source-timeout>5</source-timeout><burst-size>0</burst-size></limits>
          <authentication><source-password>\(sourcePassword)</source-password><admin-user>admin</admin-user><admin-password>\(sourcePassword)</admin-password></authentication>
          <hostname>127.0.0.1</hostname>
          <listen-socket><port>\(port)</port><bind-address>127.0.0.1</bind-address></listen-socket>
          <fileserve>0</fileserve>
          <paths><basedir>\(folder.path)</basedir><logdir>\(folder.path)/log</logdir>
            <webroot>/usr/share/icecast2/web</webroot><adminroot>/usr/share/icecast2/admin</adminroot></paths>
          <logging><accesslog>access.log</accesslog><errorlog>error.log</errorlog><loglevel>3</loglevel></logging>
          <mount><mount-name>/titles</mount-name><mp3-metadata-interval>2048</mp3-metadata-interval></mount>
          <security><chroot>0</chroot>\(owner)</security>
        </icecast>
        """
    }

    private func start() throws {
        guard access("/usr/bin/icecast2", X_OK) == 0 else {
            throw ChildProcess.SpawnError(description: "icecast2 is not installed: run scripts/install-deps.")
        }
        let config = folder.appendingPathComponent("icecast.xml")
        try configuration.write(to: config, atomically: true, encoding: .utf8)
        chmod(config.path, 0o644)
        pid = try ChildProcess.start(["/usr/bin/icecast2", "-c", config.path], environment: ProcessInfo.processInfo.environment,
                                     output: folder.appendingPathComponent("server.out").path)
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            if S3Server.answers(port) { return }
            Thread.sleep(forTimeInterval: 0.05)
        }
        throw ChildProcess.SpawnError(description: "icecast2 did not answer on port \(port) within 20 s: \(log)")
    }

    /// What the server logged.
    public var log: String {
        ((try? String(contentsOf: folder.appendingPathComponent("server.out"), encoding: .utf8)) ?? "")
            + ((try? String(contentsOf: folder.appendingPathComponent("log/error.log"), encoding: .utf8)) ?? "")
    }

    /// ffmpeg's arguments for each codec a test feeds: encoder options, container, content type.
    public static let codecs: [String: [String]] = [
        "opus": ["-c:a", "libopus", "-b:a", "160k", "-f", "ogg", "-content_type", "audio/ogg"],
        "vorbis": ["-c:a", "libvorbis", "-q:a", "8", "-f", "ogg", "-content_type", "audio/ogg"],
        "flac": ["-c:a", "flac", "-f", "ogg", "-content_type", "audio/ogg"],
        "mp3": ["-c:a", "libmp3lame", "-b:a", "256k", "-f", "mp3", "-content_type", "audio/mpeg"],
    ]

    /// Starts ffmpeg sending `wav` (looped, in real time) encoded as `codec` (a key of
    /// ``codecs``) to `mount`, and waits until the mount is live (at most 15 s).
    public func feed(_ wav: URL, codec: String, mount: String) throws {
        let arguments = ["ffmpeg", "-nostdin", "-hide_banner", "-loglevel", "error", "-re", "-stream_loop", "-1", "-i", wav.path]
            + (Self.codecs[codec] ?? []) + ["icecast://source:\(sourcePassword)@127.0.0.1:\(port)/\(mount)"]
        let feeder = try ChildProcess.start(arguments, environment: ProcessInfo.processInfo.environment,
                                            output: folder.appendingPathComponent("ffmpeg-\(mount).log").path)
        feeders.append(feeder)
        let deadline = Date().addingTimeInterval(15)
        while Date() < deadline {
            if status.contains("/\(mount)\"") { return }
            Thread.sleep(forTimeInterval: 0.1)
        }
        throw ChildProcess.SpawnError(description: "ffmpeg's \(codec) source did not reach mount \(mount) within 15 s: \(log)")
    }

    /// The server's `status-json.xsl` (the mounts that are live), or "" when it does not answer.
    public var status: String { fetch("/status-json.xsl") }

    /// Sets the ICY title (`StreamTitle`) of an MP3 `mount` through the admin interface.
    /// - Returns: whether the server took it.
    @discardableResult
    public func setTitle(_ title: String, mount: String) -> Bool {
        let song = title.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? title
        let auth = Data("admin:\(sourcePassword)".utf8).base64EncodedString()
        return fetch("/admin/metadata?mount=/\(mount)&mode=updinfo&song=\(song)", authorization: "Basic \(auth)").contains("200 OK")
    }

    /// The answer to `GET path` (head and body), or "" when the server does not answer.
    func fetch(_ path: String, authorization: String? = nil) -> String {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return "" }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
        guard connected else { return "" }
        let auth = authorization.map { "Authorization: \($0)\r\n" } ?? ""
        let request = Array("GET \(path) HTTP/1.0\r\nHost: 127.0.0.1\r\n\(auth)\r\n".utf8)
        _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
        var answer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            answer += chunk[0..<n]
        }
        return String(decoding: answer, as: UTF8.self)
    }

    /// Kills the server (SIGKILL) and its feeders, as a crash would.
    public func kill() {
        for f in feeders { ChildProcess.terminate(f, SIGKILL) }
        feeders = []
        if let pid { ChildProcess.terminate(pid, SIGKILL) }
        pid = nil
    }

    /// Starts the server again on the same port (feeders are started anew by the test).
    public func restart() throws {
        kill()
        try start()
    }

    deinit {
        kill()
        try? FileManager.default.removeItem(at: folder)
    }
}
