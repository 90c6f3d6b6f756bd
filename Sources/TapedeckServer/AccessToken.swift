public import Foundation
import TapedeckCore
#if canImport(Glibc)
import Glibc
#endif

/// The secret that lets a browser or script use a server listening beyond this machine: 32
/// random bytes as 64 hex digits, kept in a file only its owner can read (0600), made on first
/// start. A plain value; any thread. ``load(from:)`` blocks briefly on the file system.
public struct AccessToken: Sendable, Hashable {
    public let value: String

    public init(value: String) { self.value = value }

    /// Reads the token from `file`, or makes a new one there (`created` is then true).
    /// - Parameter makingFolders: make the file's missing folders (0700); otherwise a missing
    ///   folder is refused (a `--token-file` the user named with a typo).
    /// - Throws: `.configuration` for a file others may read or write, that is not a regular
    ///   file (a link is not followed; a named pipe or device is refused before it is opened, so
    ///   this never waits on one), or that holds no token; `.notFound` for a missing folder;
    ///   `.io` when it cannot be made.
    public static func load(from file: URL, makingFolders: Bool = true) throws -> (token: AccessToken, created: Bool) {
        let path = file.path
        // What it is, before it is opened: opening a named pipe would wait for a writer forever.
        var before = stat()
        if lstat(path, &before) == 0, (before.st_mode & S_IFMT) != S_IFREG {
            throw TapedeckError(.configuration, "The token file \(path) is \(kind(before.st_mode)), not a regular file. Choose a regular file with --token-file (a missing one is made, with a new token).")
        }
        // Never blocking, even if it became a pipe since.
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        if fd < 0 {
            guard errno == ENOENT else {
                throw TapedeckError(.configuration, "The token file \(path) cannot be read (\(String(cString: strerror(errno)))). Fix it, or choose another with --token-file.")
            }
            if !makingFolders, !FileManager.default.fileExists(atPath: file.deletingLastPathComponent().path) {
                throw TapedeckError(.notFound, "The folder of the token file, \(file.deletingLastPathComponent().path), does not exist. Create it, or choose another file with --token-file.")
            }
            return (try create(at: file), true)
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
            throw TapedeckError(.configuration, "The token file \(path) is not a regular file. Remove it (a new token is made), or choose another with --token-file.")
        }
        guard info.st_mode & 0o077 == 0, info.st_uid == getuid() else {
            throw TapedeckError(.configuration, "The token file \(path) may be read by other users. Run `chmod 600 \(path)` (and make a new token by removing it if others may have read it).")
        }
        var bytes = [UInt8](repeating: 0, count: 256)
        let n = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        let text = String(decoding: bytes.prefix(max(0, n)), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard text.count >= 16, text.count <= 128, text.allSatisfy({ $0.isASCII && !$0.isWhitespace }) else {
            throw TapedeckError(.configuration, "The token file \(path) does not hold a token (16 to 128 characters, no spaces). Put one there, or remove the file and start again: a new token is made.")
        }
        return (AccessToken(value: text), false)
    }

    /// What a file that is not a regular one is, in words.
    static func kind(_ mode: mode_t) -> String {
        switch mode & S_IFMT {
        case S_IFIFO: "a named pipe (FIFO)"
        case S_IFDIR: "a folder"
        case S_IFLNK: "a symbolic link (which is not followed)"
        case S_IFSOCK: "a socket"
        case S_IFCHR, S_IFBLK: "a device"
        default: "not a regular file"
        }
    }

    private static func create(at file: URL) throws -> AccessToken {
        var generator = SystemRandomNumberGenerator()
        let value = (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined()
        do {
            try FileModes.makePrivateFolder(file.deletingLastPathComponent())
            try DurableFiles().writeNewFile(Data((value + "\n").utf8), to: file, mode: 0o600)
        } catch let error as TapedeckError {
            if error.systemCode != EEXIST { unlink(file.path) }  // never another process's new file
            // The token's own message: what fixes it is another --token-file, never the library.
            let reason = error.systemCode.map { String(cString: strerror($0)) } ?? error.message
            let fix = error.systemCode == ENOSPC || error.systemCode == EDQUOT ? "Free some space on that disk, or choose" : "Choose"
            throw TapedeckError(.io, "Could not make the token file \(file.path): \(reason). \(fix) another file with --token-file, in a folder this user may write.",
                                systemCode: error.systemCode)
        }
        return AccessToken(value: value)
    }

    /// Compares in time that does not depend on where the texts differ.
    public func matches(_ candidate: String?) -> Bool {
        guard let candidate else { return false }
        let a = Array(value.utf8), b = Array(candidate.utf8)
        var difference = UInt8(a.count == b.count ? 0 : 1)
        for i in 0..<a.count { difference |= a[i] ^ (i < b.count ? b[i] : 0) }
        return difference == 0
    }
}
