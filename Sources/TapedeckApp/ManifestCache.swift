public import Foundation
import TapedeckCore
#if canImport(Glibc)
import Glibc
#endif

/// Manifests read from a remote, kept in a cache folder outside the library by their key and
/// the ETag the remote's listing gives: a second `fleet list` reads again only the manifests
/// whose ETag changed (or that are new), and the rest from here. A cached manifest is checked as
/// one just downloaded is (`RemoteManifest.decode(_:key:)`), so a damaged or foreign file is
/// read from the remote again, never trusted. One file per manifest (`HASH.manifest`, the key and
/// the ETag on its first lines), written atomically; best effort: a cache that cannot be written
/// only means reading from the remote next time.
///
/// A plain value; any thread. Its methods block on small-file I/O.
public struct ManifestCache: Sendable {
    /// The folder of one remote's manifests; `nil` keeps none.
    public let folder: URL?

    /// - Parameters:
    ///   - root: the cache folder of all remotes (`$XDG_CACHE_HOME/tapedeck/manifests`).
    ///   - remote: the remote's location (`s3://bucket/prefix at endpoint`): each remote has a
    ///     folder of its own under `root`.
    public init(root: URL?, remote: String) {
        folder = root?.appendingPathComponent(PrivateFile.stableName(remote))
    }

    private static let magic = "tapedeck-manifest-cache 1"

    /// The manifest cached for `key` at `etag`, when there is one (its bytes, not yet checked).
    public func bytes(for key: String, etag: String) -> Data? {
        guard let file = file(for: key), let bytes = try? TakeWaveforms.readSmallFile(file, limit: RemoteManifest.maximumBytes + 4096) else { return nil }
        let data = Data(bytes)
        let head = "\(Self.magic)\n\(key)\n\(etag)\n"
        guard data.starts(with: Data(head.utf8)) else { return nil }
        return Data(data.dropFirst(head.utf8.count))
    }

    /// Keeps `data` as the manifest at `key` with `etag` (atomically: a temporary file renamed
    /// over the old one).
    public func store(_ data: Data, for key: String, etag: String) {
        guard let folder, let file = file(for: key), !etag.contains("\n"), (try? FileModes.makePrivateFolder(folder)) != nil else { return }
        let temporary = folder.appendingPathComponent(".\(file.lastPathComponent).\(getpid()).tmp")
        unlink(temporary.path)
        var bytes = Data("\(Self.magic)\n\(key)\n\(etag)\n".utf8)
        bytes.append(data)
        let fd = open(temporary.path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return }
        let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
        if written != bytes.count || rename(temporary.path, file.path) != 0 { unlink(temporary.path) }
    }

    /// Removes the cached manifests of keys not in `keys` (after a listing of the whole remote:
    /// takes removed there leave nothing behind here).
    public func prune(keeping keys: some Sequence<String>) {
        guard let folder, let names = try? FileManager.default.contentsOfDirectory(atPath: folder.path) else { return }
        let kept = Set(keys.compactMap { file(for: $0)?.lastPathComponent })
        for name in names where name.hasSuffix(".manifest") && !kept.contains(name) {
            unlink(folder.appendingPathComponent(name).path)
        }
    }

    private func file(for key: String) -> URL? {
        guard let folder, !key.isEmpty else { return nil }
        // Two stable hashes: a name collision would need both to collide (and the file's first
        // line names its key in any case).
        return folder.appendingPathComponent("\(PrivateFile.stableName(key))-\(PrivateFile.stableName(String(key.reversed()))).manifest")
    }
}
