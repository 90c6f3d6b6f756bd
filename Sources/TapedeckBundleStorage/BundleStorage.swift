public import Foundation
public import TapedeckCore
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A library of self-contained session bundles: one `SLUG-ID8.tapedeck` folder per session,
/// holding `manifest.json` and the session's audio files side by side.
///
/// A bundle can be copied to another machine (or into another library) and opened there; it is
/// treated as untrusted input: a manifest that is too large, malformed, out of range or names a
/// file outside its bundle is refused with ``TapedeckError/Code/corruptFile`` and never followed.
/// Opening a `.tapedeck` folder itself serves that one session in place.
///
/// Audio goes to a hidden pending file (`.ID.pending.EXT`) beside its final name while it is
/// recorded; a lock file (`.ID.lock`) held with `flock` for the whole recording tells other
/// processes the take is live, so only takes whose process died are recovered. Every change to a
/// manifest is a read-modify-write under an exclusive `flock` on `.tapedeck-library.lock`, and the
/// manifest is replaced atomically (temporary file, `fsync`, `rename`, folder `fsync`).
///
/// Thread-safe: every method may be called from any thread and may block on disk I/O or on
/// another process holding the library lock (up to the lock timeout). Methods are documented on
/// ``TakeStorage``.
public final class BundleStorage: LibraryMaintenance {
    /// The library folder, or the bundle itself when one bundle is opened in place.
    public let rootURL: URL
    /// Whether ``rootURL`` is a single bundle opened in place.
    public let isSingleBundle: Bool

    /// The extension of a session bundle folder.
    static let bundleExtension = ".tapedeck"
    static let manifestName = "manifest.json"
    static let libraryLockName = ".tapedeck-library.lock"
    static let temporaryPrefix = ".manifest.json.tmp-"

    /// Every mutation of the library goes through here (and so through the seam).
    private let files: DurableFiles
    private let lockTimeout: TimeInterval
    /// How messages name the lock timeout setting, e.g. `storage.bundle.lock-timeout`.
    private let lockTimeoutKey: String
    /// Serializes this instance's threads before they queue for the library's `flock`.
    private let threadLock = NSLock()
    /// Lock files of takes this process is recording or recovering, by take id.
    private let liveLocks = Mutex<[String: Int32]>([:])
    /// Bundle folder names by session id, as last seen.
    private let folders = Mutex<[String: String]>([:])

    /// Opens the library at `rootURL`, creating the folder if needed; or, when `rootURL` is a
    /// `.tapedeck` folder holding `manifest.json`, that one bundle in place.
    ///
    /// Leftover `.manifest.json.tmp-*` files (from a process that died while writing a manifest)
    /// are removed; they are never read.
    /// - Parameters:
    ///   - seam: observes every file-system mutation and durable step (tests inject faults here).
    ///   - lockTimeout: seconds to wait for another process holding the library lock.
    ///   - lockTimeoutKey: how messages name that setting (the plugin passes its full key).
    /// - Throws: ``TapedeckError`` `.corruptFile` when a bundle opened in place has a bad
    ///   manifest; `.notFound` when a `.tapedeck` path has no manifest; I/O errors.
    /// - Thread: any. Blocks on disk I/O and on other processes' library locks (up to `lockTimeout`).
    public init(rootURL: URL, seam: any StorageSeam = .none,
                lockTimeout: TimeInterval = BundleStorageSettings.lockTimeout.defaultValue,
                lockTimeoutKey: String = BundleStorageSettings.lockTimeout.key) throws {
        let root = rootURL.standardizedFileURL
        files = DurableFiles(seam: seam)
        self.lockTimeout = max(0, lockTimeout)
        self.lockTimeoutKey = lockTimeoutKey
        if root.lastPathComponent.hasSuffix(Self.bundleExtension) {
            let resolved = root.resolvingSymlinksInPath()
            var st = stat()
            guard lstat(resolved.appendingPathComponent(Self.manifestName).path, &st) == 0 else {
                throw TapedeckError(.notFound,
                    "\(resolved.path) is not a Tapedeck session bundle: it has no manifest.json. To keep a library there, choose a folder whose name does not end in .tapedeck; to create sessions, open the folder that holds your bundles.")
            }
            self.rootURL = resolved
            isSingleBundle = true
            _ = try readManifest(resolved)
        } else {
            try files.makeDirectory(root)
            self.rootURL = root.resolvingSymlinksInPath()
            isSingleBundle = false
        }
        try removeLeftoverTemporaries()
    }

    deinit {
        for fd in liveLocks.withLock({ Array($0.values) }) { close(fd) }
    }

    // MARK: reading

    /// Every readable session, oldest first (by creation date, then id), takes by number.
    ///
    /// Bundles whose manifest cannot be used are skipped (see ``damagedBundles()``) so one bad
    /// copy never hides the rest of the library; with a single bundle opened in place, a bad
    /// manifest throws `.corruptFile`.
    /// - Thread: any. Blocks on disk I/O; takes no lock (manifests are replaced atomically).
    public func sessions() throws -> [Session] {
        var out: [Session] = []
        for scanned in try scan() {
            switch scanned.result {
            case .success(let manifest): out.append(session(manifest, bundle: scanned.url))
            case .failure(let error): if isSingleBundle { throw error }
            }
        }
        return out.sorted { ($0.createdAt, $0.id) < ($1.createdAt, $1.id) }
    }

