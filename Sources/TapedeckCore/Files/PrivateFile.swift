import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A small file of secrets (credentials, tokens) that only its owner may read, and a stable
/// name for a text. Plain functions; any thread.
public enum PrivateFile {
    /// The text of the file at `path`, which must be a regular file (not a link), owned by this
    /// user, readable by nobody else, and at most 1 MiB of UTF-8.
    /// - Parameters:
    ///   - path: the file to read; a relative path is taken from the working directory.
    ///   - key: how messages name the setting that gave the path, e.g. `sync.s3.credentials-file`.
    /// - Throws: `.configuration` saying what is wrong with the file and how to mend it.
    /// - Thread: any. Blocks briefly on reading the file.
    public static func readText(_ path: String, key: String) throws -> String {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else {
            let code = errno
            if code == ELOOP {
                throw TapedeckError(.configuration, "\(key): \(path) is a symbolic link. Name the credentials file itself.")
            }
            throw TapedeckError(.configuration, "\(key): could not open \(path): \(String(cString: strerror(code))). Check the path, or set the credentials in the environment instead.")
        }
        let handle = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else {
            throw TapedeckError(.configuration, "\(key): \(path) is not a regular file.")
        }
        guard st.st_mode & 0o077 == 0 else {
            throw TapedeckError(.configuration, "\(key): \(path) may be read by other users (mode \(String(st.st_mode & 0o777, radix: 8))). Make it private: chmod 600 \(path)")
        }
        guard st.st_uid == getuid() else {
            throw TapedeckError(.configuration, "\(key): \(path) belongs to another user. Use a credentials file of your own.")
        }
        guard st.st_size <= 1_048_576, let data = (try? handle.readToEnd()) ?? nil, let text = String(data: data, encoding: .utf8) else {
            throw TapedeckError(.configuration, "\(key): \(path) is not a text credentials file.")
        }
        return text
    }

    /// A stable 64-bit FNV-1a hash of `text`, as hex: the same on every run and machine (Swift's
    /// `hashValue` is seeded per process), for names of files and sockets made from paths.
    public static func stableName(_ text: String) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
        return String(hash, radix: 16)
    }
}
