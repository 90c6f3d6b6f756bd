public import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Starting programs from tests without Foundation's `Process`, whose `waitUntilExit` waits for
/// as long as any long-lived descendant (a daemon the child started: a PulseAudio server, a
/// tmux server) runs. `posix_spawnp` with stdin from /dev/null, stdout and stderr to a file, and
/// every other descriptor closed. Every member blocks only where it says.
public enum ChildProcess {
    public struct SpawnError: Error, CustomStringConvertible {
        public var description: String
    }

    /// Starts `arguments` (the program is looked up in `PATH`) and returns its process id.
    /// - Thread: any. Does not wait for the program.
    public static func start(_ arguments: [String], environment: [String: String], output: String) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        let open = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        for fd in open.compactMap(Int32.init) where fd > 2 {
            posix_spawn_file_actions_addclose(&actions, fd)
        }
        let argv = arguments.map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var pid: pid_t = 0
        let status = posix_spawnp(&pid, arguments[0], &actions, nil, argv, envp)
        guard status == 0 else {
            throw SpawnError(description: "Could not start \(arguments[0]): \(String(cString: strerror(status))).")
        }
        return pid
    }

    /// Runs `arguments` to its end.
    /// - Returns: its exit status (128 + the signal if one ended it) and what it wrote.
    /// - Thread: any. Blocks until the program ends (not its descendants).
    public static func run(_ arguments: [String],
                           environment: [String: String] = ProcessInfo.processInfo.environment) throws -> (status: Int32, output: String) {
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("child-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: log) }
        let pid = try start(arguments, environment: environment, output: log.path)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        return (exitCode(status), (try? String(contentsOf: log, encoding: .utf8)) ?? "")
    }

    /// Runs `arguments` to its end, as ``run(_:environment:)`` does, without holding a thread
    /// while it runs: the task sleeps 20 ms between checks for the program's end.
    /// - Returns: its exit status (128 + the signal if one ended it) and what it wrote.
    /// - Throws: when the program cannot be started, or the task is cancelled while it runs (the
    ///   program is then killed and reaped).
    /// - Thread: any task. Suspends until the program ends (not its descendants).
    public static func runAsync(_ arguments: [String],
                                environment: [String: String] = ProcessInfo.processInfo.environment) async throws -> (status: Int32, output: String) {
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("child-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: log) }
        let pid = try start(arguments, environment: environment, output: log.path)
        var status: Int32 = 0
        while true {
            var polled: Int32 = 0
            let r = waitpid(pid, &polled, WNOHANG)
            if r == pid {
                status = polled
                break
            }
            if r < 0 {
                if errno == EINTR { continue }
                break  // not a child of ours any more: as run(_:environment:), status 0
            }
            do {
                try await Task.sleep(for: .milliseconds(20))
            } catch {
                _ = kill(pid, SIGKILL)
                while waitpid(pid, &polled, 0) < 0 && errno == EINTR {}
                throw error
            }
        }
        return (exitCode(status), (try? String(contentsOf: log, encoding: .utf8)) ?? "")
    }

    /// A `waitpid` status as a shell gives it: the exit status, or 128 + the signal that ended it.
    private static func exitCode(_ status: Int32) -> Int32 {
        (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    }

    /// Sends `signal` to `pid` and reaps it; SIGKILL after 3 s if it is still there.
    /// - Thread: any. Blocks until the process is gone.
    public static func terminate(_ pid: pid_t, _ signal: Int32) {
        _ = kill(pid, signal)
        let deadline = Date().addingTimeInterval(3)
        while Date() < deadline {
            var status: Int32 = 0
            let r = waitpid(pid, &status, WNOHANG)
            if r == pid || r < 0 { return }
            Thread.sleep(forTimeInterval: 0.02)
        }
        _ = kill(pid, SIGKILL)
        var status: Int32 = 0
        _ = waitpid(pid, &status, 0)
    }

    /// Starts a server that writes the port it listens on to `portFile` once it does (its
    /// output to `output`), and waits up to 20 s for it. - Throws: when it does not start, with
    /// what it said. - Thread: any. Blocks until then.
    public static func startServer(_ arguments: [String], portFile: URL, output: URL, what: String) throws -> (pid: pid_t, port: Int) {
        try? FileManager.default.removeItem(at: portFile)
        let pid = try start(arguments, environment: ProcessInfo.processInfo.environment, output: output.path)
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            if let text = try? String(contentsOf: portFile, encoding: .utf8), let port = Int(text) { return (pid, port) }
            Thread.sleep(forTimeInterval: 0.05)
        }
        terminate(pid, SIGTERM)
        throw SpawnError(description: "\(what) did not start: \((try? String(contentsOf: output, encoding: .utf8)) ?? "")")
    }
}