    /// The `.tapedeck` folders that are not usable sessions, with the reason: a manifest that
    /// fails validation, a missing manifest (a half-created or half-deleted bundle), a symbolic
    /// link, or a copy of a session that is in the library already. For `tapedeck doctor`.
    ///
    /// A session being created or deleted lacks its manifest for a moment, under the library
    /// lock; so a bundle found without one is looked at again holding that lock, and reported
    /// only if it is still there without a usable manifest.
    /// - Throws: ``TapedeckError`` when the library cannot be listed, or stays busy.
    /// - Thread: any. Blocks on disk I/O, and on the library lock when a manifest is missing.
    public func damagedBundles() throws -> [(url: URL, problem: String)] {
        let suspects: [(url: URL, error: TapedeckError)] = try scan().compactMap { scanned in
            if case .failure(let error) = scanned.result { return (scanned.url, error) }
            return nil
        }
        guard !isSingleBundle, suspects.contains(where: { $0.error.code == .notFound }) else {
            return suspects.map { ($0.url, $0.error.message) }
        }
        return try locked(nil) {
            suspects.compactMap { suspect in
                guard suspect.error.code == .notFound else { return (suspect.url, suspect.error.message) }
                guard FileManager.default.fileExists(atPath: suspect.url.path) else { return nil }  // deleted
                do {
                    _ = try readManifest(suspect.url)
                    return nil  // created
                } catch {
                    return (suspect.url, Self.typed(error).message)
                }
            }
        }
    }

    /// The take's audio file, inside the take's own bundle. Refuses paths that leave the bundle
    /// and symbolic links.
    /// - Thread: any. Blocks on disk I/O (a library scan when the session was not seen yet).
    public func audioURL(for take: Take) throws -> URL {
        let parts = take.file.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        let bundle = try bundleURL(for: take.sessionID, verify: false)
        let name: String
        if isSingleBundle {
            guard parts.count == 1 else { throw outside(take.file) }
            name = parts[0]
        } else {
            guard parts.count == 2, parts[0] == bundle.lastPathComponent else { throw outside(take.file) }
            name = parts[1]
        }
        if let problem = ManifestCodec.fileNameProblem(name, pending: false) {
            throw TapedeckError(.corruptFile, "The audio of take \"\(take.name)\" cannot be used: \(problem).")
        }
        let url = try confined(name, in: bundle)
        var st = stat()
        if lstat(url.path, &st) == 0 && (st.st_mode & S_IFMT) != S_IFREG {
            throw TapedeckError(.corruptFile, "\(url.path) is not a regular file. Tapedeck only plays and exports plain files inside a bundle.")
        }
        return url
    }

    // MARK: sessions

    /// Creates a session bundle. Refused when one bundle is opened in place.
    /// - Thread: any. Blocks on disk I/O and on other processes' library locks (up to the lock timeout).
    public func createSession(named name: String?) throws -> Session {
        guard !isSingleBundle else {
            throw TapedeckError(.invalidArgument,
                "\(rootURL.path) is one session bundle opened in place, so no session can be created in it. To create sessions, open the folder that holds your bundles (\(rootURL.deletingLastPathComponent().path)) instead.")
        }
        let chosen = try name.map { try NameRules.validate($0, what: "session") }
        return try locked(nil) {
            let existing = try scan().compactMap { try? $0.result.get() }
            let finalName: String
            if let chosen {
                // Names are compared as Swift compares text: canonically equivalent spellings are one name.
                guard !existing.contains(where: { $0.name == chosen }) else {
                    throw TapedeckError(.alreadyExists, "A session named \"\(chosen)\" exists already. Choose another name, or record into it with --session.")
                }
                finalName = chosen
            } else {
                var n = 1
                while existing.contains(where: { $0.name == "Session \(n)" }) { n += 1 }
                finalName = "Session \(n)"
            }
            // Creation dates only grow, so sessions list in creation order.
            var created = ManifestCodec.quantize(Date())
            if let latest = existing.map(\.createdAt).max(), created <= latest {
                created = ManifestCodec.quantize(latest.addingTimeInterval(0.000_001))
            }
            var id = UUID().uuidString.lowercased()
            var bundle = rootURL.appendingPathComponent(Self.folderName(finalName, id: id))
            var st = stat()
            while lstat(bundle.path, &st) == 0 {
                id = UUID().uuidString.lowercased()
                bundle = rootURL.appendingPathComponent(Self.folderName(finalName, id: id))
            }
            // The folder is made first: a folder with no manifest is not a session, so a crash
            // before the manifest is committed leaves only an orphan folder for `tapedeck doctor`.
            try files.makeDirectory(bundle)
            try files.reached("createSession", "folder created")
            let manifest = Manifest(id: id, name: finalName, createdAt: created, takes: [])
            try commit(manifest, in: bundle, "createSession")
            folders.withLock { $0[id] = bundle.lastPathComponent }
            return Session(id: id, name: finalName, createdAt: created)
        }
    }

