import Foundation
import Synchronization
import TapedeckTesting
import Testing

/// Runs the built `tapedeck` binary against a temporary library with `Configuration/ci.yaml`.
struct CLIHarness {
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The `tapedeck` executable next to the test bundle.
    static var binary: URL {
        get throws { try BuiltTapedeck.url }
    }

    struct CLIError: Error, CustomStringConvertible {
        var description: String
        init(_ d: String) { description = d }
    }

    struct Result {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    let library: URL
    let config: String
    /// The storage backend: `directory` or `bundle`.
    let storage: String
    var extraEnvironment: [String: String] = [:]
    /// A program (and its arguments) that runs `tapedeck` for the test, e.g. one that sets a
    /// umask or traces it; empty to run `tapedeck` directly.
    var launcher: [String] = []
    /// Leave the library to Tapedeck's default (no path in the environment).
    var usesDefaultLibrary = false
    /// Run as on a machine with no config file: no $TAPEDECK_CONFIG, and $XDG_CONFIG_HOME an
    /// empty folder of the test's own.
    var withoutConfig = false
    /// `$XDG_CACHE_HOME` of the commands it runs: a folder of its own in the temporary folder.
    var cacheHome = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-e2e-cache-\(UUID().uuidString)")

    init(config: String = "ci.yaml", storage: String = "directory", library: URL? = nil) throws {
        self.library = library ?? FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-e2e-\(UUID().uuidString)")
        self.config = Self.packageRoot.appendingPathComponent("Configuration/\(config)").path
        self.storage = storage
    }

    /// A harness whose config is the file at `configFile` (a test's own).
    init(configFile: URL, library: URL? = nil) {
        self.library = library ?? FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-e2e-\(UUID().uuidString)")
        config = configFile.path
        storage = "directory"
    }

    var environment: [String: String] {
        var env = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("TAPEDECK_") }
        if usesDefaultLibrary {
            if storage != "directory" { env["TAPEDECK_STORAGE_BACKEND"] = storage }
        } else if storage == "directory" {
            env["TAPEDECK_STORAGE_DIRECTORY_PATH"] = library.path
        } else {
            env["TAPEDECK_STORAGE_BACKEND"] = storage
            env["TAPEDECK_STORAGE_\(storage.uppercased())_PATH"] = library.path
        }
        // Caches (waveforms, remote manifests) of the test's own: not beside the library, whose
        // folder's neighbours some tests check are untouched.
        env["XDG_CACHE_HOME"] = cacheHome.path
        if withoutConfig {
            env["XDG_CONFIG_HOME"] = library.path + "-config"
        } else {
            env["TAPEDECK_CONFIG"] = config
        }
        for (k, v) in extraEnvironment { env[k] = v }
        return env
    }

    /// `tapedeck ARGS` made ready to run (stdout and stderr to new files of their own), not started.
    private func process(_ args: [String]) throws -> (Process, URL, URL) {
        let p = Process()
        // The stop signals start at their default actions whatever the test runner inherited
        // (a runner started as a script's background job ignores SIGINT, and Process passes an
        // ignored signal on): `tapedeck` leaves a signal it was started with ignored alone.
        // env execs, so the process id is the command's.
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["--default-signal=INT,TERM,HUP"] + launcher + [try Self.binary.path] + args
        p.environment = environment
        let (out, err) = try Self.outputFiles()
        p.standardOutput = try FileHandle(forWritingTo: out)
        p.standardError = try FileHandle(forWritingTo: err)
        p.standardInput = FileHandle.nullDevice
        return (p, out, err)
    }

    /// Two new empty files in the temporary folder, for a process's stdout and stderr.
    private static func outputFiles() throws -> (URL, URL) {
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("out-\(UUID().uuidString)")
        let err = FileManager.default.temporaryDirectory.appendingPathComponent("err-\(UUID().uuidString)")
        _ = FileManager.default.createFile(atPath: out.path, contents: nil)
        _ = FileManager.default.createFile(atPath: err.path, contents: nil)
        return (out, err)
    }

    /// Starts `tapedeck ARGS` and returns the process (stdout and stderr to files). Does not wait:
    /// ``waitForExit(_:limit:sourceLocation:)`` does.
    func start(_ args: [String]) throws -> (Process, URL, URL) {
        let (p, out, err) = try process(args)
        try p.run()
        return (p, out, err)
    }

    @discardableResult
    func run(_ args: String...) async throws -> Result { try await run(args) }

