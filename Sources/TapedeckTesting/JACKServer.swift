public import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A private JACK server for tests: `jackd -d dummy` (no sound card) under a server name of its
/// own, so nothing already running is used or touched. Its `system:capture_N` ports deliver
/// silence and its `system:playback_N` ports discard; tests connect clients to each other.
///
/// One runs at a time in a test process (``start(sampleRate:bufferFrames:channels:)`` waits for
/// the one before to stop), always under the same name: JACK's registry of servers has eight
/// slots and reclaims a killed server's slot only for a server of the same name, so killed
/// servers of other names would fill it for good. libjack also keeps one server's state per
/// process, so tests in parallel could not use two servers anyway.
///
/// Start one with ``start(sampleRate:bufferFrames:channels:)``; stop it with ``stop()``, or kill
/// it with ``kill()`` to test server loss. Thread: any; start and stop block.
public final class JACKServer: Sendable {
    /// The server's name (`JACK_DEFAULT_SERVER`, `capture.jack.server`).
    public let name: String
    public let pid: Int32
    public let sampleRate: Int
    public let bufferFrames: Int
    /// Where jackd's output goes, for diagnosing failures.
    public let logFile: URL

    /// Environment for JACK clients started by a test (`jack_lsp`, `tapedeck`): the server's name,
    /// and no server started on demand.
    public var environment: [String: String] {
        ["JACK_DEFAULT_SERVER": name, "JACK_NO_START_SERVER": "1", "JACK_NO_AUDIO_RESERVATION": "1"]
    }

    private init(name: String, pid: Int32, sampleRate: Int, bufferFrames: Int, logFile: URL) {
        self.name = name
        self.pid = pid
        self.sampleRate = sampleRate
        self.bufferFrames = bufferFrames
        self.logFile = logFile
    }

    /// Whether `jackd` is installed (Debian's jackd2).
    public static var isInstalled: Bool { FileManager.default.isExecutableFile(atPath: "/usr/bin/jackd") }

    /// Starts `jackd --no-realtime -n NAME -d dummy` and waits (up to 10 s) until its ports exist.
    /// - Throws: when jackd is missing or does not come up; the message includes its log.
    public static func start(sampleRate: Int = 48_000, bufferFrames: Int = 256, channels: Int = 2) throws -> JACKServer {
        guard isInstalled else {
            throw JACKServerError("jackd is not installed (apt-get install jackd2); the JACK tests need it.")
        }
        Self.acquire()
        // A name of this process's own: a server a crashed test run left behind (under the old
        // process's name) never stands in this one's way.
        let name = "tapedeck-test-\(getpid())"
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("\(name).log")
        let environment = ProcessInfo.processInfo.environment.merging(["JACK_NO_AUDIO_RESERVATION": "1"]) { $1 }
        let arguments = ["/usr/bin/jackd", "--no-realtime", "-n", name, "-d", "dummy", "-r", "\(sampleRate)",
                         "-p", "\(bufferFrames)", "-C", "\(channels)", "-P", "\(channels)"]
        let pid: Int32
        do {
            pid = try ChildProcess.start(arguments, environment: environment, output: log.path)
        } catch {
            Self.release()
            throw JACKServerError("Could not start jackd: \(error)")
        }
        let server = JACKServer(name: name, pid: pid, sampleRate: sampleRate, bufferFrames: bufferFrames, logFile: log)
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if let listed = try? ChildProcess.run(["/usr/bin/jack_lsp", "-s", name], environment: environment.merging(server.environment) { $1 }),
               listed.status == 0, listed.output.contains("system:capture_1") {
                return server
            }
            if !Self.running(pid) { break }
            Thread.sleep(forTimeInterval: 0.05)
        }
        server.kill()
        let output = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
        server.stop()
        throw JACKServerError("The private JACK server did not start. Its log:\n\(output)")
    }

    /// ``start(sampleRate:bufferFrames:channels:)`` on a thread of its own, awaited: the task holds
    /// no thread of the cooperative pool while it waits for the server before to stop and for this
    /// one's ports.
    public static func startAsync(sampleRate: Int = 48_000, bufferFrames: Int = 256, channels: Int = 2) async throws -> JACKServer {
        try await OwnThread.run { try JACKServer.start(sampleRate: sampleRate, bufferFrames: bufferFrames, channels: channels) }
    }

    /// Whether the server process is still alive.
    public var isRunning: Bool { Self.running(pid) }

    private static func running(_ pid: pid_t) -> Bool {
        var status: Int32 = 0
        return waitpid(pid, &status, WNOHANG) == 0
    }

    /// Stops the server (SIGTERM, then SIGKILL after 3 s) and removes its log; the next server
    /// may start. Call it once, also after ``kill()``.
    public func stop() {
        ChildProcess.terminate(pid, SIGTERM)
        removeLeftovers()
        try? FileManager.default.removeItem(at: logFile)
        if stopped.withLock({ let was = $0; $0 = true; return !was }) { Self.release() }
    }

    /// Kills the server at once (SIGKILL), as a crash would.
    public func kill() {
        ChildProcess.terminate(pid, SIGKILL)
        removeLeftovers()
    }

    private let stopped = Mutex(false)
    private static let slot = Mutex(false)

    private static func acquire() {
        while !slot.withLock({ busy in
            if busy { return false }
            busy = true
            return true
        }) {
            Thread.sleep(forTimeInterval: 0.05)
        }
    }

    private static func release() {
        slot.withLock { $0 = false }
    }

    /// What a killed server leaves in /dev/shm (its segments and semaphores, named after it).
    private func removeLeftovers() {
        let shm = URL(fileURLWithPath: "/dev/shm")
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: shm.path)) ?? [] where entry.contains(name) {
            try? FileManager.default.removeItem(at: shm.appendingPathComponent(entry))
        }
    }

    deinit {
        if !stopped.withLock({ $0 }) { stop() }
    }
}

/// A JACK server that could not be started, with its log.
public struct JACKServerError: Error, CustomStringConvertible {
    public var description: String
    init(_ d: String) { description = d }
}
