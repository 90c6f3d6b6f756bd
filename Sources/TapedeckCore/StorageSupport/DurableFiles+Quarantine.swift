public import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension DurableFiles {
    /// Moves a library-relative file or folder under `root` into `root/quarantine/<UTC time>/`,
    /// keeping its relative path, never replacing anything; returns the new relative path.
    public func quarantine(_ relativePath: String, in root: URL) throws -> String {
        let stamp = UTCTimestamp.compact(Date())
        let parts = relativePath.split(separator: "/").map(String.init)
        guard !parts.isEmpty, !parts.contains(where: { $0 == ".." || $0 == "." }), !relativePath.hasPrefix("/") else {
            throw TapedeckError(.invalidArgument, "\(relativePath) is not a path inside the library.")
        }
        let target = (["quarantine", stamp] + parts).joined(separator: "/")
        let source = root.appendingPathComponent(relativePath)
        let destination = root.appendingPathComponent(target)
        // Neither the source's folders nor the quarantine's may be links leading out of the library.
        var folder = root
        for part in parts.dropLast() {
            folder.appendPathComponent(part)
            var st = stat()
            if lstat(folder.path, &st) == 0, (st.st_mode & S_IFMT) == S_IFLNK {
                throw TapedeckError(.io, "\(folder.path) is a symbolic link; Tapedeck does not follow links inside the library. Remove the link.")
            }
        }
        try makeConfinedFolders(["quarantine", stamp] + parts.dropLast(), in: root)
        var st = stat()
        guard lstat(destination.path, &st) != 0, errno == ENOENT else {
            throw TapedeckError(.alreadyExists, "Could not quarantine \(relativePath): \(destination.path) exists already.")
        }
        try seam.willPerform(.rename, on: destination)
        guard rename(source.path, destination.path) == 0 else {
            throw TapedeckError.system(errno, while: "move \(source.path) to \(destination.path)")
        }
        try syncDirectory(destination.deletingLastPathComponent())
        try syncDirectory(source.deletingLastPathComponent())
        return target
    }

    /// Creates `components` as nested folders under `root`, one at a time from the folder made
    /// before (`mkdirat`, then `openat` with `O_NOFOLLOW`): a component that is a symbolic link
    /// (or anything but a folder) stops it before anything is made through it, so nothing outside
    /// the library is ever created or followed.
    /// - Thread: any. Blocks on disk I/O.
    public func makeConfinedFolders(_ components: [String], in root: URL) throws {
        var fd = open(root.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw TapedeckError.system(errno, while: "open the library folder \(root.path)") }
        defer { close(fd) }
        var path = root
        for part in components {
            path.appendPathComponent(part)
            if mkdirat(fd, part, FileModes.directory) != 0 && errno != EEXIST {
                throw TapedeckError.system(errno, while: "create \(path.path)")
            }
            let next = openat(fd, part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            guard next >= 0 else {
                if errno == ELOOP || errno == ENOTDIR {
                    throw TapedeckError(.io, "\(path.path) is not a folder (a symbolic link?); Tapedeck makes folders only inside the library. Remove it.")
                }
                throw TapedeckError.system(errno, while: "open \(path.path)")
            }
            close(fd)
            fd = next
        }
    }
}