    /// Runs `tapedeck ARGS` to its end (a hang is ended after 300 s, see
    /// ``runToExit(_:limit:sourceLocation:)``), awaited without holding a thread.
    func run(_ args: [String]) async throws -> Result {
        let (p, out, err) = try process(args)
        defer {
            try? FileManager.default.removeItem(at: out)
            try? FileManager.default.removeItem(at: err)
        }
        try await Self.runToExit(p)
        return Result(status: p.terminationStatus, stdout: try String(contentsOf: out, encoding: .utf8),
                      stderr: try String(contentsOf: err, encoding: .utf8))
    }

    /// The first sample of a 16-bit audio file (decoded by sox) that is not the null backend's
    /// frame counter from sample `first` on (sample k of the stream is k, wrapped to 16 bits); `nil`
    /// when every sample is.
    static func firstWrongCounterSample(_ path: String, from first: Int) async throws -> Int? {
        let raw = FileManager.default.temporaryDirectory.appendingPathComponent("counter-\(UUID().uuidString).raw").path
        defer { try? FileManager.default.removeItem(atPath: raw) }
        let r = try await tool("sox", [path, "-t", "raw", "-e", "signed", "-b", "16", "-L", raw])
        guard r.status == 0 else { return -1 }
        let data = try Data(contentsOf: URL(fileURLWithPath: raw))
        return data.withUnsafeBytes { b in
            (0..<(data.count / 2)).first { b.loadUnaligned(fromByteOffset: $0 * 2, as: Int16.self) != Int16(truncatingIfNeeded: first + $0) }
        }
    }

    func listJSON() async throws -> [[String: Any]] {
        let r = try await run("list", "--json")
        #expect(r.status == 0, "list failed: \(r.stderr)")
        return try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [[String: Any]] ?? []
    }

