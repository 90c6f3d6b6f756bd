import Foundation
import TapedeckCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The library's summaries (`.tapedeck-index/`): one ``BundleSummary`` per bundle, so that an
/// open of the library, a reference, a recording's start and a take's lookup read one
/// manifest, not all of them.
///
/// The summaries are a cache of the manifests, never a second truth: each is used only while
/// its manifest has the ``FileKey`` it was made from, is made again from the manifest when not
/// (by any process that notices), and is replaced by every commit this store makes. They are
/// written without the seam and without syncing: losing one (a crash, a full disk, a read-only
/// library) costs one manifest read, never a take.
extension BundleStorage {
    static let indexFolderName = ".tapedeck-index"
    static let indexTemporaryPrefix = ".tmp-"

    /// One `.tapedeck` folder of the library with its summary, or why it is no session.
    struct Summarized {
        var url: URL
        var result: Result<BundleSummary, TapedeckError>

        var summary: BundleSummary? { try? result.get() }
    }

    /// Every `.tapedeck` folder of the library (or the one bundle), sorted by folder name, each
    /// with its summary or why it has none. A second bundle with a session id seen already is
    /// refused as a duplicate. Reads only the manifests whose summary is missing or out of date.
    func summaries() throws -> [Summarized] {
        if isSingleBundle {
            return [Summarized(url: rootURL, result: Result {
                let (manifest, key) = try readManifestAndKey(rootURL)
                return BundleSummary(manifest: manifest, key: key)
            }.mapError(Self.typed))]
        }
        var out: [Summarized] = []
        var seen: [String: String] = [:]
        for name in try bundleNames() {
            let url = rootURL.appendingPathComponent(name)
            guard var result = folderResult(url, { try summary(of: name, at: url) }) else { continue }
            if case .success(let summary) = result {
                if let first = seen[summary.sessionID] {
                    result = .failure(duplicate(url, id: summary.sessionID, first: first))
                } else {
                    seen[summary.sessionID] = name
                }
            }
            out.append(Summarized(url: url, result: result))
        }
        folders.withLock { $0 = seen }
        return out
    }

    /// The usable summaries, oldest session first (by creation date, then id): ``sessions()``'s order.
    func sessionSummaries() throws -> [(url: URL, summary: BundleSummary)] {
        try summaries().compactMap { s in s.summary.map { (s.url, $0) } }
            .sorted { ($0.summary.createdAt, $0.summary.sessionID) < ($1.summary.createdAt, $1.summary.sessionID) }
    }

