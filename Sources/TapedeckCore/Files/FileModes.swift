public import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The permissions Tapedeck creates files and folders with, before the umask takes its share:
/// readable by everyone, writable by the owner and the group, never by others. So the user's umask
/// is respected (022 gives 0644 and 0755, 077 gives 0600 and 0700), and even a umask of 000 makes
/// nothing world-writable. SQLite creates the catalog with its own 0644 less the umask.
public enum FileModes {
    /// Regular files: audio, lock files, manifests, exports. 0664 before the umask.
    public static let file: UInt32 = 0o664
    /// Folders: the library, sessions, bundles. 0775 before the umask.
    public static let directory: UInt32 = 0o775

    /// Creates `url` and its missing parents with mode 0700, as the XDG specification asks for
    /// folders an application creates under the user's base directories (the default library,
    /// the cache, the token's folder). Folders that exist are left as they are.
    /// - Thread: any. Blocks briefly on the file system.
    public static func makePrivateFolder(_ url: URL) throws {
        var missing: [URL] = []
        var probe = url.standardizedFileURL
        while !FileManager.default.fileExists(atPath: probe.path), probe.path != "/" {
            missing.append(probe)
            probe = probe.deletingLastPathComponent()
        }
        for folder in missing.reversed() where mkdir(folder.path, 0o700) != 0 && errno != EEXIST {
            throw TapedeckError.system(errno, while: "create the folder \(folder.path)")
        }
    }
}
