public import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Paths inside a library, confined: a path read from a catalog or manifest (untrusted input)
/// becomes a URL only if every component is a plain name and no symbolic link lies on the way,
/// so nothing outside the library is ever read, written or removed through it.
/// - Thread: any. Blocks briefly on `lstat`.
public enum LibraryPath {
    /// Whether `name` is one plain path component: not empty, not `.` or `..`, no `/`, no NUL.
    @inlinable
    public static func isPlainName(_ name: some StringProtocol) -> Bool {
        var bytes = 0, dots = 0
        for byte in name.utf8 {
            if byte == UInt8(ascii: "/") || byte == 0 { return false }
            if byte == UInt8(ascii: ".") { dots += 1 }
            bytes += 1
        }
        return bytes > 0 && !(dots == bytes && bytes <= 2)
    }

    /// `relative` resolved under `root`, refusing an absolute path, a component that is not a
    /// plain name, or a symbolic link at any component (`checkingLast: false` leaves the last
    /// component unchecked, for removing a link itself).
    /// - Parameters:
    ///   - relative: the path inside the library, `/`-separated.
    ///   - root: the library's folder.
    ///   - source: what named the path, for the message, e.g. "The catalog".
    ///   - checkingLast: whether the last component is checked for a symbolic link too.
    /// - Throws: `.corruptFile` for a path that leaves the library; `.io` for a link.
    public static func resolve(_ relative: String, under root: URL, namedBy source: String,
                               checkingLast: Bool = true) throws -> URL {
        let parts = relative.split(separator: "/", omittingEmptySubsequences: true)
        guard !relative.hasPrefix("/"), !parts.isEmpty, parts.allSatisfy(isPlainName) else {
            throw TapedeckError(.corruptFile,
                "\(source) names the path \"\(relative)\", which lies outside \(root.path). Run `tapedeck doctor`.")
        }
        var url = root
        for (i, part) in parts.enumerated() {
            url.appendPathComponent(String(part))
            guard checkingLast || i < parts.count - 1 else { break }
            var st = stat()
            if lstat(url.path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFLNK {
                throw TapedeckError(.io, "\(url.path) is a symbolic link; Tapedeck does not follow links inside the library. Remove the link.")
            }
        }
        return url
    }
}
