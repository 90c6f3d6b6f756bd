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
/// file outside its bundle is refused with `TapedeckError.Code.corruptFile` and never followed.
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
/// `TakeStorage`.
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
    let files: DurableFiles
    let lockTimeout: TimeInterval
    /// How messages name the lock timeout setting, e.g. `storage.bundle.lock-timeout`.
    let lockTimeoutKey: String
    /// Serializes this instance's threads before they queue for the library's `flock`.
    let threadLock = NSLock()
    /// Lock files of takes this process is recording or recovering, by take id.
    let liveLocks = Mutex<[String: Int32]>([:])
    /// Bundle folder names by session id, as last seen.
    let folders = Mutex<[String: String]>([:])
    /// Bundle summaries by folder name, as last made or read (see `summaries()`).
    let summaryCache = Mutex<[String: BundleSummary]>([:])
    /// How many manifests this instance has parsed (the tests' measure of what a lookup reads).
    let manifestReads = Atomic<Int>(0)

    /// Opens the library at `rootURL`, creating the folder if needed; or, when `rootURL` is a
    /// `.tapedeck` folder holding `manifest.json`, that one bundle in place.
    ///
    /// Leftover `.manifest.json.tmp-*` files (from a process that died while writing a manifest)
    /// are removed; they are never read.
    /// - Parameters:
    ///   - rootURL: the library folder, or a `.tapedeck` bundle folder to open in place.
    ///   - seam: observes every file-system mutation and durable step (tests inject faults here).
    ///   - lockTimeout: seconds to wait for another process holding the library lock.
    ///   - lockTimeoutKey: how messages name that setting (the plugin passes its full key).
    /// - Throws: `TapedeckError` `.corruptFile` when a bundle opened in place has a bad
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

    /// The `.tapedeck` folders that are not usable sessions, with the reason: a manifest that
    /// fails validation, a missing manifest (a half-created or half-deleted bundle), a symbolic
    /// link, or a copy of a session that is in the library already. For `tapedeck doctor`.
    ///
    /// A session being created or deleted lacks its manifest for a moment, under the library
    /// lock; so a bundle found without one is looked at again holding that lock, and reported
    /// only if it is still there without a usable manifest.
    /// - Throws: `TapedeckError` when the library cannot be listed, or stays busy.
    /// - Thread: any. Blocks on disk I/O, and on the library lock when a manifest is missing.
    public func damagedBundles() throws -> [(url: URL, problem: String)] {
        let suspects: [(url: URL, error: TapedeckError)] = try summaries().compactMap { scanned in
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
            let existing = try summaries().compactMap(\.summary)
            let finalName = try StoreNames.sessionName(chosen, taken: existing.map(\.name))
            // Creation dates only grow, so sessions list in creation order.
            var created = UTCTimestamp.quantize(Date())
            if let latest = existing.map(\.createdAt).max(), created <= latest {
                created = UTCTimestamp.quantize(latest.addingTimeInterval(0.000_001))
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
            let others = try summaries().compactMap(\.summary).filter { $0.sessionID != id }
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
            forgetSummary(of: bundle.lastPathComponent)
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
        let pendingName = StoreNames.pendingFile(id: id, fileExtension: fileExtension)
        // Hold the take's lock before its entry exists, so no other process ever sees it unlocked while live.
        let pendingURL = try confined(pendingName, in: bundle)
        let lockURL = try confined(StoreNames.lockFile(id: id), in: bundle)
        let lockFD = try LockFile.create(lockURL)
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
                let finalName = try StoreNames.takeName(chosen, number: number, taken: used, session: manifest.name)
                let file = StoreNames.takeFile(number: number, name: finalName, id: id, fileExtension: fileExtension)
                let entry = Manifest.Entry(id: id, name: finalName, number: number, file: file, format: format, encoding: encoding,
                                           frames: 0, startDate: UTCTimestamp.quantize(startDate), state: .recording, overruns: [],
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
        let overruns = overruns.map { OverrunEvent(frame: $0.frame, frames: $0.frames, date: UTCTimestamp.quantize($0.date), cause: $0.cause) }
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

    /// Sets a take's notes, tags and clip count in its manifest.
    /// - Thread: any. Blocks on disk I/O and on other processes' library locks (up to the lock timeout).
    public func annotateTake(_ id: String, _ annotations: TakeAnnotations) throws -> Take {
        try annotations.validate()
        let (sessionID, bundle) = try locateTake(id)
        return try locked(bundle) {
            var manifest = try readSession(sessionID, in: bundle)
            guard let i = manifest.takes.firstIndex(where: { $0.id == id }) else { throw Self.noTake(id) }
            manifest.takes[i].notes = annotations.notes
            manifest.takes[i].tags = annotations.tags
            manifest.takes[i].clippedSamples = annotations.clippedSamples
            manifest.takes[i].run = annotations.run
            manifest.takes[i].markers = annotations.markers
            manifest.takes[i].loudness = annotations.loudness
            manifest.takes[i].began = annotations.began
            try commit(manifest, in: bundle, "annotateTake")
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
            let audio = try member(entry.file, in: bundle)
            try files.remove(audio)
            for companion in TakeCompanions.urls(of: audio) { try files.remove(companion) }
            if let pending = entry.pendingFile { try files.remove(try member(pending, in: bundle)) }
            try files.syncDirectory(bundle)
            try files.reached("deleteTake", "audio removed")
        }
        if claimed != nil, let lock = try? member(StoreNames.lockFile(id: id), in: bundle) { unlink(lock.path) }
    }
}
