public import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The temporary files `import` (in a library's root) and `export` (beside each target) write
/// before a verified result is put in place: named after the process that writes them, so any
/// later run can tell one whose writer is gone (killed, even by SIGKILL) and remove it, and
/// registered while they exist; a stop signal asks the work to end at a safe point (its own
/// error paths remove what it made), and a second one removes what is registered and exits.
///
/// A reference type shared by the command and its workers; safe on any thread, never blocks
/// for long.
public final class PartialFiles: Sendable {
    private let live = Mutex<Set<String>>([])
    private let stopped = Atomic<Bool>(false)

    public init() {}

    /// A new name for an import's temporary file in a library's root: `.import-PID-UUID.partial`.
    public static func importName() -> String {
        ".import-\(getpid())-\(UUID().uuidString.lowercased()).partial"
    }

    /// A new name for an export's temporary file beside `target`: `.NAME.partial-PID-XXXXXXXX`.
    public static func exportName(for target: String) -> String {
        ".\(target).partial-\(getpid())-\(UUID().uuidString.prefix(8))"
    }

    /// Whether `name` is a partial file of import or export, and if so the process that wrote
    /// it (`nil` for names of versions that did not record one).
    static func writer(of name: String) -> (isPartial: Bool, pid: Int32?) {
        guard name.hasPrefix(".") else { return (false, nil) }
        if name.hasPrefix(".import-"), name.hasSuffix(".partial") {
            let middle = name.dropFirst(".import-".count).dropLast(".partial".count)
            return (true, middle.split(separator: "-").first.flatMap { Int32($0) }.flatMap { $0 > 0 && middle.count > 36 ? $0 : nil })
        }
        if let range = name.range(of: ".partial-", options: .backwards) {
            let parts = name[range.upperBound...].split(separator: "-")
            if parts.count == 2, parts[1].count == 8, let pid = Int32(parts[0]) { return (true, pid) }
            if parts.count == 1, parts[0].count == 8 { return (true, nil) }
        }
        return (false, nil)
    }

    /// The partial files in `folder` whose writer is no longer running.
    /// - Thread: any. Blocks briefly on the folder listing.
    public static func stale(in folder: URL) -> [URL] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        return names.sorted().compactMap { name in
            let (isPartial, pid) = writer(of: name)
            guard isPartial else { return nil }
            if let pid, pid == getpid() || kill(pid, 0) == 0 || errno != ESRCH { return nil }
            var st = stat()
            let url = folder.appendingPathComponent(name)
            guard lstat(url.path, &st) == 0, st.st_mode & S_IFMT == S_IFREG else { return nil }
            return url
        }
    }

    /// Removes ``stale(in:)``; returns the names removed.
    @discardableResult
    public static func removeStale(in folder: URL) -> [String] {
        stale(in: folder).compactMap { unlink($0.path) == 0 ? $0.lastPathComponent : nil }
    }

    /// Notes a temporary file that exists now. - Thread: any.
    public func register(_ url: URL) { live.withLock { _ = $0.insert(url.path) } }

    /// Forgets one that was moved into place or removed. - Thread: any.
    public func forget(_ url: URL) { live.withLock { _ = $0.remove(url.path) } }

    /// Asks the work to stop at its next safe point (a stop signal): loops that read or write
    /// audio call ``checkStopped()`` and end there, and their own error paths remove what they
    /// made. - Thread: any; never blocks.
    public func stop() { stopped.store(true, ordering: .releasing) }

    /// Whether ``stop()`` was called. - Thread: any.
    public var isStopped: Bool { stopped.load(ordering: .acquiring) }

    /// Throws `.cancelled` once ``stop()`` was called. - Thread: any; never blocks.
    public func checkStopped() throws {
        if isStopped { throw TapedeckError(.cancelled, "Stopped on request.") }
    }

    /// Removes every registered file (a second stop, when the process exits at once); returns
    /// how many there were. - Thread: any.
    @discardableResult
    public func removeAll() -> Int {
        let paths = live.withLock { paths in defer { paths.removeAll() }; return paths }
        for path in paths { unlink(path) }
        return paths.count
    }
}