    /// Renames a session (the manifest only; the bundle folder keeps its name).
    /// - Thread: any. Blocks on disk I/O and on other processes' library locks (up to the lock timeout).
    public func renameSession(_ id: String, to name: String) throws -> Session {
        let name = try NameRules.validate(name, what: "session")
        let bundle = try bundleURL(for: id, verify: true)
        return try locked(bundle) {
            var manifest = try readSession(id, in: bundle)
            let others = try scan().compactMap { try? $0.result.get() }.filter { $0.id != id }
            if others.contains(where: { $0.name == name }) {
                throw TapedeckError(.alreadyExists, "A session named \"\(name)\" exists already. Choose another name.")
            }
            manifest.name = name
            try commit(manifest, in: bundle, "renameSession")
            return session(manifest, bundle: bundle)
        }
    }

    /// Deletes a session: its manifest first (from then on it is no session), then its audio,
    /// then the folder. Refused while a take of it is being recorded, and for a bundle opened in place.
    /// - Thread: any. Blocks on disk I/O and on other processes' library locks (up to the lock timeout).
    public func deleteSession(_ id: String) throws {
        guard !isSingleBundle else {
            throw TapedeckError(.invalidArgument,
                "\(rootURL.path) is the session bundle opened in place, so it cannot delete itself. Open the folder that holds it (\(rootURL.deletingLastPathComponent().path)) to delete the session, or remove the folder.")
        }
        let bundle = try bundleURL(for: id, verify: true)
        var claimed: [Int32] = []
        defer { for fd in claimed { close(fd) } }
        try locked(bundle) {
            let manifest = try readSession(id, in: bundle)
            for take in manifest.takes where take.state == .recording {
                guard !liveLocks.withLock({ $0[take.id] != nil }), let fd = claimTakeLock(take.id, in: bundle) else {
                    throw TapedeckError(.busy, "The session is being recorded into. Stop that recording first, then delete the session.")
                }
                claimed.append(fd)
            }
            // Without its manifest the folder is no session: no entry can point at missing audio.
            let manifestURL = bundle.appendingPathComponent(Self.manifestName)
            try files.remove(manifestURL)
            try files.reached("deleteSession", "manifest removed")
            try files.syncDirectory(bundle)
            try files.reached("deleteSession", "removal committed")
            folders.withLock { _ = $0.removeValue(forKey: id) }
            for take in manifest.takes {
                try files.remove(try member(take.file, in: bundle))
                if let pending = take.pendingFile { try files.remove(try member(pending, in: bundle)) }
            }
            try files.syncDirectory(bundle)
            try files.reached("deleteSession", "audio removed")
            // Tapedeck's own hidden files: take locks, pending files, temporaries, the bundle lock.
            for name in try FileManager.default.contentsOfDirectory(atPath: bundle.path).sorted() where Self.isOwnHiddenFile(name) {
                try files.remove(try member(name, in: bundle))
            }
            try files.removeEmptyDirectory(bundle)
            try files.syncDirectory(rootURL)
            try files.reached("deleteSession", "folder removed")
        }
    }

    // MARK: takes

    /// Commits a take in state `recording` to the session's manifest and returns its pending
    /// file inside the bundle. The take's lock is held from before the entry exists until the
    /// take is finished.
    /// - Thread: any. Blocks on disk I/O and on other processes' library locks (up to the lock timeout).
    public func beginTake(in sessionID: String, named name: String?, format: AudioFormat,
                          encoding: String, fileExtension: String, startDate: Date) throws -> PendingTake {
        let chosen = try name.map { try NameRules.validate($0, what: "take") }
        try format.validate()
        if let problem = ManifestCodec.labelProblem(encoding) {
            throw TapedeckError(.invalidArgument, "The encoding name \(ManifestCodec.quoted(encoding)) \(problem).")
        }
        let bundle = try bundleURL(for: sessionID, verify: true)
        let id = UUID().uuidString.lowercased()
        let ext = NameRules.slug(fileExtension, fallback: "audio")
        let pendingName = ".\(id).pending.\(ext)"
        // Hold the take's lock before its entry exists, so no other process ever sees it unlocked while live.
        let pendingURL = try confined(pendingName, in: bundle)
        let lockURL = try confined(".\(id).lock", in: bundle)
        let lockFD = open(lockURL.path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, FileModes.file)
        guard lockFD >= 0 else { throw TapedeckError.system(errno, while: "create the lock file \(lockURL.path)") }
        guard flock(lockFD, LOCK_EX | LOCK_NB) == 0 else {
            close(lockFD)
            throw TapedeckError(.busy, "Could not lock \(lockURL.path). Try again.")
        }
        do {
            // Blocks held back in the lock file, so finishing still works if the audio fills the disk.
            try SpaceReserve.claim(lockFD, path: bundle.path)
            try files.reached("beginTake", "lock created")
            let (take, session) = try locked(bundle) { () -> (Take, Session) in
                var manifest = try readSession(sessionID, in: bundle)
                guard manifest.takes.count < Manifest.maxTakes else {
                    throw TapedeckError(.invalidArgument, "Session \"\(manifest.name)\" holds \(Manifest.maxTakes) takes, the most a session may hold. Record into a new session.")
                }
                let number = (manifest.takes.map(\.number).max() ?? 0) + 1
                guard number <= Manifest.maxNumber else {
                    throw TapedeckError(.invalidArgument, "Session \"\(manifest.name)\" has used every take number. Record into a new session.")
                }
                let used = manifest.takes.map(\.name)
                let finalName: String
                if let chosen {
                    guard !used.contains(chosen) else {
                        throw TapedeckError(.alreadyExists, "Session \"\(manifest.name)\" has a take named \"\(chosen)\" already. Choose another name with --name.")
                    }
                    finalName = chosen
                } else {
                    var n = number
                    while used.contains("Take \(n)") { n += 1 }
                    finalName = "Take \(n)"
                }
                let file = "\(ManifestCodec.pad(Int64(number), 3))-\(NameRules.slug(finalName, fallback: "take"))-\(id.prefix(8)).\(ext)"
                let entry = Manifest.Entry(id: id, name: finalName, number: number, file: file, format: format, encoding: encoding,
                                           frames: 0, startDate: ManifestCodec.quantize(startDate), state: .recording, overruns: [],
                                           notes: "", pendingFile: pendingName)
                manifest.takes.append(entry)
                try commit(manifest, in: bundle, "beginTake")
                return (makeTake(entry, of: manifest, bundle: bundle), Session(id: manifest.id, name: manifest.name, createdAt: manifest.createdAt))
            }
            liveLocks.withLock { $0[id] = lockFD }
            return PendingTake(take: take, session: session, fileURL: pendingURL)
        } catch {
            close(lockFD)
            try? files.remove(lockURL)
            throw error
        }
    }

