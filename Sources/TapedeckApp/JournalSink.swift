public import Foundation
import CUnixSocket
#if canImport(Glibc)
import Glibc
#endif

/// Messages as systemd journal entries with structured fields, without libsystemd: when the
/// process's stderr is connected to the journal (systemd says so in `$JOURNAL_STREAM`, the device
/// and inode of that stream), each message goes as one datagram in the journal's native protocol
/// to its socket, with `PRIORITY`, `SYSLOG_IDENTIFIER` and the fields given (`TAKE_ID`,
/// `SESSION_ID`, `RUN_ID`, `EVENT`): `journalctl -u tapedeck TAKE_ID=…` finds a take's lines.
/// Anywhere else (a terminal, a pipe, a file) it is inactive and messages go to stderr as before.
///
/// A plain value: safe on any thread; sending never blocks for long (a datagram to a local
/// socket). A send that fails returns `false`, and the caller writes to stderr instead.
public struct JournalSink: Sendable {
    /// The journal's socket; `nil` when stderr is not the journal.
    public let socketPath: String?
    /// The name entries carry (`SYSLOG_IDENTIFIER`).
    public let identifier: String

    /// syslog's priorities, as the journal keeps them.
    public enum Priority: Int, Sendable {
        case error = 3, warning = 4, notice = 5, info = 6, debug = 7
    }

    /// Active when `JOURNAL_STREAM` in `environment` names the device and inode of `descriptor`
    /// (stderr). The socket is journald's own, `/run/systemd/journal/socket`, unless
    /// `TAPEDECK_JOURNAL_SOCKET` names another (a test's).
    public init(environment: [String: String], descriptor: Int32 = STDERR_FILENO, identifier: String = "tapedeck") {
        self.identifier = identifier
        var st = stat()
        guard let stream = environment["JOURNAL_STREAM"], fstat(descriptor, &st) == 0 else {
            socketPath = nil
            return
        }
        let parts = stream.split(separator: ":")
        guard parts.count == 2, let device = UInt64(parts[0]), let inode = UInt64(parts[1]),
              device == UInt64(st.st_dev), inode == UInt64(st.st_ino) else {
            socketPath = nil
            return
        }
        socketPath = environment["TAPEDECK_JOURNAL_SOCKET"].flatMap { $0.isEmpty ? nil : $0 } ?? "/run/systemd/journal/socket"
    }

    /// Whether messages go to the journal.
    public var isActive: Bool { socketPath != nil }

    /// One entry in the native protocol: `KEY=value` lines; a value holding a newline as the key,
    /// a newline, its length (64-bit little-endian) and the bytes. Keys are upper-case letters,
    /// digits and `_`, not starting with `_` (other characters become `_`).
    public static func entry(_ fields: [(String, String)]) -> [UInt8] {
        var out: [UInt8] = []
        for (rawKey, value) in fields {
            var key = rawKey.uppercased().map { $0.isASCII && ($0.isLetter || $0.isNumber) ? $0 : "_" }
            while key.first == "_" { key.removeFirst() }
            guard !key.isEmpty else { continue }
            out += Array(String(key).utf8)
            let bytes = Array(value.utf8)
            if bytes.contains(UInt8(ascii: "\n")) {
                out.append(UInt8(ascii: "\n"))
                withUnsafeBytes(of: UInt64(bytes.count).littleEndian) { out += $0 }
                out += bytes
            } else {
                out.append(UInt8(ascii: "="))
                out += bytes
            }
            out.append(UInt8(ascii: "\n"))
        }
        return out
    }

    /// Sends `message` at `priority` with `fields` (empty values left out). Returns whether the
    /// journal took it.
    @discardableResult
    public func send(_ message: String, priority: Priority, fields: [String: String] = [:]) -> Bool {
        guard let socketPath else { return false }
        var all = [("MESSAGE", message), ("PRIORITY", String(priority.rawValue)), ("SYSLOG_IDENTIFIER", identifier)]
        all += fields.filter { !$0.value.isEmpty }.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
        var bytes = Self.entry(all)
        return bytes.withUnsafeMutableBufferPointer { buffer in
            buffer.baseAddress!.withMemoryRebound(to: CChar.self, capacity: buffer.count) { pointer in
                tapedeck_notify_send(socketPath, pointer, buffer.count) == 0
            }
        }
    }
}
