import Foundation
import TapedeckAssembly
import TapedeckCore
#if canImport(Glibc)
import Glibc
#endif

/// Running recorders, as files in the user's runtime folder (``UserPaths/runtimeFolder``, private
/// to the user): `record` (and `serve` while its page records) writes `recorder-PID.json` (what
/// it records into) and listens at `recorder-PID.sock` (``RecorderControl``: status, mark, split,
/// stop) while it runs, and removes both at the end; `tapedeck mark` appends a label to `recorder-PID.marks` and sends the
/// recorder SIGUSR1, which reads the new labels (``MarkInbox``). A file whose process is gone is
/// skipped (and removed by the next recorder). Plain functions; any thread; they block briefly on
/// disk I/O.
enum RecorderRegistry {
    struct Entry: Codable {
        var pid: Int32
        var session: String
        var library: String
        var startedAt: Date
        /// `record` or `serve` (absent in files of earlier versions).
        var startedBy: String?

        /// Its control socket (``RecorderControl``).
        func socket(_ paths: UserPaths) -> URL {
            RecorderRegistry.folder(paths).appendingPathComponent("recorder-\(pid).sock")
        }
    }

    /// The control socket beside a registration (``register(session:library:startedBy:paths:)``).
    static func socket(for registration: URL) -> URL {
        registration.deletingPathExtension().appendingPathExtension("sock")
    }

    static func folder(_ paths: UserPaths) -> URL { URL(fileURLWithPath: paths.runtimeFolder) }

    /// Says this process records into `session` of `library`; `nil` when the folder cannot be made
    /// (then `mark` cannot find it; SIGUSR1 and `m` still work).
    static func register(session: String, library: String, startedBy: String, paths: UserPaths) -> URL? {
        let dir = folder(paths)
        guard (try? FileModes.makePrivateFolder(dir)) != nil else { return nil }
        // Files of recorders that died without removing them.
        for name in (try? FileManager.default.contentsOfDirectory(atPath: dir.path)) ?? [] where name.hasPrefix("recorder-") {
            let pid = Int32(name.dropFirst("recorder-".count).prefix { $0.isNumber }) ?? 0
            if pid > 0, !isRecorder(pid) { try? FileManager.default.removeItem(at: dir.appendingPathComponent(name)) }
        }
        let pid = getpid()
        let url = dir.appendingPathComponent("recorder-\(pid).json")
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        guard let data = try? encoder.encode(Entry(pid: pid, session: session, library: library, startedAt: Date(), startedBy: startedBy)),
              (try? data.write(to: url, options: .atomic)) != nil else { return nil }
        return url
    }

    /// Removes this process's files.
    static func unregister(_ url: URL?) {
        guard let url else { return }
        try? FileManager.default.removeItem(at: url)
        try? FileManager.default.removeItem(at: url.deletingPathExtension().appendingPathExtension("marks"))
        try? FileManager.default.removeItem(at: socket(for: url))
    }

    /// The running recorders.
    static func running(_ paths: UserPaths) -> [Entry] {
        let dir = folder(paths)
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return ((try? FileManager.default.contentsOfDirectory(atPath: dir.path)) ?? []).sorted()
            .filter { $0.hasPrefix("recorder-") && $0.hasSuffix(".json") }
            .compactMap { name in (try? Data(contentsOf: dir.appendingPathComponent(name))).flatMap { try? decoder.decode(Entry.self, from: $0) } }
            .filter { isRecorder($0.pid) }
    }

    /// Whether `pid` is alive and is a tapedeck.
    static func isRecorder(_ pid: Int32) -> Bool {
        guard kill(pid, 0) == 0 || errno == EPERM,
              let command = try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8) else { return false }
        return command.trimmingCharacters(in: .whitespacesAndNewlines) == "tapedeck"
    }

    /// Appends `label` for the recorder `pid` as one line, in one `write` to a file opened for
    /// appending (so lines written at once by many `mark`s never interleave; a label is at most
    /// ``TakeMarker/maxLabelBytes``), then signals it.
    static func mark(_ pid: Int32, label: String, paths: UserPaths) throws {
        let url = folder(paths).appendingPathComponent("recorder-\(pid).marks")
        let fd = open(url.path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw TapedeckError.system(errno, while: "open \(url.path)") }
        let line = Array((label.replacingOccurrences(of: "\n", with: " ") + "\n").utf8)
        var written = -1
        repeat {
            written = line.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        } while written < 0 && errno == EINTR
        close(fd)
        guard written == line.count else { throw TapedeckError(.io, "Could not pass the marker's label to the recorder (\(url.path)). Try again.") }
        guard kill(pid, SIGUSR1) == 0 else { throw TapedeckError.system(errno, while: "signal the recorder (PID \(pid))") }
    }

    /// Labels `mark` left for this process since `offset` (which moves past them).
    static func newLabels(for registration: URL, from offset: inout UInt64) -> [String] {
        let url = registration.deletingPathExtension().appendingPathExtension("marks")
        guard let handle = try? FileHandle(forReadingFrom: url) else { return [] }
        defer { try? handle.close() }
        try? handle.seek(toOffset: offset)
        let data = (try? handle.readToEnd()) ?? Data()
        guard let end = data.lastIndex(of: UInt8(ascii: "\n")) else { return [] }
        offset += UInt64(end - data.startIndex + 1)
        return String(decoding: data[..<end], as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    }
}

/// What `tapedeck mark` left for this recorder, matched with the SIGUSR1s that came: each `mark`
/// appends its line, then signals, so every line is a marker with its label (an empty line, one
/// without), read once; and a signal with no line of its own (`kill -USR1 PID`) is a marker
/// without a label. A line is read only once its newline is there. Signals counted beyond the
/// lines read (`signals - lines`) are the bare ones, each set once, however the reads and the
/// signals of concurrent `mark`s interleave; the kernel merges a signal that arrives while
/// another is pending, so a bare signal sent together with `mark`s may be merged into theirs.
/// A plain value; main actor (its owner's).
struct MarkInbox {
    /// The recorder's registration (``RecorderRegistry/register(session:library:paths:)``);
    /// `nil`: every signal is a marker without a label.
    var registration: URL?
    private var offset: UInt64 = 0
    private var signals = 0
    private var lines = 0
    private var bare = 0

    init(registration: URL? = nil) {
        self.registration = registration
    }

    /// The labels of the markers `count` more SIGUSR1s bring (`""` for one without a label), in
    /// the order they came. - Blocks briefly on disk I/O.
    mutating func take(signals count: Int) -> [String] {
        signals += count
        let labels = registration.map { RecorderRegistry.newLabels(for: $0, from: &offset) } ?? []
        lines += labels.count
        let unlabelled = max(0, signals - lines - bare)
        bare += unlabelled
        return labels + Array(repeating: "", count: unlabelled)
    }
}