    /// The `record --json` report that a recording ended by a stop signal wrote to `out`: its take,
    /// the take's seconds and the recording's wall time. Expects the report to say `stopped` and
    /// the take to be `complete`.
    static func stoppedRecording(_ out: URL, sourceLocation: SourceLocation = #_sourceLocation) throws
        -> (take: [String: Any], seconds: Double, wall: Double) {
        let report = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: out)) as? [String: Any],
                                  sourceLocation: sourceLocation)
        let take = try #require(report["take"] as? [String: Any], sourceLocation: sourceLocation)
        #expect(report["end"] as? String == "stopped", sourceLocation: sourceLocation)
        #expect(take["state"] as? String == "complete", sourceLocation: sourceLocation)
        return (take, try #require(take["seconds"] as? Double, sourceLocation: sourceLocation),
                try #require(report["wallSeconds"] as? Double, sourceLocation: sourceLocation))
    }

    /// Bytes in the largest pending (still recording) audio file in the library; 0 when none.
    func pendingBytes() -> Int {
        let sessions = library.appendingPathComponent("sessions")
        let folders = (try? FileManager.default.contentsOfDirectory(at: sessions, includingPropertiesForKeys: nil)) ?? []
        return folders.flatMap { (try? FileManager.default.contentsOfDirectory(at: $0, includingPropertiesForKeys: [.fileSizeKey])) ?? [] }
            .filter { $0.lastPathComponent.contains(".pending.") }
            .compactMap { try? $0.resourceValues(forKeys: [.fileSizeKey]).fileSize }.max() ?? 0
    }

    /// Waits (up to `timeout` s) until a recording's pending file exists: the take's row is
    /// committed and its writer has started.
    func waitForPendingFile(timeout: Double = 10) async throws -> Bool {
        try await Self.wait(timeout: timeout) {
            (try? FileManager.default.subpathsOfDirectory(atPath: library.path).contains { $0.contains(".pending.") }) == true
        }
    }

    func takes() async throws -> [[String: Any]] {
        try await listJSON().flatMap { ($0["takes"] as? [[String: Any]]) ?? [] }
    }

    /// Checks with python's wave module that WAV `recorded` holds WAV `played` unchanged: every
    /// recorded frame that is not silence continues a run of the played frames exactly (silence
    /// is what a cycle a loaded server skipped leaves; the runs go on after it), at least
    /// `atLeast` frames were copied, and at most `stray` frames are neither. Status 0 when so.
    static func copiedRuns(played: String, recorded: String, atLeast: Int, stray allowed: Int = 0) async throws -> Result {
        try await tool("python3", ["-c", """
            import sys, wave
            def frames(p):
                w = wave.open(p, "rb")
                data = w.readframes(w.getnframes())
                size = w.getsampwidth() * w.getnchannels()
                return [data[i:i + size] for i in range(0, len(data), size)]
            played, recorded = frames(sys.argv[1]), frames(sys.argv[2])
            silent = bytes(len(played[0]))
            first = {}
            for i, f in enumerate(played):
                first.setdefault(f, i)
            matched = stray = i = 0
            at = None
            while i < len(recorded):
                f = recorded[i]
                if f == silent:
                    at = None; i += 1; continue
                if at is not None and at < len(played) and played[at] == f:
                    matched += 1; at += 1; i += 1; continue
                n = min(8, len(recorded) - i)
                p = first.get(f)
                if p is not None and played[p:p + n] == recorded[i:i + n]:
                    at = p; continue
                stray += 1; at = None; i += 1
            assert stray <= int(sys.argv[4]) and matched >= int(sys.argv[3]), f"{matched} frames copied, {stray} stray"
            print(f"{matched} frames identical")
            """, played, recorded, "\(atLeast)", "\(allowed)"])
    }

    /// Runs a tool (sox, python3, …) and returns its status and output, awaited without holding a thread.
    static func tool(_ name: String, _ args: [String]) async throws -> Result {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = [name] + args
        let (out, err) = try outputFiles()
        defer {
            try? FileManager.default.removeItem(at: out)
            try? FileManager.default.removeItem(at: err)
        }
        p.standardOutput = try FileHandle(forWritingTo: out)
        p.standardError = try FileHandle(forWritingTo: err)
        try await runToExit(p, limit: nil)
        return Result(status: p.terminationStatus, stdout: String(decoding: try Data(contentsOf: out), as: UTF8.self),
                      stderr: String(decoding: try Data(contentsOf: err), as: UTF8.self))
    }

    /// ffmpeg's EBU R128 integrated loudness (LUFS) and true peak (dBTP) of a file: an
    /// implementation independent of Tapedeck's (libebur128).
    static func ffmpegLoudness(_ path: String) async throws -> (integrated: Double, truePeak: Double) {
        let r = try await tool("ffmpeg", ["-nostats", "-hide_banner", "-i", path, "-af", "ebur128=peak=true", "-f", "null", "-"])
        let summary = r.stderr.components(separatedBy: "Summary:").last ?? ""
        func value(_ label: String) -> Double {
            let line = summary.split(separator: "\n").first { $0.trimmingCharacters(in: .whitespaces).hasPrefix(label) } ?? ""
            return line.split(separator: " ").compactMap { Double($0) }.first ?? .nan
        }
        return (value("I:"), value("Peak:"))
    }

    /// Runs `p` (made ready, not started) and waits for it to exit without holding a thread: the
    /// termination handler, set before the process starts, resumes the wait. With a `limit`, a
    /// command still running after `limit` seconds is a hang (see ``recordHang``): recorded with
    /// its threads' stacks, killed, and waited for.
    static func runToExit(_ p: Process, limit: Double? = 300, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let end = ProcessExit()
        p.terminationHandler = { _ in end.exited() }
        try p.run()
        if let limit {
            if await !end.wait(limit: limit) {
                await recordHang(p, limit: limit, sourceLocation: sourceLocation) { await end.wait() }
            }
        } else {
            await end.wait()
        }
        p.waitUntilExit()  // returns at once: the process has exited; this only lets go of its run loop source
    }

    /// Waits for `p` (from ``start(_:)``) to exit, for at most `limit` seconds, polling every 20 ms
    /// without holding a thread: a command that is still running by then is a hang, and a test that
    /// waits for it forever would hold up the whole run. It is recorded as an issue with the
    /// threads' stacks (gdb, when it is there), then killed.
    /// - Throws: only when the task is cancelled.
    static func waitForExit(_ p: Process, limit: Double = 300, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let exited = try await wait(timeout: limit) { !p.isRunning }
        guard exited else {
            try await recordHang(p, limit: limit, sourceLocation: sourceLocation) { try await untilExited(p) }
            return
        }
        p.waitUntilExit()  // returns at once: the process has exited
    }

    /// Waits, as long as it takes, until `p` (from ``start(_:)``) has exited, polling every 20 ms
    /// without holding a thread.
    static func untilExited(_ p: Process) async throws {
        while p.isRunning { try await Task.sleep(for: .milliseconds(20)) }
        p.waitUntilExit()  // returns at once: the process has exited
    }

    /// A command still running after `limit` seconds: its threads' stacks (gdb, when it is there),
    /// then SIGKILL, then `exited` (waits for the end), then the issue, with the stacks.
    private static func recordHang(_ p: Process, limit: Double, sourceLocation: SourceLocation,
                                   exited: () async throws -> Void) async rethrows {
        let stacks = (try? await tool("gdb", ["-p", "\(p.processIdentifier)", "-batch", "-ex", "thread apply all bt"]))?.stdout ?? "(no gdb)"
        kill(p.processIdentifier, SIGKILL)
        try await exited()
        Issue.record("\((p.arguments ?? []).joined(separator: " ")) was still running after \(Int(limit)) s, and was killed. Its threads:\n\(stacks.suffix(20_000))",
                     sourceLocation: sourceLocation)
    }

    /// Runs `body` while `p` (from ``start(_:)``) runs; then ends `p` (SIGTERM, if it is still
    /// running) and waits for it to exit (``waitForExit(_:limit:sourceLocation:)``), also when
    /// `body` throws: a `defer` that can await.
    static func stopping(_ p: Process, sourceLocation: SourceLocation = #_sourceLocation, after body: () async throws -> Void) async throws {
        do {
            try await body()
        } catch {
            if p.isRunning { p.terminate() }
            try? await waitForExit(p, sourceLocation: sourceLocation)
            throw error
        }
        if p.isRunning { p.terminate() }
        try await waitForExit(p, sourceLocation: sourceLocation)
    }

    /// Ends the tmux server of `socket` (`tmux -L SOCKET`), its panes' programs and its socket,
    /// and waits for it (milliseconds): a kill left to a detached thread may never run once the
    /// test process ends, and a server whose pane holds an interactive shell was seen to outlive
    /// `kill-server`; so the panes' process groups and the server are killed outright too.
    static func killTmuxServer(_ socket: String) {
        let server = (try? ChildProcess.run(["tmux", "-L", socket, "display-message", "-p", "#{pid} #{socket_path}"]))?.output ?? ""
        let panes = (try? ChildProcess.run(["tmux", "-L", socket, "list-panes", "-a", "-F", "#{pane_pid}"]))?.output ?? ""
        _ = try? ChildProcess.run(["tmux", "-L", socket, "kill-server"])
        for pane in panes.split(whereSeparator: \.isNewline).compactMap({ pid_t($0) }) where pane > 1 {
            kill(-pane, SIGKILL)
            kill(pane, SIGKILL)
        }
        let parts = server.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: " ", maxSplits: 1).map(String.init)
        if let pid = parts.first.flatMap({ pid_t($0) }), pid > 1 { kill(pid, SIGKILL) }
        if parts.count == 2, parts[1].hasPrefix("/") { unlink(parts[1]) }
    }

    /// Waits until `condition` holds, checking every 20 ms, up to `timeout` seconds; the task
    /// sleeps in between, holding no thread.
    /// - Throws: only when the task is cancelled.
    static func wait(timeout: Double, _ condition: () async -> Bool) async throws -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if await condition() { return true }
            try await Task.sleep(for: .milliseconds(20))
        }
        return await condition()
    }
}