    /// The summary of bundle `name`: from memory or its file while the manifest keeps its key,
    /// else made from the manifest (and stored).
    func summary(of name: String, at url: URL) throws -> BundleSummary {
        var st = stat()
        var known: BundleSummary?
        if lstat(url.path + "/" + Self.manifestName, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG {
            let key = FileKey(st)
            known = summaryCache.withLock { $0[name] }
            if key.isTrustworthy {
                if let known, known.manifestKey == key { return known }
                // Another process may have made it since this one last looked.
                if let stored = loadSummary(name) {
                    known = stored
                    if stored.manifestKey == key {
                        summaryCache.withLock { $0[name] = stored }
                        return stored
                    }
                }
            }
        }
        let (manifest, key) = try readManifestAndKey(url)
        let made = BundleSummary(manifest: manifest, key: key, folderKey: known?.folderKey ?? FileKey())
        remember(made, for: name)
        return made
    }

    /// Keeps a summary in memory and in its file (when its key can be trusted; else forgets it).
    func remember(_ summary: BundleSummary, for name: String) {
        guard summary.manifestKey.isTrustworthy else {
            forgetSummary(of: name)
            return
        }
        summaryCache.withLock { $0[name] = summary }
        if !storeSummary(summary, for: name) { removeSummaryFile(name) }
    }

    /// Drops bundle `name`'s summary, in memory and on disk.
    func forgetSummary(of name: String) {
        summaryCache.withLock { _ = $0.removeValue(forKey: name) }
        removeSummaryFile(name)
    }

    /// After this store committed `manifest` in `bundle` (holding the library lock): its summary
    /// now, so that a file system whose times could hide the change still gives the new one.
    func noteCommitted(_ manifest: Manifest, in bundle: URL) {
        guard !isSingleBundle else { return }
        let name = bundle.lastPathComponent
        var st = stat()
        guard lstat(bundle.appendingPathComponent(Self.manifestName).path, &st) == 0 else {
            forgetSummary(of: name)
            return
        }
        let folderKey = summaryCache.withLock { $0[name]?.folderKey } ?? FileKey()
        remember(BundleSummary(manifest: manifest, key: FileKey(st), folderKey: folderKey), for: name)
    }

    // MARK: the summary files

    /// Every access to the summary files goes through the index folder opened without
    /// following a link (at its own path or on the way): a link there is never written or read
    /// through, so nothing outside the library is touched.
    /// - Returns: the folder's descriptor (the caller closes it), or -1.
    func openIndexFolder(creating: Bool) -> Int32 {
        let path = rootURL.appendingPathComponent(Self.indexFolderName).path
        let flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC
        var fd = open(path, flags)
        if fd < 0 && errno == ENOENT && creating && (mkdir(path, mode_t(FileModes.directory)) == 0 || errno == EEXIST) {
            fd = open(path, flags)
        }
        return fd
    }

    /// Removes bundle `name`'s summary file, if there is one. Best effort.
    func removeSummaryFile(_ name: String) {
        let folder = openIndexFolder(creating: false)
        guard folder >= 0 else { return }
        unlinkat(folder, name, 0)
        close(folder)
    }

    /// Bundle `name`'s stored summary; `nil` when there is none that can be read.
    func loadSummary(_ name: String) -> BundleSummary? {
        let folder = openIndexFolder(creating: false)
        guard folder >= 0 else { return nil }
        let fd = openat(folder, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        close(folder)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG, Int(st.st_size) <= BundleSummary.maxBytes else { return nil }
        let file = PositionalFile(fd: fd, path: name, kind: "summary")
        var bytes: [UInt8] = []
        while bytes.count < Int(st.st_size) {
            guard let piece = try? file.read(min(PositionalFile.maxRead, Int(st.st_size) - bytes.count), at: Int64(bytes.count)) else { return nil }
            bytes += piece
        }
        return BundleSummary.decode(bytes)
    }

    /// Writes bundle `name`'s summary (a temporary renamed into place). Best effort.
    /// - Returns: whether it was written.
    @discardableResult
    func storeSummary(_ summary: BundleSummary, for name: String) -> Bool {
        let folder = openIndexFolder(creating: true)
        guard folder >= 0 else { return false }
        defer { close(folder) }
        let temporary = Self.indexTemporaryPrefix + UUID().uuidString.lowercased()
        let fd = openat(folder, temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode_t(FileModes.file))
        guard fd >= 0 else { return false }
        let written = (try? PositionalFile(fd: fd, path: temporary, kind: "summary").write(summary.encoded(), at: 0)) != nil
        close(fd)
        guard written, renameat(folder, temporary, folder, name) == 0 else {
            unlinkat(folder, temporary, 0)
            return false
        }
        return true
    }

    /// Removes summaries of bundles that are gone and temporaries a dead process left (older
    /// than a minute: a live writer's is younger). Best effort.
    func pruneIndex(keeping names: Set<String>) {
        let folder = openIndexFolder(creating: false)
        guard folder >= 0 else { return }
        defer { close(folder) }
        // The entries are read through a descriptor of their own (closedir closes it).
        let listing = openat(folder, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard listing >= 0, let entries = Self.directoryNames(fd: listing) else { return }
        let now = time(nil)
        var st = stat()
        for entry in entries {
            if entry.hasPrefix(Self.indexTemporaryPrefix) {
                if fstatat(folder, entry, &st, AT_SYMLINK_NOFOLLOW) == 0, Int(now) - Int(st.st_mtim.tv_sec) > 60 { unlinkat(folder, entry, 0) }
            } else if !names.contains(entry) {
                summaryCache.withLock { _ = $0.removeValue(forKey: entry) }
                unlinkat(folder, entry, 0)
            }
        }
    }

    // MARK: listing

    /// The names of the library's `.tapedeck` folders (not hidden), sorted.
    func bundleNames() throws -> [String] {
        guard let names = Self.directoryNames(rootURL.path) else {
            let code = errno
            throw TapedeckError(.io, "Could not list the library \(rootURL.path): \(String(cString: strerror(code))). Check that the folder exists and that you may read it.", systemCode: code)
        }
        return names.filter { $0.hasSuffix(Self.bundleExtension) && !$0.hasPrefix(".") }.sorted()
    }

    /// A folder's entries (without `.` and `..`), read with `readdir`; `nil` when it cannot be read.
    static func directoryNames(_ path: String) -> [String]? {
        guard let dir = opendir(path) else { return nil }
        return directoryNames(dir)
    }

    /// The entries of the folder open at `fd`, which this takes over (and closes).
    static func directoryNames(fd: Int32) -> [String]? {
        guard let dir = fdopendir(fd) else {
            close(fd)
            return nil
        }
        return directoryNames(dir)
    }

    private static func directoryNames(_ dir: OpaquePointer) -> [String]? {
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafePointer(to: &entry.pointee.d_name) {
                $0.withMemoryRebound(to: CChar.self, capacity: Int(NAME_MAX) + 1) { String(cString: $0) }
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// What a `.tapedeck` entry of the library is: `body`'s answer for a folder, a refusal for a
    /// link or a file, `nil` when it vanished.
    func folderResult<T>(_ url: URL, _ body: () throws -> T) -> Result<T, TapedeckError>? {
        var st = stat()
        guard lstat(url.path, &st) == 0 else { return nil }
        switch st.st_mode & S_IFMT {
        case S_IFDIR:
            return Result { try body() }.mapError(Self.typed)
        case S_IFLNK:
            return .failure(TapedeckError(.corruptFile, "\(url.path) is a symbolic link. Tapedeck does not follow links in a library; copy the bundle in instead."))
        default:
            return .failure(TapedeckError(.corruptFile, "\(url.path) is not a folder, so it is not a session bundle. Rename or remove it."))
        }
    }

    func duplicate(_ url: URL, id: String, first: String) -> TapedeckError {
        TapedeckError(.corruptFile, "\(url.path) holds the same session (id \(id)) as \(first). It is a copy; move one of the two out of the library.")
    }
}
