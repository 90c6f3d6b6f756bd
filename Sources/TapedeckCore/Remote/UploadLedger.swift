public import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where each take's upload to each remote stands, kept in the library beside the catalog
/// (`uploads.json` at the library root, replaced atomically and synced on every change). A take
/// with no record is pending. One `push` at a time changes it: ``claim(timeout:)`` takes the
/// library's push lock for the whole run.
///
/// Every member runs on any thread and blocks on disk I/O (never for long, except ``claim(timeout:)``,
/// which waits for the lock).
public struct UploadLedger: Sendable {
    /// The ledger's file and its lock, at the library root. Stores leave them alone.
    public static let fileName = "uploads.json"
    public static let lockName = ".uploads.lock"
    /// Held for each change (read, change, replace), by `push`, `fleet pull` and `doctor` alike.
    public static let writeLockName = ".uploads.write.lock"
    /// Every name the ledger keeps at a library root.
    public static let reservedNames: Set<String> = [fileName, lockName, writeLockName, fileName + ".new"]

    /// One take's upload to one remote. A plain value.
    public struct Record: Sendable, Hashable, Codable {
        public enum State: String, Sendable, Hashable, Codable, CaseIterable {
            /// Parts are being sent (or were, by a run that stopped); ``token`` resumes it.
            case uploading
            /// The audio was checked on the remote and the manifest written after it.
            case verified
            /// The last attempt failed for ``reason``; the next `push` tries again.
            case failed
        }
        public var state: State
        /// The audio's key on the remote.
        public var key: String
        /// The resumable upload's token, while one exists.
        public var token: String?
        /// What was verified (``State/verified``).
        public var digest: ContentDigest?
        public var reason: String?
        public var updated: Date
        /// Why the remote copy of a ``State/verified`` take could not be confirmed when it was
        /// last looked at (by retention or `fleet doctor`): the next `push` checks it again and
        /// sends what is missing or stale. `nil` when nothing is in doubt.
        public var unconfirmed: String?
        /// Whether the fleet catalog (`sync.catalog`) holds the verified take's entry; `nil` or
        /// `false`: the next `push` adds it (the bucket is never behind the catalog).
        public var cataloged: Bool?

        public init(state: State, key: String, token: String? = nil, digest: ContentDigest? = nil, reason: String? = nil, updated: Date = Date(),
                    unconfirmed: String? = nil) {
            self.state = state
            self.key = key
            self.token = token
            self.digest = digest
            self.reason = reason
            self.updated = updated
            self.unconfirmed = unconfirmed
        }
    }

    private struct File: Codable {
        var schema: Int
        /// Remote location → take id → record.
        var remotes: [String: [String: Record]]
    }

    public let libraryURL: URL
    /// The remote the records are about (``TakeRemote/location``): the same library may push to
    /// several over time, and each has its own records.
    public let remote: String
    private let files: DurableFiles

    public init(libraryURL: URL, remote: String, files: DurableFiles = DurableFiles()) {
        self.libraryURL = libraryURL
        self.remote = remote
        self.files = files
    }

    private var fileURL: URL { libraryURL.appendingPathComponent(Self.fileName) }

    /// Takes the library's push lock, waiting up to `timeout` seconds.
    /// - Returns: the lock's descriptor; close it (`close(2)`) to release it.
    /// - Throws: `.busy` when another `push` holds it past the timeout.
    public func claim(timeout: Double) throws -> Int32 {
        try LockFile.acquire(libraryURL.appendingPathComponent(Self.lockName), until: Date().addingTimeInterval(timeout)) { _ in
            TapedeckError(.busy, "Another tapedeck push is running for the library \(libraryURL.path). Wait for it to finish (or stop it), then run push again.")
        }
    }

    /// Every take's record for this remote, by take id.
    /// - Throws: `.corruptFile` when the ledger cannot be read (it names the file and says what to do).
    public func records() throws -> [String: Record] {
        try read().remotes[remote] ?? [:]
    }

    /// Every remote's records, by location, then take id (for `doctor`).
    public func allRecords() throws -> [String: [String: Record]] {
        try read().remotes
    }

    /// Records `record` for `takeID` (or removes it, given `nil`), durably, before returning.
    public func set(_ takeID: String, _ record: Record?) throws {
        try changing { file in
            var mine = file.remotes[remote] ?? [:]
            mine[takeID] = record
            file.remotes[remote] = mine.isEmpty ? nil : mine
            return true
        }
    }

    /// Stores several takes' records in one write of the ledger (``set(_:_:)`` for each).
    /// - Thread: any. Blocks on the ledger's lock and one durable write.
    public func set(_ records: [String: Record]) throws {
        guard !records.isEmpty else { return }
        try changing { file in
            var mine = file.remotes[remote] ?? [:]
            for (takeID, record) in records { mine[takeID] = record }
            file.remotes[remote] = mine.isEmpty ? nil : mine
            return true
        }
    }

    /// Notes that the remote copy of the verified take `takeID` could not be confirmed, and
    /// why, so that the next `push` checks it again. A take not verified on this remote (or
    /// verified under another key than `key`, when given: a take pulled from another machine)
    /// is left as it is.
    /// - Returns: whether the take's record was marked.
    @discardableResult
    public func markUnconfirmed(_ takeID: String, key: String? = nil, reason: String) throws -> Bool {
        var marked = false
        try changing { file in
            guard var record = file.remotes[remote]?[takeID], record.state == .verified, key == nil || record.key == key else { return false }
            record.unconfirmed = reason
            file.remotes[remote]?[takeID] = record
            marked = true
            return true
        }
        return marked
    }

    /// Runs `change` on the ledger as it is now and writes the result when `change` says so,
    /// holding the write lock throughout, so changes by other processes are never lost.
    private func changing(_ change: (inout File) throws -> Bool) throws {
        let fd = try LockFile.acquire(libraryURL.appendingPathComponent(Self.writeLockName), until: Date().addingTimeInterval(30)) { _ in
            TapedeckError(.busy, "The upload ledger in \(libraryURL.path) stayed locked for 30 s. Try again.")
        }
        defer { close(fd) }
        var file = try read()
        if try change(&file) { try write(file) }
    }

    private func read() throws -> File {
        let fd = open(fileURL.path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        if fd < 0 {
            if errno == ENOENT { return File(schema: 1, remotes: [:]) }
            throw TapedeckError.system(errno, while: "open the upload ledger \(fileURL.path)")
        }
        let handle = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
        let data: Data
        do { data = try handle.readToEnd() ?? Data() } catch {
            throw TapedeckError(.io, "Could not read the upload ledger \(fileURL.path): \(error.localizedDescription).")
        }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        guard let file = try? decoder.decode(File.self, from: data), file.schema == 1 else {
            throw TapedeckError(.corruptFile, "The upload ledger \(fileURL.path) is damaged. Move it away (every take then counts as pending; push checks the remote before sending anything again), then run push again.")
        }
        return file
    }

    private func write(_ file: File) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
        encoder.dateEncodingStrategy = .iso8601
        let data = try encoder.encode(file)
        let temporary = libraryURL.appendingPathComponent(Self.fileName + ".new")
        try files.remove(temporary)
        try files.writeNewFile(data, to: temporary)
        try files.replace(fileURL, with: temporary)
        try files.syncDirectory(libraryURL)
    }
}
