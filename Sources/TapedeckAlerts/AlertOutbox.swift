public import Foundation
import TapedeckCore
#if canImport(Glibc)
import Glibc
#endif

/// Alerts waiting to be sent, on disk: one file per alert and route, named so that a listing is
/// the order they were raised in, written whole (a temporary file, synced, renamed) so a crash
/// leaves an alert or none. An alert leaves the outbox when its route took it; one raised while
/// the network is down is sent when it is back, by this run or the next Tapedeck command that
/// sends alerts. Only one process sends at a time (a lock file), so none is sent twice.
///
/// Every member may block on disk I/O; call them off the main actor. Safe from any thread.
public struct AlertOutbox: Sendable {
    /// One waiting alert.
    public struct Entry: Sendable, Hashable, Codable {
        /// The rule's key (``AlertRule/key``) and a fingerprint of its route: an entry whose
        /// route is no longer configured is not sent elsewhere.
        public var rule: String
        public var route: String
        public var event: AlertEvent
        /// The file's name in the outbox (its order).
        public var file: String = ""

        enum CodingKeys: String, CodingKey { case rule, route, event }
    }

    /// The folder (`$XDG_STATE_HOME/tapedeck/alerts`).
    public let folder: URL
    private var queue: URL { folder.appendingPathComponent("outbox") }

    public init(folder: URL) { self.folder = folder }

    /// Adds `event` for `rule`. - Throws: `.io` when the folder cannot be written.
    public func add(_ event: AlertEvent, for rule: AlertRule) throws {
        try FileModes.makePrivateFolder(queue)
        let entry = Entry(rule: rule.key, route: Self.fingerprint(rule.route), event: event)
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.sortedKeys]
        let data = try encoder.encode(entry)
        let name = String(format: "%020lld", nextSequence()) + "-" + rule.key + ".json"
        let temporary = queue.appendingPathComponent(".new-" + name)
        let fd = open(temporary.path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw Self.failure("write", temporary.path) }
        let written = data.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        let synced = fsync(fd) == 0
        close(fd)
        guard written == data.count, synced, rename(temporary.path, queue.appendingPathComponent(name).path) == 0 else {
            unlink(temporary.path)
            throw Self.failure("write", temporary.path)
        }
        let dir = open(queue.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dir >= 0 { fsync(dir); close(dir) }
    }

    /// Every waiting alert, oldest first; files that cannot be read are skipped (and left).
    public func entries() -> [Entry] {
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: queue.path)) ?? [])
            .filter { !$0.hasPrefix(".") && $0.hasSuffix(".json") }.sorted()
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return names.compactMap { name in
            guard let data = FileManager.default.contents(atPath: queue.appendingPathComponent(name).path),
                  var entry = try? decoder.decode(Entry.self, from: data) else { return nil }
            entry.file = name
            return entry
        }
    }

    /// Takes a sent alert out.
    public func remove(_ entry: Entry) {
        unlink(queue.appendingPathComponent(entry.file).path)
    }

    /// Runs `body` holding the sending lock, or returns `nil` at once when another process
    /// holds it (it sends meanwhile).
    public func whileSending<T>(_ body: () throws -> T) rethrows -> T? {
        try? FileModes.makePrivateFolder(folder)
        let fd = open(folder.appendingPathComponent("sending.lock").path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return try body() }
        defer { close(fd) }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else { return nil }
        defer { flock(fd, LOCK_UN) }
        return try body()
    }

    /// A name for the route that changes when where it sends changes (not with its credentials).
    public static func fingerprint(_ route: AlertRoute) -> String {
        let text: String
        switch route {
        case .webhook(let url, let template, _): text = "webhook \(url) \(template.rawValue)"
        case .ntfy(let url, _): text = "ntfy \(url)"
        case .email(let mail): text = "email \(mail.server) \(mail.from) \(mail.to.joined(separator: ","))"
        }
        return PrivateFile.stableName(text)
    }

    /// Names sort in the order alerts were added, across processes and restarts: the time in
    /// microseconds, or one past the newest waiting name when the clock went back.
    private func nextSequence() -> Int64 {
        let now = Int64(Date().timeIntervalSince1970 * 1_000_000)
        let newest = ((try? FileManager.default.contentsOfDirectory(atPath: queue.path)) ?? [])
            .compactMap { name in Int64(name.drop { $0 == "." || $0.isLetter || $0 == "-" }.prefix(20)) }.max() ?? 0
        return max(now, newest + 1)
    }

    private static func failure(_ doing: String, _ path: String) -> TapedeckError {
        TapedeckError(.io, "Could not \(doing) the alert outbox file \(path): \(String(cString: strerror(errno))). Check that the folder may be written and has room.")
    }
}
