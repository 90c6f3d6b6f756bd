public import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A private PipeWire for tests: a session bus, `pipewire` and `wireplumber` in a runtime folder
/// of their own (so nothing already running is used or touched), with two null nodes from
/// PipeWire's `support.null-audio-sink` factory: the sink ``sinkName`` (what is played to it is
/// discarded, and recording it records what it plays) and the virtual source ``sourceName``
/// (silence), the session manager's defaults. Headless, PipeWire needs the session manager:
/// without it a null node has no ports and no stream is ever linked; and WirePlumber needs a
/// session bus.
///
/// Daemons are independent of each other, so tests may run them in parallel. Start one with
/// ``start(sampleRate:)``; stop it with ``stop()``, or kill `pipewire` with ``kill()`` to test
/// losing it. Thread: any; start and stop block.
public final class PipeWireDaemon: Sendable {
    /// The daemon's socket, for `capture.pipewire.remote` (an absolute path works as a remote name).
    public let socket: String
    public let runtimeDirectory: URL
    public let sinkName = "tapedeck-test-sink"
    public let sourceName = "tapedeck-test-source"
    let pids: [pid_t]  // dbus-daemon, pipewire, wireplumber

    /// Environment for PipeWire clients started by a test (`pw-cli`, `tapedeck`): this daemon,
    /// and no other.
    public var environment: [String: String] {
        ["XDG_RUNTIME_DIR": runtimeDirectory.path, "PIPEWIRE_REMOTE": socket,
         "DBUS_SESSION_BUS_ADDRESS": "unix:path=\(runtimeDirectory.path)/bus"]
    }

    private init(socket: String, runtimeDirectory: URL, pids: [pid_t]) {
        self.socket = socket
        self.runtimeDirectory = runtimeDirectory
        self.pids = pids
    }

    /// Whether pipewire, wireplumber and dbus-daemon are installed.
    public static var isInstalled: Bool {
        ["/usr/bin/pipewire", "/usr/bin/wireplumber", "/usr/bin/dbus-daemon", "/usr/bin/pw-cli"].allSatisfy {
            FileManager.default.isExecutableFile(atPath: $0)
        }
    }

    /// Starts the daemons, creates the null sink and source at `sampleRate`, and waits (up to
    /// 15 s) until the session manager has made them the defaults.
    /// - Throws: when a program is missing or does not come up; the message includes the logs.
    public static func start(sampleRate: Int = 48_000) throws -> PipeWireDaemon {
        guard isInstalled else {
            throw PipeWireDaemonError("PipeWire is not installed (apt-get install pipewire pipewire-bin wireplumber dbus); the PipeWire tests need it.")
        }
        let runtime = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-pw-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: runtime, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let name = "tapedeck-test"
        let socket = runtime.appendingPathComponent(name).path
        var environment = ProcessInfo.processInfo.environment
        for key in ["PIPEWIRE_REMOTE", "PIPEWIRE_CORE", "PIPEWIRE_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS", "DISPLAY", "WAYLAND_DISPLAY"] {
            environment[key] = nil
        }
        environment["XDG_RUNTIME_DIR"] = runtime.path
        // The daemon's own configuration: the graph at the test's rate, nothing else allowed.
        environment["PIPEWIRE_CORE"] = name
        environment["PIPEWIRE_REMOTE"] = name
        environment["DBUS_SESSION_BUS_ADDRESS"] = "unix:path=\(runtime.path)/bus"
        // WirePlumber's state (default nodes chosen before) lives under XDG_STATE_HOME.
        environment["XDG_STATE_HOME"] = runtime.appendingPathComponent("state").path
        environment["XDG_CONFIG_HOME"] = runtime.appendingPathComponent("config").path
        // WirePlumber's own configuration, read after the system's: no sound cards, cameras or
        // Bluetooth devices of the machine in the test's graph (only the null nodes).
        let wireplumber = runtime.appendingPathComponent("config/wireplumber")
        for (folder, file, text) in [("main.lua.d", "60-tapedeck-test.lua", "alsa_monitor.enabled = false\nv4l2_monitor.enabled = false\nlibcamera_monitor.enabled = false\n"),
                                     ("bluetooth.lua.d", "60-tapedeck-test.lua", "bluez_monitor.enabled = false\n")] {
            let dir = wireplumber.appendingPathComponent(folder)
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            try text.write(to: dir.appendingPathComponent(file), atomically: true, encoding: .utf8)
        }
        var pids: [pid_t] = []
        func fail(_ what: String) -> PipeWireDaemonError {
            let logs = ["dbus", "pipewire", "wireplumber"].map { log in
                "\(log): " + ((try? String(contentsOf: runtime.appendingPathComponent("\(log).log"), encoding: .utf8)) ?? "")
            }.joined(separator: "\n")
            for pid in pids.reversed() { ChildProcess.terminate(pid, SIGKILL) }
            try? FileManager.default.removeItem(at: runtime)
            return PipeWireDaemonError("\(what). Logs:\n\(logs)")
        }
        do {
            pids.append(try ChildProcess.start(["/usr/bin/dbus-daemon", "--session", "--nofork", "--nopidfile",
                                                "--address=unix:path=\(runtime.path)/bus"],
                                               environment: environment, output: runtime.appendingPathComponent("dbus.log").path))
            try waitFor(seconds: 5) { FileManager.default.fileExists(atPath: runtime.path + "/bus") }
            pids.append(try ChildProcess.start(["/usr/bin/pipewire"], environment: environment,
                                               output: runtime.appendingPathComponent("pipewire.log").path))
            try waitFor(seconds: 5) { FileManager.default.fileExists(atPath: socket) }
            pids.append(try ChildProcess.start(["/usr/bin/wireplumber"], environment: environment,
                                               output: runtime.appendingPathComponent("wireplumber.log").path))
        } catch {
            throw fail("Could not start the private PipeWire (\(error))")
        }
        let daemon = PipeWireDaemon(socket: socket, runtimeDirectory: runtime, pids: pids)
        let client = environment.merging(daemon.environment) { $1 }
        for (node, mediaClass) in [(daemon.sinkName, "Audio/Sink"), (daemon.sourceName, "Audio/Source/Virtual")] {
            let properties = "{ factory.name=support.null-audio-sink node.name=\(node) node.description=\"Tapedeck test \(mediaClass == "Audio/Sink" ? "sink" : "source")\" media.class=\(mediaClass) object.linger=true audio.position=[FL FR] audio.rate=\(sampleRate) }"
            guard let made = try? ChildProcess.run(["/usr/bin/pw-cli", "create-node", "adapter", properties], environment: client),
                  made.status == 0 else {
                throw fail("pw-cli could not create the null node \(node)")
            }
        }
        do {
            try waitFor(seconds: 15) {
                guard let listed = try? ChildProcess.run(["/usr/bin/pw-metadata", "-n", "default"], environment: client) else { return false }
                return listed.output.contains("\"name\":\"\(daemon.sinkName)\"") && listed.output.contains("\"name\":\"\(daemon.sourceName)\"")
            }
        } catch {
            throw fail("WirePlumber did not make the null nodes the defaults")
        }
        return daemon
    }

