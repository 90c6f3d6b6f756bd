import Foundation
import CChildSpawn
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// One export on request, run as a child process (`tapedeck export … --json --progress-fd 3`):
/// whatever an encoder or a hostile file does to that process (an assertion, a crash, memory),
/// the server and its recording go on. The child runs at a lower priority (nice 10), in its own
/// process group (a Ctrl-C at the server's terminal reaches the server only, which then stops
/// the child with SIGTERM), with stdin from /dev/null and every descriptor of the server closed.
/// When the server dies, the child's next progress report fails (`EPIPE`) and the export stops,
/// removing its temporary file. Members run on any thread and never block; a thread of the
/// child's own reads its output and waits for it.
final class ExportChild: Sendable {
    /// How the child ended and what it wrote (stdout and stderr, each cut at a bound).
    struct Outcome: Sendable {
        /// The exit status, or 128 + the signal that ended it.
        var status: Int32
        var signal: Int32?
        var output: Data
        var errors: Data
    }

    let pid: pid_t
    private let ended = Atomic<Bool>(false)

    private init(pid: pid_t) { self.pid = pid }

    static let outputLimit = 1 << 20
    static let errorLimit = 64 << 10

    /// Starts `executable` with `arguments` (argv[1…]) and `environment`.
    /// - Parameters:
    ///   - progress: each report's frames done and in all (on the main actor, the newest only).
    ///   - end: the outcome, once (on the main actor).
    /// - Throws: a message when the process cannot be started.
    static func start(executable: String, arguments: [String], environment: [String: String],
                      progress: @escaping @MainActor @Sendable (Int64, Int64) -> Void,
                      end: @escaping @MainActor @Sendable (Outcome) -> Void) throws -> ExportChild {
        let argv = (["tapedeck"] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var spawned: pid_t = 0
        var fds: [Int32] = [-1, -1, -1]
        let status = tapedeck_spawn_child(executable, argv, envp, 10, &fds, &spawned)
        guard status == 0 else {
            throw ExportChildError(message: "Could not start the export (\(executable)): \(String(cString: strerror(status))).")
        }
        let pid = spawned
        let reading = (output: fds[0], errors: fds[1], progress: fds[2])
        let child = ExportChild(pid: pid)
        let thread = Thread {
            let outcome = Self.collect(pid: pid, progressFD: reading.progress, outputFD: reading.output, errorFD: reading.errors, progress: progress)
            child.ended.store(true, ordering: .releasing)
            Task { @MainActor in end(outcome) }
        }
        thread.name = "tapedeck.serve.export"
        thread.start()
        return child
    }

    /// Asks the child to stop (SIGTERM): it removes its temporary file and exits 130.
    func terminate() {
        guard !ended.load(ordering: .acquiring) else { return }
        kill(pid, SIGTERM)
    }

    /// Reads the three pipes until each is closed, then reaps the child. - Blocks.
    private static func collect(pid: pid_t, progressFD: Int32, outputFD: Int32, errorFD: Int32,
                                progress: @escaping @MainActor @Sendable (Int64, Int64) -> Void) -> Outcome {
        var output = Data(), errors = Data(), line = Data()
        var open = [progressFD, outputFD, errorFD]
        var buffer = [UInt8](repeating: 0, count: 1 << 14)
        while !open.isEmpty {
            var polls = open.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            let ready = poll(&polls, nfds_t(polls.count), -1)
            if ready < 0 {
                if errno == EINTR { continue }
                break
            }
            for p in polls where p.revents != 0 {
                let n = buffer.withUnsafeMutableBytes { read(p.fd, $0.baseAddress, $0.count) }
                if n < 0 && (errno == EINTR || errno == EAGAIN) { continue }
                if n <= 0 {
                    close(p.fd)
                    open.removeAll { $0 == p.fd }
                    continue
                }
                let bytes = buffer[0..<n]
                switch p.fd {
                case outputFD: if output.count < outputLimit { output.append(contentsOf: bytes.prefix(outputLimit - output.count)) }
                case errorFD: if errors.count < errorLimit { errors.append(contentsOf: bytes.prefix(errorLimit - errors.count)) }
                default:
                    line.append(contentsOf: bytes)
                    var newest: (Int64, Int64)?
                    while let end = line.firstIndex(of: 0x0A) {
                        newest = Self.frames(in: line[line.startIndex..<end]) ?? newest
                        line.removeSubrange(line.startIndex...end)
                    }
                    if line.count > 4096 { line.removeAll() }
                    if let (done, total) = newest { Task { @MainActor in progress(done, total) } }
                }
            }
        }
        for fd in open { close(fd) }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let signal = status & 0x7F
        return signal != 0 ? Outcome(status: 128 + signal, signal: signal, output: output, errors: errors)
            : Outcome(status: (status >> 8) & 0xFF, signal: nil, output: output, errors: errors)
    }

    /// `framesDone` and `totalFrames` of one progress line (`tapedeck export --progress-fd`).
    static func frames(in line: Data) -> (Int64, Int64)? {
        guard let object = try? JSONSerialization.jsonObject(with: line) as? [String: Any],
              let done = (object["framesDone"] as? NSNumber)?.int64Value,
              let total = (object["totalFrames"] as? NSNumber)?.int64Value else { return nil }
        return (done, total)
    }
}

struct ExportChildError: Error, Sendable {
    var message: String
}
