import Foundation
import TapedeckCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where things are: a session's bundle, a take's file, confined to the library, and the
/// library and take locks.
extension BundleStorage {
    // MARK: locating

    /// The bundle holding session `id`. With `verify`, a remembered folder is checked against
    /// its summary (so against its manifest, read again when it changed), and the library's
    /// summaries are looked through again when it no longer matches.
    func bundleURL(for id: String, verify: Bool) throws -> URL {
        if isSingleBundle {
            if verify { _ = try readSession(id, in: rootURL) }
            return rootURL
        }
        if let folder = folders.withLock({ $0[id] }) {
            let url = rootURL.appendingPathComponent(folder)
            var st = stat()
            if lstat(url.path, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR {
                // Its summary (its manifest read again only when changed) says which session it holds.
                if !verify || (try? summary(of: folder, at: url))?.sessionID == id { return url }
            }
        }
        if let found = try summaries().first(where: { $0.summary?.sessionID == id }) { return found.url }
        throw Self.noSession(id)
    }

    /// The session and bundle holding take `id`.
    func locateTake(_ id: String) throws -> (sessionID: String, bundle: URL) {
        var found: [(String, URL)] = []
        for scanned in try summaries() {
            if let summary = scanned.summary, summary.hasTake(id) { found.append((summary.sessionID, scanned.url)) }
        }
        guard let first = found.first else { throw Self.noTake(id) }
        // Ids are unique per manifest only; a copied or hostile bundle may repeat another's. Acting
        // on the wrong session's take is never acceptable, so an ambiguous id is refused.
        guard found.count == 1 else {
            throw TapedeckError(.corruptFile, "The take id \(id) appears in \(found.count) bundles (\(found.map(\.1.lastPathComponent).joined(separator: ", "))). Move the copied bundle out of the library, or run `tapedeck doctor`.")
        }
        return first
    }

    static func noSession(_ id: String) -> TapedeckError {
        TapedeckError(.notFound, "No session has the id \(id). Run `tapedeck list` to see the sessions.")
    }

    static func noTake(_ id: String) -> TapedeckError {
        TapedeckError(.notFound, "No take has the id \(id). Run `tapedeck list` to see the takes.")
    }

    func outside(_ path: String) -> TapedeckError {
        TapedeckError(.corruptFile, "The path \"\(path)\" does not lie inside its session's bundle in \(rootURL.path). Run `tapedeck doctor`.")
    }

    /// `SLUG-ID8.tapedeck`.
    static func folderName(_ name: String, id: String) -> String {
        StoreNames.sessionFolder(name: name, id: id) + bundleExtension
    }

    /// Hidden files Tapedeck itself makes in a bundle.
    static func isOwnHiddenFile(_ name: String) -> Bool {
        name.hasPrefix(".") && name != "." && name != ".."
            && (name.hasSuffix(".lock") || name.contains(".pending.") || name.hasPrefix(temporaryPrefix))
    }

    func session(_ manifest: Manifest, bundle: URL) -> Session {
        let takes = manifest.takes.sorted { ($0.number, $0.startDate, $0.id) < ($1.number, $1.startDate, $1.id) }
        return Session(id: manifest.id, name: manifest.name, createdAt: manifest.createdAt,
                       takes: takes.map { makeTake($0, of: manifest, bundle: bundle) })
    }

    func makeTake(_ entry: Manifest.Entry, of manifest: Manifest, bundle: URL) -> Take {
        let file = isSingleBundle ? entry.file : bundle.lastPathComponent + "/" + entry.file
        return Take(id: entry.id, sessionID: manifest.id, name: entry.name, number: entry.number, createdAt: entry.startDate,
                    state: entry.state, format: entry.format, encoding: entry.encoding, file: file, frames: entry.frames,
                    overruns: entry.overruns, notes: entry.notes, tags: entry.tags, clippedSamples: entry.clippedSamples, run: entry.run, markers: entry.markers,
                    loudness: entry.loudness, began: entry.began)
    }

    // MARK: confinement

    /// Checks that `bundle` is this store's bundle (the root, or a real folder directly in it).
    func checkBundle(_ bundle: URL) throws {
        let inLibrary = isSingleBundle
            ? bundle.path == rootURL.path
            : bundle.deletingLastPathComponent().path == rootURL.path && bundle.lastPathComponent.hasSuffix(Self.bundleExtension)
        guard inLibrary else { throw outside(bundle.path) }
        var st = stat()
        guard lstat(bundle.path, &st) == 0 else { throw TapedeckError.system(errno, while: "open the session bundle \(bundle.path)") }
        guard (st.st_mode & S_IFMT) == S_IFDIR else {
            throw TapedeckError(.io, "\(bundle.path) is a symbolic link or not a folder; Tapedeck does not follow links inside the library.")
        }
    }

    /// A plain name directly inside `bundle` (no link check: for removal, which never follows one).
    func member(_ name: String, in bundle: URL) throws -> URL {
        guard LibraryPath.isPlainName(name) else {
            throw TapedeckError(.corruptFile, "The name \(ManifestCodec.quoted(name)) does not lie inside the bundle \(bundle.path). Run `tapedeck doctor`.")
        }
        try checkBundle(bundle)
        return bundle.appendingPathComponent(name)
    }

    /// A plain name directly inside `bundle`, refusing a symbolic link there.
    func confined(_ name: String, in bundle: URL) throws -> URL {
        let url = try member(name, in: bundle)
        var st = stat()
        if lstat(url.path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFLNK {
            throw TapedeckError(.io, "\(url.path) is a symbolic link; Tapedeck does not follow links inside a bundle. Remove the link.")
        }
        return url
    }

    // MARK: locks

    /// Runs `body` holding the library lock (`rootURL/.tapedeck-library.lock`) and, in a library,
    /// the bundle's own lock too (so a process that opened the bundle in place is excluded as well).
    /// Not re-entrant.
    func locked<T>(_ bundle: URL?, _ body: () throws -> T) throws -> T {
        let deadline = Date().addingTimeInterval(lockTimeout)
        guard threadLock.lock(before: deadline) else { throw busy(rootURL.appendingPathComponent(Self.libraryLockName)) }
        defer { threadLock.unlock() }
        let rootFD = try waitForLock(rootURL.appendingPathComponent(Self.libraryLockName), until: deadline)
        defer { close(rootFD) }
        // The library lock file holds a reserve for manifest rewrites (see `commit`), taken
        // back whenever there is room.
        SpaceReserve.keepLibraryReserve(rootFD)
        var bundleFD: Int32 = -1
        defer { if bundleFD >= 0 { close(bundleFD) } }
        if let bundle, !isSingleBundle {
            bundleFD = try waitForLock(try member(Self.libraryLockName, in: bundle), until: deadline)
        }
        return try body()
    }

    func waitForLock(_ url: URL, until deadline: Date) throws -> Int32 {
        try LockFile.acquire(url, until: deadline, busy: busy)
    }

    func busy(_ url: URL) -> TapedeckError {
        TapedeckError(.busy,
            "Another tapedeck process held the library lock \(url.path) for more than \(lockTimeout) seconds. Wait for it to finish and try again, or raise \(lockTimeoutKey).")
    }

    /// Takes the lock of a take that no live process holds, creating the lock file if it is gone.
    /// - Returns: the locked descriptor, or `nil` when a live process holds the lock.
    func claimTakeLock(_ id: String, in bundle: URL) -> Int32? {
        guard let url = try? confined(StoreNames.lockFile(id: id), in: bundle) else { return nil }
        return LockFile.claim(url)
    }

    /// Removes a take's lock file and closes this process's descriptor on it.
    /// Removes and releases a take's lock. Best effort: it runs after the change it guarded was
    /// committed, and a lock file left behind is harmless (an unheld lock means a dead process).
    func releaseLock(of id: String, in bundle: URL) throws {
        let fd = liveLocks.withLock { $0.removeValue(forKey: id) }
        defer { if let fd { close(fd) } }
        if let url = try? member(StoreNames.lockFile(id: id), in: bundle) { unlink(url.path) }
    }
}
