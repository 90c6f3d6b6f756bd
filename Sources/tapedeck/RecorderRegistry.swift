import Foundation
import TapedeckAssembly
import TapedeckCore
#if canImport(Glibc)
import Glibc
#endif

/// Running recorders, as files in the user's runtime folder (``UserPaths/runtimeFolder``, private
/// to the user): `record` writes `recorder-PID.json` (what it records into) while it runs and
/// removes it at the end; `tapedeck mark` appends a label to `recorder-PID.marks` and sends the
/// recorder SIGUSR1, which reads the new labels. A file whose process is gone is skipped (and
/// removed by the next recorder). Plain functions; any thread; they block briefly on disk I/O.
enum RecorderRegistry {
    struct Entry: Codable {
        var pid: Int32
        var session: String
        var library: String
        var startedAt: Date
    }

    static func folder(_ paths: UserPaths) -> URL { URL(fileURLWithPath: paths.runtimeFolder) }

    /// Says this process records into `session` of `library`; `nil` when the folder cannot be made
    /// (then `mark` cannot find it; SIGUSR1 and `m` still work).
    static func register(session: String, library: String, paths: UserPaths) -> URL? {
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
        guard let data = try? encoder.encode(Entry(pid: pid, session: session, library: library, startedAt: Date())),
              (try? data.write(to: url, options: .atomic)) != nil else { return nil }
        return url
    }

    /// Removes this process's files.
    static func unregister(_ url: URL?) {
        guard let url else { return }
        try? FileManager.default.removeItem(at: url)
        try? FileManager.default.removeItem(at: url.deletingPathExtension().appendingPathExtension("marks"))
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

    /// Appends `label` for the recorder `pid` and signals it.
    static func mark(_ pid: Int32, label: String, paths: UserPaths) throws {
        let url = folder(paths).appendingPathComponent("recorder-\(pid).marks")
        let fd = open(url.path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw TapedeckError.system(errno, while: "open \(url.path)") }
        let line = Array((label.replacingOccurrences(of: "\n", with: " ") + "\n").utf8)
        let written = line.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
        guard written == line.count else { throw TapedeckError(.io, "Could not pass the marker's label to the recorder (\(url.path)).") }
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