/// The end of a process, awaited without holding a thread. The process's termination handler
/// calls ``exited()``; ``wait(limit:)`` returns when it has, or when the limit has passed. Each
/// wait's continuation is taken out of the lock by exactly one of the two, so it is resumed once.
final class ProcessExit: Sendable {
    private struct State {
        var exited = false
        /// The wait under way, counted from 1; a limit that passes belongs to one wait.
        var generation: UInt64 = 0
        var waiter: CheckedContinuation<Bool, Never>?
        /// The last wait whose limit passed before it was waiting.
        var expired: UInt64 = 0
    }

    private let state = Mutex(State())

    /// The process has exited: whoever waits goes on. - Thread: any (the termination handler's).
    func exited() {
        let waiter = state.withLock { s -> CheckedContinuation<Bool, Never>? in
            s.exited = true
            defer { s.waiter = nil }
            return s.waiter
        }
        waiter?.resume(returning: true)
    }

    /// Waits until the process has exited.
    func wait() async {
        let generation = state.withLock { s -> UInt64 in
            s.generation += 1
            return s.generation
        }
        _ = await waiting(generation)
    }

    /// Waits until the process has exited (`true`) or `limit` seconds have passed (`false`).
    func wait(limit: Double) async -> Bool {
        let generation = state.withLock { s -> UInt64 in
            s.generation += 1
            return s.generation
        }
        let timer = Task { [self] in
            do { try await Task.sleep(for: .seconds(limit)) } catch { return }
            timedOut(generation)
        }
        defer { timer.cancel() }
        return await waiting(generation)
    }

    private func waiting(_ generation: UInt64) async -> Bool {
        await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            let now = state.withLock { s -> Bool? in
                if s.exited { return true }
                if s.expired == generation { return false }
                s.waiter = continuation
                return nil
            }
            if let now { continuation.resume(returning: now) }
        }
    }

    /// The limit of wait `generation` has passed.
    private func timedOut(_ generation: UInt64) {
        let waiter = state.withLock { s -> CheckedContinuation<Bool, Never>? in
            guard s.generation == generation, !s.exited else { return nil }
            guard let waiter = s.waiter else {
                s.expired = generation
                return nil
            }
            s.waiter = nil
            return waiter
        }
        waiter?.resume(returning: false)
    }
}