    /// Syncs the pending audio, moves it into place, syncs the folder, then commits the take's
    /// final state, frames and overruns to the manifest.
    /// - Thread: any. Blocks on disk I/O and on other processes' library locks (up to the lock timeout).
    public func finishTake(_ pending: PendingTake, frames: Int64, state: TakeState, overruns: [OverrunEvent]) throws -> Take {
        guard (0...Manifest.maxFrames).contains(frames) else {
            throw TapedeckError(.invalidArgument, "A take of \(frames) frames cannot be stored; the count must be 0 to 2^40.")
        }
        for o in overruns where !(0...Manifest.maxFrames).contains(o.frame) || !(0...Manifest.maxFrames).contains(o.frames) || ManifestCodec.labelProblem(o.cause) != nil {
            throw TapedeckError(.invalidArgument, "The overrun at frame \(o.frame) (\(o.frames) frames, cause \(ManifestCodec.quoted(o.cause))) cannot be stored.")
        }
        let overruns = overruns.map { OverrunEvent(frame: $0.frame, frames: $0.frames, date: ManifestCodec.quantize($0.date), cause: $0.cause) }
        // The space held back since beginTake is what the sync, the move and the manifest rewrite may need.
        if let fd = liveLocks.withLock({ $0[pending.take.id] }) { SpaceReserve.release(fd) }
        let bundle = try bundleURL(for: pending.take.sessionID, verify: true)
        let id = pending.take.id
        guard let entry = try readSession(pending.take.sessionID, in: bundle).takes.first(where: { $0.id == id }) else {
            throw TapedeckError(.notFound, "Take \"\(pending.take.name)\" is no longer in its session's manifest; it was not marked finished.")
        }
        let finalURL = try confined(entry.file, in: bundle)
        if let pendingName = entry.pendingFile, case let pendingURL = try confined(pendingName, in: bundle),
           FileManager.default.fileExists(atPath: pendingURL.path) {
            try files.syncFile(pendingURL)
            try files.reached("finishTake", "audio synced")
            try files.moveIntoPlace(pendingURL, finalURL)
            try files.reached("finishTake", "audio moved into place")
        } else if !FileManager.default.fileExists(atPath: finalURL.path) {
            throw TapedeckError(.notFound, "The audio of take \"\(pending.take.name)\" is missing (\(pending.fileURL.path)); the take was not marked finished. Run `tapedeck doctor`.")
        }
        let finished = try locked(bundle) { () -> Take in
            var manifest = try readSession(pending.take.sessionID, in: bundle)
            guard let i = manifest.takes.firstIndex(where: { $0.id == id }) else {
                throw TapedeckError(.notFound, "Take \"\(pending.take.name)\" was deleted while it was being finished.")
            }
            manifest.takes[i].state = state
            manifest.takes[i].frames = frames
            manifest.takes[i].overruns = overruns
            manifest.takes[i].pendingFile = nil
            try commit(manifest, in: bundle, "finishTake")
            return makeTake(manifest.takes[i], of: manifest, bundle: bundle)
        }
        try releaseLock(of: id, in: bundle)
        return finished
    }

    /// Renames a take (the manifest only; the audio file keeps its name).
    /// - Thread: any. Blocks on disk I/O and on other processes' library locks (up to the lock timeout).
    public func renameTake(_ id: String, to name: String) throws -> Take {
        let name = try NameRules.validate(name, what: "take")
        let (sessionID, bundle) = try locateTake(id)
        return try locked(bundle) {
            var manifest = try readSession(sessionID, in: bundle)
            guard let i = manifest.takes.firstIndex(where: { $0.id == id }) else { throw Self.noTake(id) }
            if manifest.takes.contains(where: { $0.id != id && $0.name == name }) {
                throw TapedeckError(.alreadyExists, "This session has a take named \"\(name)\" already. Choose another name.")
            }
            manifest.takes[i].name = name
            try commit(manifest, in: bundle, "renameTake")
            return makeTake(manifest.takes[i], of: manifest, bundle: bundle)
        }
    }

