public import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A private PulseAudio daemon for tests: a null sink named `null` (whose monitor `null.monitor`
/// records what is played into it) and the native protocol on a socket in a temporary runtime
/// folder. Nothing already running is used or touched; no sound card is needed.
///
/// Start one with ``start(sampleRate:keepSinkRunning:)``; stop it with ``stop()`` (by its process
/// id), or kill it abruptly with ``kill()`` to test server loss.
public final class PulseAudioDaemon: Sendable {
    /// The daemon's temporary runtime folder (socket, logs).
    public let runtimeDirectory: URL
    /// The address clients use: `unix:RUNTIME/native`.
    public let serverAddress: String
    /// The daemon's process id.
    public let pid: Int32
    /// Where the daemon's output goes, for diagnosing failures.
    public let logFile: URL
    /// The `pacat` playing silence into the null sink, if any.
    private let keeperPID: Int32?

    /// Environment for child processes (and for ALSA's `pulse` device in this process):
    /// `PULSE_SERVER`, plus a private `XDG_RUNTIME_DIR` and `HOME` so no user configuration leaks in.
    public var environment: [String: String] {
        ["PULSE_SERVER": serverAddress, "XDG_RUNTIME_DIR": runtimeDirectory.path, "HOME": runtimeDirectory.path,
         "PULSE_RUNTIME_PATH": runtimeDirectory.path]
    }

    private init(runtimeDirectory: URL, pid: Int32, logFile: URL, keeperPID: Int32? = nil) {
        self.runtimeDirectory = runtimeDirectory
        self.serverAddress = "unix:" + runtimeDirectory.appendingPathComponent("native").path
        self.pid = pid
        self.logFile = logFile
        self.keeperPID = keeperPID
    }

    /// Starts a daemon and waits (up to 10 s) until it accepts clients.
    ///
    /// With `keepSinkRunning` (the default), a low-latency `pacat --record` reads the null sink's
    /// monitor for the daemon's whole life, and `start` returns once it has run for 2.5 s. A fresh
    /// null sink renders up to 2 s ahead, so the first capture stream on a new daemon otherwise
    /// receives far less than real time (measured here: 81,600 frames in 3 s at 48 kHz, where the
    /// second stream gets 144,000); with the keeper settled, the first stream gets 144,000 too. The
    /// keeper only reads, so it adds nothing to what tests play or capture.
    /// - Throws: when `pulseaudio` is missing or does not come up; the message includes its log.
    /// - Thread: any. Blocks while the daemon starts.
    public static func start(sampleRate: Int = 48_000, keepSinkRunning: Bool = true) throws -> PulseAudioDaemon {
        let dir = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("tapedeck-pulse-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        chmod(dir.path, 0o700)
        let log = dir.appendingPathComponent("daemon.log")
        let socket = dir.appendingPathComponent("native").path
        guard let binary = ["/usr/bin/pulseaudio", "/usr/local/bin/pulseaudio"].first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw DaemonError("pulseaudio is not installed (apt-get install pulseaudio); the PulseAudio and ALSA tests need it.")
        }
        // Spawned directly, not through Foundation's Process: a long-lived child managed by
        // Process's monitor can deadlock other children's waitUntilExit. Inherited descriptors are
        // closed so the daemon never holds another test's pipe open.
        let arguments = [
            binary, "-n", "--daemonize=no", "--exit-idle-time=-1", "--use-pid-file=no", "--disable-shm=yes",
            "--log-target=stderr", "--log-level=notice", "--realtime=no", "--high-priority=no",
            "--load=module-null-sink sink_name=null rate=\(sampleRate) channels=2",
            "--load=module-native-protocol-unix socket=\(socket) auth-anonymous=1",
        ]
        let environment = ProcessInfo.processInfo.environment.merging(
            ["XDG_RUNTIME_DIR": dir.path, "HOME": dir.path, "PULSE_RUNTIME_PATH": dir.path,
             "PULSE_STATE_PATH": dir.path, "DBUS_SESSION_BUS_ADDRESS": "disabled:"]) { $1 }
            .filter { $0.key != "PULSE_SERVER" }
        let pid = try spawn(arguments, environment: environment, output: log.path)
        let address = "unix:" + socket
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if acceptsConnections(socket) {
                guard keepSinkRunning else { return PulseAudioDaemon(runtimeDirectory: dir, pid: pid, logFile: log) }
                let pacat = ["/usr/bin/pacat", "--record", "--device=null.monitor", "--format=s16le", "--rate=\(sampleRate)",
                             "--channels=2", "--latency-msec=20"]
                var clientEnvironment = environment
                clientEnvironment["PULSE_SERVER"] = address
                let keeper = try spawn(pacat, environment: clientEnvironment, output: "/dev/null")
                let daemon = PulseAudioDaemon(runtimeDirectory: dir, pid: pid, logFile: log, keeperPID: keeper)
                // Return once the keeper is connected and the sink has settled to the true pace.
                let listing = dir.appendingPathComponent("source-outputs.txt").path
                while Date() < deadline {
                    let pactl = try spawn(["/usr/bin/pactl", "list", "short", "source-outputs"], environment: clientEnvironment, output: listing)
                    var status: Int32 = 0
                    _ = waitpid(pactl, &status, 0)
                    if let text = try? String(contentsOfFile: listing, encoding: .utf8), text.contains("protocol-native") {
                        Thread.sleep(forTimeInterval: 2.5)
                        return daemon
                    }
                    Thread.sleep(forTimeInterval: 0.05)
                }
                daemon.stop()
                throw DaemonError("The monitor keeper never connected to the private PulseAudio daemon in \(dir.path).")
            }
            if !running(pid) { break }
            Thread.sleep(forTimeInterval: 0.05)
        }
        ChildProcess.terminate(pid, SIGKILL)
        let output = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
        throw DaemonError("The private PulseAudio daemon did not start. Its log:\n\(output)")
    }

    /// ``start(sampleRate:keepSinkRunning:)`` on a thread of its own, awaited: the task holds no
    /// thread of the cooperative pool while the daemon starts and settles (3 s or so).
    /// - Thread: any task. Suspends while the daemon starts.
    public static func startAsync(sampleRate: Int = 48_000, keepSinkRunning: Bool = true) async throws -> PulseAudioDaemon {
        try await OwnThread.run { try PulseAudioDaemon.start(sampleRate: sampleRate, keepSinkRunning: keepSinkRunning) }
    }

    private static func spawn(_ arguments: [String], environment: [String: String], output: String) throws -> pid_t {
        do {
            return try ChildProcess.start(arguments, environment: environment, output: output)
        } catch let error as ChildProcess.SpawnError {
            throw DaemonError(error.description)
        }
    }

    private static func acceptsConnections(_ path: String) -> Bool {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return false }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) == 0 }
        }
    }

    /// Whether the daemon process is still alive. - Thread: any.
    public var isRunning: Bool { Self.running(pid) }

    private static func running(_ pid: pid_t) -> Bool {
        var status: Int32 = 0
        return waitpid(pid, &status, WNOHANG) == 0
    }

    /// Stops the daemon by its process id (SIGTERM, then SIGKILL after 3 s) and removes its folder.
    /// - Thread: any. Blocks until the process is gone.
    public func stop() {
        if let keeperPID { ChildProcess.terminate(keeperPID, SIGTERM) }
        ChildProcess.terminate(pid, SIGTERM)
        try? FileManager.default.removeItem(at: runtimeDirectory)
    }

    /// Kills the daemon at once (SIGKILL), as a crash would; the folder stays for inspection.
    /// - Thread: any. Blocks until the process is gone.
    public func kill() {
        ChildProcess.terminate(pid, SIGKILL)
        // The silence player loses its server too; reap it.
        if let keeperPID { ChildProcess.terminate(keeperPID, SIGKILL) }
    }

    deinit {
        if isRunning { stop() }
    }

    public struct DaemonError: Error, CustomStringConvertible {
        public var description: String
        init(_ d: String) { description = d }
    }
}
