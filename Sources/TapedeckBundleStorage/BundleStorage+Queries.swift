public import TapedeckCore
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The reads that keep commands fast in a library of any size: sessions listed one bundle at a
/// time, and a user's reference, a recording's session or a take found through the summaries,
/// reading only the manifests that hold what was asked for.
extension BundleStorage {
    /// Every readable session, oldest first (by creation date, then id), takes by number.
    ///
    /// Bundles whose manifest cannot be used are skipped (see ``damagedBundles()``) so one bad
    /// copy never hides the rest of the library; with a single bundle opened in place, a bad
    /// manifest throws `.corruptFile`.
    /// - Thread: any. Blocks on disk I/O; takes no lock (manifests are replaced atomically).
    public func sessions() throws -> [Session] {
        var out: [Session] = []
        try forEachSession { out.append($0) }
        return out
    }

    /// One manifest read at a time, in ``sessions()``'s order (from the summaries).
    /// - Thread: any; `body` runs on the calling thread. Blocks on disk I/O, and for as long as `body` does.
    public func forEachSession(_ body: (Session) throws -> Void) throws {
        if isSingleBundle {
            try body(session(try readManifest(rootURL), bundle: rootURL))
            return
        }
        for (url, summary) in try sessionSummaries() {
            // A bundle damaged or replaced since its summary was made is left out, as a damaged one is.
            guard let manifest = try? readManifest(url), manifest.id == summary.sessionID else { continue }
            try body(session(manifest, bundle: url))
        }
    }

    /// Id prefixes among the summaries' session and take ids, session names, and for `last` the
    /// sessions of the newest takes; then those bundles' manifests.
    /// - Thread: any. Blocks on disk I/O.
    public func sessions(matching text: String) throws -> [Session] {
        let all = try sessionSummaries()
        var chosen: [(url: URL, summary: BundleSummary)] = []
        func choose(_ candidate: (url: URL, summary: BundleSummary)) {
            if !chosen.contains(where: { $0.url == candidate.url }) { chosen.append(candidate) }
        }
        let keys = ReferenceKeys(text)
        if let prefix = keys.idPrefix.map({ Array($0.utf8) }) {
            for candidate in all where BundleSummary.hasPrefix(candidate.summary.sessionID.utf8, prefix)
                || candidate.summary.hasTake(prefixedBy: prefix) {
                choose(candidate)
            }
        }
        for candidate in all where keys.sessionNames.contains(candidate.summary.name) { choose(candidate) }
        if keys.isLast {
            // The sessions of the newest takes (a few, in case the newest one's bundle changed meanwhile).
            let active = all.filter { $0.summary.newestTake != nil }.sorted { $0.summary.lastActive > $1.summary.lastActive }
            for candidate in active.prefix(8) { choose(candidate) }
        }
        return chosen.sorted { ($0.summary.createdAt, $0.summary.sessionID) < ($1.summary.createdAt, $1.summary.sessionID) }
            .compactMap { candidate in
                guard let manifest = try? readManifest(candidate.url), manifest.id == candidate.summary.sessionID else { return nil }
                return session(manifest, bundle: candidate.url)
            }
    }

    /// From the summaries alone: no manifest is read.
    /// - Thread: any. Blocks on disk I/O.
    public func findSessionForRecording(named name: String?) throws -> Session? {
        let all = try sessionSummaries().map(\.summary)
        // max(by:) keeps the first of equals, and the list is oldest first.
        let found = name.map { name in all.first { $0.name == name } } ?? all.max { $0.lastActive < $1.lastActive }
        return found.map { Session(id: $0.sessionID, name: $0.name, createdAt: $0.createdAt) }
    }

    /// Each take's file looked at with one `fstatat` in its bundle folder (opened once, never
    /// through a link); a name the manifest's rules refuse, or a link, has no path.
    /// - Thread: any. Blocks on disk I/O.
    public func audioFiles(of session: Session) -> [String: AudioFileInfo] {
        var found: [String: AudioFileInfo] = [:]
        found.reserveCapacity(session.takes.count)
        guard let bundle = try? bundleURL(for: session.id, verify: false), (try? checkBundle(bundle)) != nil else {
            for take in session.takes { found[take.id] = AudioFileInfo(path: nil, bytes: nil) }
            return found
        }
        let folderFD = open(bundle.path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        defer { if folderFD >= 0 { close(folderFD) } }
        let folderPrefix = isSingleBundle ? "" : bundle.lastPathComponent + "/"
        for take in session.takes {
            guard folderFD >= 0, take.file.hasPrefix(folderPrefix), case let name = String(take.file.dropFirst(folderPrefix.count)),
                  ManifestCodec.fileNameProblem(name, pending: false) == nil else {
                found[take.id] = AudioFileInfo(path: nil, bytes: nil)
                continue
            }
            var st = stat()
            if fstatat(folderFD, name, &st, AT_SYMLINK_NOFOLLOW) == 0 {
                found[take.id] = (st.st_mode & S_IFMT) == S_IFREG
                    ? AudioFileInfo(path: bundle.path + "/" + name, bytes: Int64(st.st_size)) : AudioFileInfo(path: nil, bytes: nil)
            } else {
                found[take.id] = AudioFileInfo(path: bundle.path + "/" + name, bytes: nil)
            }
        }
        return found
    }
}
