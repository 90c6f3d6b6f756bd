import Foundation
import TapedeckCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Each bundle's `manifest.json` on disk: scanned, read as untrusted input, and replaced
/// atomically under the library lock.
extension BundleStorage {
    // MARK: manifests

    static func typed(_ error: any Error) -> TapedeckError {
        error as? TapedeckError ?? TapedeckError(.io, "\(error)")
    }

    /// Reads and validates a bundle's manifest: never through a link, never more than 16 MiB.
    /// - Throws: `.notFound` when the bundle has no manifest, `.corruptFile` naming the bundle,
    ///   the JSON path and the problem when it cannot be used.
    func readManifest(_ bundle: URL) throws -> Manifest {
        try readManifestAndKey(bundle).manifest
    }

    /// ``readManifest(_:)``, with the key of the very file read (for its summary).
    func readManifestAndKey(_ bundle: URL) throws -> (manifest: Manifest, key: FileKey) {
        manifestReads.add(1, ordering: .relaxed)
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
            return (try ManifestCodec.decode(data), FileKey(st))
        } catch let problem as ManifestProblem {
            throw corrupt(bundle, problem.path, problem.problem)
        }
    }

    func corrupt(_ bundle: URL, _ path: String, _ problem: String) -> TapedeckError {
        let place = path.isEmpty ? "" : " at \(path)"
        return TapedeckError(.corruptFile,
            "The session bundle \(bundle.path) cannot be opened: its manifest\(place) is not usable: \(TapedeckError.clause(problem)). Tapedeck leaves the bundle untouched; check it with `tapedeck doctor` or restore it from a copy.")
    }

    /// Reads the manifest of session `id` in `bundle`, refusing a bundle that holds another session.
    func readSession(_ id: String, in bundle: URL) throws -> Manifest {
        let manifest: Manifest
        do { manifest = try readManifest(bundle) } catch let error as TapedeckError where error.code == .notFound {
            throw Self.noSession(id)
        }
        guard manifest.id == id else { throw Self.noSession(id) }
        return manifest
    }

    /// Replaces a bundle's manifest atomically: a new temporary file (synced), `rename`, folder sync.
    func commit(_ manifest: Manifest, in bundle: URL, _ operation: String) throws {
        let data = try ManifestCodec.encode(manifest)
        guard data.count <= Manifest.maxBytes else {
            throw TapedeckError(.invalidArgument, "Session \"\(manifest.name)\" would need a manifest larger than 16 MiB. Shorten its notes or names, or record into a new session.")
        }
        let temporary = try confined(Self.temporaryPrefix + UUID().uuidString.lowercased(), in: bundle)
        do {
            do {
                try files.writeNewFile(data, to: temporary)
            } catch let error as TapedeckError where error.code == .diskFull
                        && SpaceReserve.releaseLibraryReserve(lockFile: rootURL.appendingPathComponent(Self.libraryLockName).path, root: rootURL.path) {
                // Another program filled the disk: the reserve lets this rewrite (a delete that
                // makes room, as a rule) go through.
                unlink(temporary.path)
                try files.writeNewFile(data, to: temporary)
            }
            try files.reached(operation, "manifest written")
            try files.replace(bundle.appendingPathComponent(Self.manifestName), with: temporary)
        } catch {
            // Not a change to the library (the old manifest stands); a partial temporary must not
            // hold disk space. A crash that skips this leaves one that the next open removes.
            unlink(temporary.path)
            throw error
        }
        try files.syncDirectory(bundle)
        noteCommitted(manifest, in: bundle)
        try files.reached(operation, "manifest committed")
    }

    /// Removes manifest temporaries a dead process left (never read; under the lock, so no live
    /// writer's file is touched). A bundle folder unchanged since it was last found clean (its
    /// key in the summary) is not listed again; summaries of bundles that are gone are pruned.
    func removeLeftoverTemporaries() throws {
        func leftovers(_ bundle: URL) -> [String] {
            (Self.directoryNames(bundle.path) ?? []).filter { $0.hasPrefix(Self.temporaryPrefix) }.sorted()
        }
        func clean(_ bundle: URL) throws {
            if !leftovers(bundle).isEmpty {
                try locked(bundle) {
                    for name in leftovers(bundle) { try files.remove(try member(name, in: bundle)) }
                }
            }
        }
        if isSingleBundle { return try clean(rootURL) }
        let scanned = try summaries()
        for entry in scanned {
            var st = stat()
            guard lstat(entry.url.path, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR else { continue }
            let folderKey = FileKey(st)
            if folderKey.isTrustworthy, let summary = entry.summary, summary.folderKey == folderKey { continue }
            try clean(entry.url)
            guard var summary = entry.summary else { continue }
            // The key from before the listing: a temporary made since changes it, so it is looked for next time.
            summary.folderKey = folderKey
            remember(summary, for: entry.url.lastPathComponent)
        }
        pruneIndex(keeping: Set(scanned.map(\.url.lastPathComponent)))
    }
}