    /// Removes a take from its manifest, then its audio. Refused while it is being recorded.
    /// - Thread: any. Blocks on disk I/O and on other processes' library locks (up to the lock timeout).
    public func deleteTake(_ id: String) throws {
        let (sessionID, bundle) = try locateTake(id)
        var claimed: Int32?
        defer { if let claimed { close(claimed) } }
        // The audio is removed under the lock too, so `doctor` never sees it between the entry's
        // removal and its own as a file no take names.
        try locked(bundle) {
            var manifest = try readSession(sessionID, in: bundle)
            guard let i = manifest.takes.firstIndex(where: { $0.id == id }) else { throw Self.noTake(id) }
            let entry = manifest.takes[i]
            if entry.state == .recording {
                guard !liveLocks.withLock({ $0[id] != nil }), let fd = claimTakeLock(id, in: bundle) else {
                    throw TapedeckError(.busy, "Take \"\(entry.name)\" is being recorded. Stop that recording first, then delete it.")
                }
                claimed = fd
            }
            manifest.takes.remove(at: i)
            try commit(manifest, in: bundle, "deleteTake")
            // The entry is gone; now the audio. A failure here leaves orphan files, never entries without audio.
            try files.remove(try member(entry.file, in: bundle))
            if let pending = entry.pendingFile { try files.remove(try member(pending, in: bundle)) }
            try files.syncDirectory(bundle)
            try files.reached("deleteTake", "audio removed")
        }
        if claimed != nil, let lock = try? member(".\(id).lock", in: bundle) { unlink(lock.path) }
    }

    // MARK: maintenance (tapedeck doctor)

    /// A path relative to ``rootURL`` (the bundle's own name in single-bundle mode is not part of it).
    private func relative(_ url: URL) -> String {
        relativePath(of: url) ?? url.lastPathComponent
    }

