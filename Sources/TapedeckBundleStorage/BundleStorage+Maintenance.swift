import Foundation
public import TapedeckCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What `tapedeck doctor` asks of a bundle library: files no manifest names, bundles that
/// cannot be read, and the repairs that never delete audio.
extension BundleStorage {
    // MARK: maintenance (tapedeck doctor)

    /// A path relative to ``rootURL`` (the bundle's own name in single-bundle mode is not part of it).
    func relative(_ url: URL) -> String {
        relativePath(of: url) ?? url.lastPathComponent
    }

    /// Files in readable bundles that no entry names (audio with no take; pending files of takes
    /// no longer recording). The store's own files (manifest, locks) are not listed.
    /// - Thread: any. Blocks on disk I/O; takes a bundle's lock only to look again at a file
    ///   that seems unnamed (a delete may be between its entry and its audio).
    public func unreferencedFiles() throws -> [String] {
        var found: [String] = []
        for scanned in try summaries() {
            guard case .success = scanned.result else { continue }
            // The folder is listed before the manifest is read again: a take's entry is committed
            // before its file is created, so any take's file seen here is in the later manifest,
            // however recordings and imports run meanwhile.
            let entries = (try? FileManager.default.contentsOfDirectory(atPath: scanned.url.path)) ?? []
            var unnamed = unreferenced(entries, in: scanned.url)
            // A delete may be between its entry and its audio: look again once no delete runs.
            if !unnamed.isEmpty {
                unnamed = try locked(scanned.url) { unreferenced(unnamed, in: scanned.url) }
            }
            found += unnamed.map { relative(scanned.url.appendingPathComponent($0)) }
        }
        return found
    }

    /// Those of `entries` (listed in `bundle` before this call) that still exist and that no
    /// entry of the manifest names, less the store's own files and pending files of recordings
    /// that began meanwhile. An unreadable manifest names nothing found here (the bundle is
    /// reported as damaged instead).
    func unreferenced(_ entries: [String], in bundle: URL) -> [String] {
        guard let manifest = try? readManifest(bundle) else { return [] }
        // The upload ledger sits at the library root, which is this bundle when one is opened in place.
        var known: Set<String> = UploadLedger.reservedNames.union([Self.manifestName, Self.libraryLockName])
        for take in manifest.takes {
            known.insert(take.file)
            // A take's companions (its chain) are the take's as its audio is.
            for suffix in TakeCompanions.suffixes { known.insert(take.file + suffix) }
            if take.state == .recording, let pending = take.pendingFile { known.insert(pending) }
        }
        var found: [String] = []
        for entry in entries.sorted() where !known.contains(entry) && !(entry.hasPrefix(".") && entry.hasSuffix(".lock"))
            && !entry.hasPrefix(Self.temporaryPrefix) {
            // Gone since the listing: a pending file moved into place, or deleted audio.
            var st = stat()
            guard lstat(bundle.appendingPathComponent(entry).path, &st) == 0 else { continue }
            // A recording that began after the manifest was read: its lock is held.
            if entry.hasPrefix("."), entry.contains(".pending."),
               let id = entry.dropFirst().split(separator: ".").first.map(String.init), isLocked(id, in: bundle) {
                continue
            }
            found.append(entry)
        }
        return found
    }

    /// Whether a live process holds take `id`'s lock in `bundle`.
    func isLocked(_ id: String, in bundle: URL) -> Bool {
        if liveLocks.withLock({ $0[id] != nil }) { return true }
        guard let fd = claimTakeLock(id, in: bundle) else {
            return FileManager.default.fileExists(atPath: bundle.appendingPathComponent(StoreNames.lockFile(id: id)).path)
        }
        close(fd)
        return false
    }

    /// Bundles that cannot be used, as library-relative paths (see ``damagedBundles()``), and a
    /// `.tapedeck-index` that is not a folder (the summaries cannot be kept: every command then
    /// reads every manifest, which nothing else would tell).
    /// - Thread: any. Blocks on disk I/O and, when something looks damaged, on the library lock.
    public func damagedParts() throws -> [DamagedPart] {
        var parts = try damagedBundles().map { DamagedPart(path: relative($0.url), problem: $0.problem, canQuarantine: true) }
        var st = stat()
        if !isSingleBundle, lstat(rootURL.appendingPathComponent(Self.indexFolderName).path, &st) == 0, (st.st_mode & S_IFMT) != S_IFDIR {
            parts.append(DamagedPart(path: Self.indexFolderName, problem:
                "\(Self.indexFolderName) is not a folder (a file or a symbolic link), so the bundles' summaries cannot be kept there and every command reads every manifest. Moving it aside (what `doctor --repair` does) lets Tapedeck make the folder again.",
                canQuarantine: true))
        }
        return parts
    }

    /// Moves a file or an unusable bundle into `quarantine/<time>/` in the library.
    /// - Thread: any. Blocks on disk I/O and on the library lock.
    public func quarantine(_ relativePath: String) throws -> String {
        guard !isSingleBundle else {
            throw TapedeckError(.invalidArgument, "A bundle opened in place has no quarantine folder. Open the library that holds it to repair it.")
        }
        return try locked(nil) { try files.quarantine(relativePath, in: rootURL) }
    }

    /// Removes the entry of a take whose audio file is gone.
    /// - Thread: any. Blocks on disk I/O and on the library lock.
    public func forgetTake(_ id: String) throws {
        let (sessionID, bundle) = try locateTake(id)
        try locked(bundle) {
            var manifest = try readSession(sessionID, in: bundle)
            guard let i = manifest.takes.firstIndex(where: { $0.id == id }) else { throw Self.noTake(id) }
            guard manifest.takes[i].state != .recording else {
                throw TapedeckError(.busy, "Take \"\(manifest.takes[i].name)\" is being recorded or waits for recovery; it cannot be forgotten.")
            }
            var st = stat()
            if lstat(try member(manifest.takes[i].file, in: bundle).path, &st) == 0 || errno != ENOENT {
                throw TapedeckError(.alreadyExists, "Take \"\(manifest.takes[i].name)\" has its audio; only an entry without audio can be forgotten.")
            }
            manifest.takes.remove(at: i)
            try commit(manifest, in: bundle, "forgetTake")
        }
    }

    /// Records a repaired file: the entry's frames, and the state `recovered`.
    /// - Thread: any. Blocks on disk I/O and on the library lock.
    public func markRepaired(_ id: String, frames: Int64) throws {
        let (sessionID, bundle) = try locateTake(id)
        try locked(bundle) {
            var manifest = try readSession(sessionID, in: bundle)
            guard let i = manifest.takes.firstIndex(where: { $0.id == id }), manifest.takes[i].state != .recording else {
                throw Self.noTake(id)
            }
            manifest.takes[i].frames = frames
            manifest.takes[i].state = .recovered
            try commit(manifest, in: bundle, "markRepaired")
        }
    }
}