    /// ``start(sampleRate:)`` on a thread of its own, awaited: the task holds no thread of the
    /// cooperative pool while the daemons start and the session manager picks the defaults.
    public static func startAsync(sampleRate: Int = 48_000) async throws -> PipeWireDaemon {
        try await OwnThread.run { try PipeWireDaemon.start(sampleRate: sampleRate) }
    }

    private static func waitFor(seconds: Double, _ condition: () -> Bool) throws {
        let deadline = Date().addingTimeInterval(seconds)
        while !condition() {
            guard Date() < deadline else { throw PipeWireDaemonError("timed out") }
            Thread.sleep(forTimeInterval: 0.05)
        }
    }

    /// Runs `pw-cli` against this daemon, e.g. `["destroy", "42"]`. Returns its output.
    @discardableResult
    public func cli(_ arguments: [String]) throws -> String {
        try ChildProcess.run(["/usr/bin/pw-cli"] + arguments, environment: ProcessInfo.processInfo.environment.merging(environment) { $1 }).output
    }

    /// ``cli(_:)`` awaited without holding a thread while `pw-cli` runs.
    @discardableResult
    public func cliAsync(_ arguments: [String]) async throws -> String {
        try await ChildProcess.runAsync(["/usr/bin/pw-cli"] + arguments, environment: ProcessInfo.processInfo.environment.merging(environment) { $1 }).output
    }

    /// The registry id of the node named `name`, if it exists.
    public func nodeID(_ name: String) throws -> UInt32? {
        Self.nodeID(name, in: try cli(["ls", "Node"]))
    }

    /// ``nodeID(_:)`` awaited without holding a thread while `pw-cli` runs.
    public func nodeIDAsync(_ name: String) async throws -> UInt32? {
        Self.nodeID(name, in: try await cliAsync(["ls", "Node"]))
    }

    /// The id of the node named `name` in `pw-cli ls Node`'s `output`.
    private static func nodeID(_ name: String, in output: String) -> UInt32? {
        var id: UInt32?
        for line in output.split(separator: "\n") {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.hasPrefix("id ") {
                id = UInt32(trimmed.dropFirst(3).prefix { $0.isNumber })
            } else if trimmed == "node.name = \"\(name)\"" {
                return id
            }
        }
        return nil
    }

    /// Whether `pipewire` is still alive.
    public var isRunning: Bool {
        reaped.withLock { reaped in
            if reaped.contains(pids[1]) { return false }
            var status: Int32 = 0
            if waitpid(pids[1], &status, WNOHANG) == 0 { return true }
            reaped.insert(pids[1])
            return false
        }
    }

    /// Kills `pipewire` at once (SIGKILL), as a crash would. Call ``stop()`` afterwards.
    public func kill() {
        reaped.withLock { reaped in
            guard !reaped.contains(pids[1]) else { return }
            ChildProcess.terminate(pids[1], SIGKILL)
            reaped.insert(pids[1])
        }
    }

    /// Stops the session manager, the daemon and the bus and removes the runtime folder. A
    /// process already reaped is not signalled again (its id may belong to another by now).
    public func stop() {
        reaped.withLock { reaped in
            for pid in pids.reversed() where !reaped.contains(pid) {
                ChildProcess.terminate(pid, SIGTERM)
                reaped.insert(pid)
            }
        }
        try? FileManager.default.removeItem(at: runtimeDirectory)
    }

    private let reaped = Mutex<Set<pid_t>>([])
}

/// A private PipeWire that could not be started, with its logs.
public struct PipeWireDaemonError: Error, CustomStringConvertible {
    public var description: String
    public init(_ d: String) { description = d }
}