    /// Files in readable bundles that no entry names (audio with no take; pending files of takes
    /// no longer recording). The store's own files (manifest, locks) are not listed.
    /// - Thread: any. Blocks on disk I/O; takes a bundle's lock only to look again at a file
    ///   that seems unnamed (a delete may be between its entry and its audio).
    public func unreferencedFiles() throws -> [String] {
        var found: [String] = []
        for scanned in try scan() {
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
    private func unreferenced(_ entries: [String], in bundle: URL) -> [String] {
        guard let manifest = try? readManifest(bundle) else { return [] }
        var known: Set<String> = [Self.manifestName, Self.libraryLockName]
        for take in manifest.takes {
            known.insert(take.file)
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
    private func isLocked(_ id: String, in bundle: URL) -> Bool {
        if liveLocks.withLock({ $0[id] != nil }) { return true }
        guard let fd = claimTakeLock(id, in: bundle) else {
            return FileManager.default.fileExists(atPath: bundle.appendingPathComponent(".\(id).lock").path)
        }
        close(fd)
        return false
    }

    /// Bundles that cannot be used, as library-relative paths (see ``damagedBundles()``).
    /// - Thread: any. Blocks on disk I/O and, when something looks damaged, on the library lock.
    public func damagedParts() throws -> [DamagedPart] {
        try damagedBundles().map { DamagedPart(path: relative($0.url), problem: $0.problem) }
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

    // MARK: recovery

    /// Takes in state `recording` whose recording process is gone, claimed for recovery by this
    /// instance (their locks are held until ``completeRecovery(of:repaired:)``).
    /// - Thread: any. Blocks on disk I/O; never waits for a lock.
    public func interruptedTakes() throws -> [InterruptedTake] {
        var result: [(Date, InterruptedTake)] = []
        for scanned in try scan() {
            guard case .success(let manifest) = scanned.result else { continue }
            let bundle = scanned.url
            for entry in manifest.takes where entry.state == .recording {
                guard !liveLocks.withLock({ $0[entry.id] != nil }) else { continue }
                // Hold the take's lock from here until its recovery is committed, so neither the
                // recording process nor another recovering process can race this one.
                guard let fd = claimTakeLock(entry.id, in: bundle) else { continue }
                let current = try? readManifest(bundle).takes.first { $0.id == entry.id }
                guard let current, current.state == .recording else {
                    close(fd)
                    continue
                }
                // A take whose file names cannot be used is skipped (doctor reports the bundle's
                // files), never allowed to stop the rest of the library from opening.
                let candidates = [current.pendingFile, current.file].compactMap { $0 }
                guard let urls = try? candidates.map({ try confined($0, in: bundle) }) else {
                    close(fd)
                    continue
                }
                let url = urls.first { FileManager.default.fileExists(atPath: $0.path) }
                liveLocks.withLock { $0[entry.id] = fd }
                result.append((current.startDate, InterruptedTake(take: makeTake(current, of: manifest, bundle: bundle), fileURL: url)))
            }
        }
        return result.sorted { $0.0 < $1.0 }.map(\.1)
    }

    /// Moves a repaired take's audio into place and marks it `recovered`, or removes its entry
    /// when no audio exists. Only for takes this instance claimed with ``interruptedTakes()``.
    /// - Thread: any. Blocks on disk I/O and on other processes' library locks (up to the lock timeout).
    public func completeRecovery(of take: Take, repaired: RepairResult?) throws -> Take? {
        guard liveLocks.withLock({ $0[take.id] != nil }) else {
            throw TapedeckError(.busy, "Take \"\(take.name)\" was not claimed for recovery by this process. Open the library again.")
        }
        let bundle = try bundleURL(for: take.sessionID, verify: true)
        guard let repaired else {
            try locked(bundle) {
                var manifest = try readSession(take.sessionID, in: bundle)
                manifest.takes.removeAll { $0.id == take.id && $0.state == .recording }
                try commit(manifest, in: bundle, "completeRecovery")
            }
            try releaseLock(of: take.id, in: bundle)
            return nil
        }
        try repaired.format.validate()
        guard (0...Manifest.maxFrames).contains(repaired.frames) else {
            throw TapedeckError(.invalidArgument, "A take of \(repaired.frames) frames cannot be stored; the count must be 0 to 2^40.")
        }
        guard let entry = try readSession(take.sessionID, in: bundle).takes.first(where: { $0.id == take.id }) else {
            try releaseLock(of: take.id, in: bundle)
            throw TapedeckError(.busy, "Take \"\(take.name)\" was deleted while it was being recovered.")
        }
        let finalURL = try confined(entry.file, in: bundle)
        if let pendingName = entry.pendingFile, case let pendingURL = try confined(pendingName, in: bundle),
           FileManager.default.fileExists(atPath: pendingURL.path) {
            try files.syncFile(pendingURL)
            try files.moveIntoPlace(pendingURL, finalURL)
            try files.reached("completeRecovery", "audio moved into place")
        }
        let recovered = try locked(bundle) { () -> Take? in
            var manifest = try readSession(take.sessionID, in: bundle)
            guard let i = manifest.takes.firstIndex(where: { $0.id == take.id && $0.state == .recording }) else { return nil }
            manifest.takes[i].state = .recovered
            manifest.takes[i].frames = repaired.frames
            manifest.takes[i].format = repaired.format
            manifest.takes[i].pendingFile = nil
            try commit(manifest, in: bundle, "completeRecovery")
            return makeTake(manifest.takes[i], of: manifest, bundle: bundle)
        }
        try releaseLock(of: take.id, in: bundle)
        guard let recovered else {
            throw TapedeckError(.busy, "Take \"\(take.name)\" changed while it was being recovered; it was left as it is.")
        }
        return recovered
    }

    // MARK: manifests

    /// One `.tapedeck` folder as found on disk.
    struct Scanned {
        var url: URL
        var result: Result<Manifest, TapedeckError>
    }

    /// Every `.tapedeck` folder of the library (or the one bundle), sorted by folder name, each
    /// with its manifest or why it has none. A second bundle with a session id seen already is
    /// refused as a duplicate.
    private func scan() throws -> [Scanned] {
        if isSingleBundle {
            return [Scanned(url: rootURL, result: Result { try readManifest(rootURL) }.mapError(Self.typed))]
        }
        let names: [String]
        do { names = try FileManager.default.contentsOfDirectory(atPath: rootURL.path) } catch {
            throw TapedeckError(.io, "Could not list the library \(rootURL.path): \(error.localizedDescription). Check that the folder exists and that you may read it.")
        }
        var out: [Scanned] = []
        var seen: [String: String] = [:]
        for name in names.sorted() where name.hasSuffix(Self.bundleExtension) && !name.hasPrefix(".") {
            let url = rootURL.appendingPathComponent(name)
            var st = stat()
            guard lstat(url.path, &st) == 0 else { continue }
            var result: Result<Manifest, TapedeckError>
            switch st.st_mode & S_IFMT {
            case S_IFDIR:
                result = Result { try readManifest(url) }.mapError(Self.typed)
            case S_IFLNK:
                result = .failure(TapedeckError(.corruptFile, "\(url.path) is a symbolic link. Tapedeck does not follow links in a library; copy the bundle in instead."))
            default:
                result = .failure(TapedeckError(.corruptFile, "\(url.path) is not a folder, so it is not a session bundle. Rename or remove it."))
            }
            if case .success(let manifest) = result {
                if let first = seen[manifest.id] {
                    result = .failure(TapedeckError(.corruptFile,
                        "\(url.path) holds the same session (id \(manifest.id)) as \(first). It is a copy; move one of the two out of the library."))
                } else {
                    seen[manifest.id] = name
                }
            }
            out.append(Scanned(url: url, result: result))
        }
        folders.withLock { $0 = seen }
        return out
    }

    private static func typed(_ error: any Error) -> TapedeckError {
        error as? TapedeckError ?? TapedeckError(.io, "\(error)")
    }

    /// Reads and validates a bundle's manifest: never through a link, never more than 16 MiB.
    /// - Throws: `.notFound` when the bundle has no manifest, `.corruptFile` naming the bundle,
    ///   the JSON path and the problem when it cannot be used.
    func readManifest(_ bundle: URL) throws -> Manifest {
        let url = bundle.appendingPathComponent(Self.manifestName)
        let fd = open(url.path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else {
            let code = errno
            if code == ENOENT {
                throw TapedeckError(.notFound,
                    "\(bundle.path) has no manifest.json, so it is not a session (a creation or deletion was interrupted). Remove the folder if no tapedeck process is running, or restore its manifest from a copy.",
                    systemCode: code)
            }
            if code == ELOOP { throw corrupt(bundle, "", "manifest.json is a symbolic link") }
            throw TapedeckError.system(code, while: "open \(url.path)")
        }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw TapedeckError.system(errno, while: "inspect \(url.path)") }
        guard (st.st_mode & S_IFMT) == S_IFREG else { throw corrupt(bundle, "", "manifest.json is not a regular file") }
        guard Int(st.st_size) <= Manifest.maxBytes else {
            throw corrupt(bundle, "", "manifest.json is \(st.st_size) bytes; a manifest may be at most 16 MiB")
        }
        var data = Data()
        data.reserveCapacity(Int(st.st_size))
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw TapedeckError.system(errno, while: "read \(url.path)")
            }
            if n == 0 { break }
            data.append(contentsOf: buffer[0..<n])
            guard data.count <= Manifest.maxBytes else { throw corrupt(bundle, "", "manifest.json is larger than 16 MiB") }
        }
        do {
            return try ManifestCodec.decode(data)
        } catch let problem as ManifestProblem {
            throw corrupt(bundle, problem.path, problem.problem)
        }
    }

    private func corrupt(_ bundle: URL, _ path: String, _ problem: String) -> TapedeckError {
        let place = path.isEmpty ? "" : " at \(path)"
        return TapedeckError(.corruptFile,
            "The session bundle \(bundle.path) cannot be opened: its manifest\(place) is not usable: \(problem). Tapedeck leaves the bundle untouched; check it with `tapedeck doctor` or restore it from a copy.")
    }

    /// Reads the manifest of session `id` in `bundle`, refusing a bundle that holds another session.
    private func readSession(_ id: String, in bundle: URL) throws -> Manifest {
        let manifest: Manifest
        do { manifest = try readManifest(bundle) } catch let error as TapedeckError where error.code == .notFound {
            throw Self.noSession(id)
        }
        guard manifest.id == id else { throw Self.noSession(id) }
        return manifest
    }

    /// Replaces a bundle's manifest atomically: a new temporary file (synced), `rename`, folder sync.
    private func commit(_ manifest: Manifest, in bundle: URL, _ operation: String) throws {
        let data = try ManifestCodec.encode(manifest)
        guard data.count <= Manifest.maxBytes else {
            throw TapedeckError(.invalidArgument, "Session \"\(manifest.name)\" would need a manifest larger than 16 MiB. Shorten its notes or names, or record into a new session.")
        }
        let temporary = try confined(Self.temporaryPrefix + UUID().uuidString.lowercased(), in: bundle)
        do {
            try files.writeNewFile(data, to: temporary)
            try files.reached(operation, "manifest written")
            try files.replace(bundle.appendingPathComponent(Self.manifestName), with: temporary)
        } catch {
            // Not a change to the library (the old manifest stands); a partial temporary must not
            // hold disk space. A crash that skips this leaves one that the next open removes.
            unlink(temporary.path)
            throw error
        }
        try files.syncDirectory(bundle)
        try files.reached(operation, "manifest committed")
    }

    /// Removes manifest temporaries a dead process left (never read; under the lock, so no live
    /// writer's file is touched).
    private func removeLeftoverTemporaries() throws {
        var bundles: [URL] = [rootURL]
        if !isSingleBundle {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: rootURL.path)) ?? []
            bundles = names.sorted().filter { $0.hasSuffix(Self.bundleExtension) && !$0.hasPrefix(".") }.map { rootURL.appendingPathComponent($0) }.filter {
                var st = stat()
                return lstat($0.path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR
            }
        }
        func leftovers(_ bundle: URL) -> [String] {
            ((try? FileManager.default.contentsOfDirectory(atPath: bundle.path)) ?? []).filter { $0.hasPrefix(Self.temporaryPrefix) }.sorted()
        }
        for bundle in bundles where !leftovers(bundle).isEmpty {
            try locked(bundle) {
                for name in leftovers(bundle) { try files.remove(try member(name, in: bundle)) }
            }
        }
    }

    // MARK: locating

    /// The bundle holding session `id`. With `verify`, a remembered folder is checked against
    /// its manifest (and the library scanned again when it no longer matches).
    private func bundleURL(for id: String, verify: Bool) throws -> URL {
        if isSingleBundle {
            if verify { _ = try readSession(id, in: rootURL) }
            return rootURL
        }
        if let folder = folders.withLock({ $0[id] }) {
            let url = rootURL.appendingPathComponent(folder)
            var st = stat()
            if lstat(url.path, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR {
                if !verify || (try? readManifest(url))?.id == id { return url }
            }
        }
        for scanned in try scan() {
            if case .success(let manifest) = scanned.result, manifest.id == id { return scanned.url }
        }
        throw Self.noSession(id)
    }

    /// The session and bundle holding take `id`.
    private func locateTake(_ id: String) throws -> (sessionID: String, bundle: URL) {
        var found: [(String, URL)] = []
        for scanned in try scan() {
            if case .success(let manifest) = scanned.result, manifest.takes.contains(where: { $0.id == id }) {
                found.append((manifest.id, scanned.url))
            }
        }
        guard let first = found.first else { throw Self.noTake(id) }
        // Ids are unique per manifest only; a copied or hostile bundle may repeat another's. Acting
        // on the wrong session's take is never acceptable, so an ambiguous id is refused.
        guard found.count == 1 else {
            throw TapedeckError(.corruptFile, "The take id \(id) appears in \(found.count) bundles (\(found.map(\.1.lastPathComponent).joined(separator: ", "))). Move the copied bundle out of the library, or run `tapedeck doctor`.")
        }
        return first
    }

    private static func noSession(_ id: String) -> TapedeckError {
        TapedeckError(.notFound, "No session has the id \(id). Run `tapedeck list` to see the sessions.")
    }

    private static func noTake(_ id: String) -> TapedeckError {
        TapedeckError(.notFound, "No take has the id \(id). Run `tapedeck list` to see the takes.")
    }

    private func outside(_ path: String) -> TapedeckError {
        TapedeckError(.corruptFile, "The path \"\(path)\" does not lie inside its session's bundle in \(rootURL.path). Run `tapedeck doctor`.")
    }

    /// `SLUG-ID8.tapedeck`.
    static func folderName(_ name: String, id: String) -> String {
        NameRules.slug(name, fallback: "session") + "-" + String(id.prefix(8)) + bundleExtension
    }

    /// Hidden files Tapedeck itself makes in a bundle.
    static func isOwnHiddenFile(_ name: String) -> Bool {
        name.hasPrefix(".") && name != "." && name != ".."
            && (name.hasSuffix(".lock") || name.contains(".pending.") || name.hasPrefix(temporaryPrefix))
    }

    private func session(_ manifest: Manifest, bundle: URL) -> Session {
        let takes = manifest.takes.sorted { ($0.number, $0.startDate, $0.id) < ($1.number, $1.startDate, $1.id) }
        return Session(id: manifest.id, name: manifest.name, createdAt: manifest.createdAt,
                       takes: takes.map { makeTake($0, of: manifest, bundle: bundle) })
    }

    private func makeTake(_ entry: Manifest.Entry, of manifest: Manifest, bundle: URL) -> Take {
        let file = isSingleBundle ? entry.file : bundle.lastPathComponent + "/" + entry.file
        return Take(id: entry.id, sessionID: manifest.id, name: entry.name, number: entry.number, createdAt: entry.startDate,
                    state: entry.state, format: entry.format, encoding: entry.encoding, file: file, frames: entry.frames,
                    overruns: entry.overruns, notes: entry.notes)
    }

    // MARK: confinement

    /// Checks that `bundle` is this store's bundle (the root, or a real folder directly in it).
    private func checkBundle(_ bundle: URL) throws {
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
    private func member(_ name: String, in bundle: URL) throws -> URL {
        guard !name.isEmpty, !name.contains("/"), name != ".", name != "..", !name.utf8.contains(0) else {
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
    private func locked<T>(_ bundle: URL?, _ body: () throws -> T) throws -> T {
        let deadline = Date().addingTimeInterval(lockTimeout)
        guard threadLock.lock(before: deadline) else { throw busy(rootURL.appendingPathComponent(Self.libraryLockName)) }
        defer { threadLock.unlock() }
        let rootFD = try waitForLock(rootURL.appendingPathComponent(Self.libraryLockName), until: deadline)
        defer { close(rootFD) }
        var bundleFD: Int32 = -1
        defer { if bundleFD >= 0 { close(bundleFD) } }
        if let bundle, !isSingleBundle {
            bundleFD = try waitForLock(try member(Self.libraryLockName, in: bundle), until: deadline)
        }
        return try body()
    }

    private func waitForLock(_ url: URL, until deadline: Date) throws -> Int32 {
        let fd = open(url.path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, FileModes.file)
        guard fd >= 0 else { throw TapedeckError.system(errno, while: "open the lock file \(url.path)") }
        while true {
            if flock(fd, LOCK_EX | LOCK_NB) == 0 { return fd }
            let code = errno
            guard code == EWOULDBLOCK || code == EINTR else {
                close(fd)
                throw TapedeckError.system(code, while: "lock \(url.path)")
            }
            if Date() >= deadline {
                close(fd)
                throw busy(url)
            }
            usleep(10_000)
        }
    }

    private func busy(_ url: URL) -> TapedeckError {
        TapedeckError(.busy,
            "Another tapedeck process held the library lock \(url.path) for more than \(lockTimeout) seconds. Wait for it to finish and try again, or raise \(lockTimeoutKey).")
    }

    /// Takes the lock of a take that no live process holds, creating the lock file if it is gone.
    /// - Returns: the locked descriptor, or `nil` when a live process holds the lock.
    private func claimTakeLock(_ id: String, in bundle: URL) -> Int32? {
        guard let url = try? confined(".\(id).lock", in: bundle) else { return nil }
        for _ in 0..<3 {
            let fd = open(url.path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, FileModes.file)
            guard fd >= 0 else { return nil }
            guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
                close(fd)
                return nil
            }
            // The file may have been removed (by a finishing recorder) between open and flock:
            // only a lock on the file still at that name counts.
            var held = stat(), named = stat()
            if fstat(fd, &held) == 0, lstat(url.path, &named) == 0, held.st_ino == named.st_ino, held.st_dev == named.st_dev {
                return fd
            }
            close(fd)
        }
        return nil
    }

    /// Removes a take's lock file and closes this process's descriptor on it.
    /// Removes and releases a take's lock. Best effort: it runs after the change it guarded was
    /// committed, and a lock file left behind is harmless (an unheld lock means a dead process).
    private func releaseLock(of id: String, in bundle: URL) throws {
        let fd = liveLocks.withLock { $0.removeValue(forKey: id) }
        defer { if let fd { close(fd) } }
        if let url = try? member(".\(id).lock", in: bundle) { unlink(url.path) }
    }
}
