public import Foundation
import CUnixSocket
#if canImport(Glibc)
import Glibc
#endif

/// systemd's service notifications (`Type=notify`, sd_notify(3)) without libsystemd: each message
/// is one datagram to the socket `$NOTIFY_SOCKET` names. Outside a notify service (no
/// `NOTIFY_SOCKET`) every call does nothing.
///
/// A plain value: every member is safe on any thread; sending never blocks for long (a datagram
/// to a local socket) and a failed send is ignored, as sd_notify's callers do, so a service
/// manager that went away never stops a recording.
public struct ServiceNotifier: Sendable {
    /// The socket messages go to (`@name` for the abstract namespace); `nil` outside a notify service.
    public let socketPath: String?
    /// How often systemd expects `WATCHDOG=1` (`$WATCHDOG_USEC`, when `$WATCHDOG_PID` is unset or
    /// this process); `nil` without a watchdog.
    public let watchdogInterval: Duration?

    /// Reads `NOTIFY_SOCKET`, `WATCHDOG_USEC` and `WATCHDOG_PID` from `environment`.
    public init(environment: [String: String], pid: Int32 = getpid()) {
        let socket = environment["NOTIFY_SOCKET"].flatMap { $0.isEmpty ? nil : $0 }
        socketPath = socket
        let forUs = environment["WATCHDOG_PID"].map { Int32($0) == pid } ?? true
        if socket != nil, forUs, let text = environment["WATCHDOG_USEC"], let usec = Int64(text), usec > 0 {
            watchdogInterval = .microseconds(usec)
        } else {
            watchdogInterval = nil
        }
    }

    /// Whether a service manager listens.
    public var isActive: Bool { socketPath != nil }

    /// Sends `fields` (`READY=1`, `STATUS=…`) as one message, in the given order; a status is cut
    /// to one line. Returns whether the datagram went out.
    @discardableResult
    public func send(_ fields: [(String, String)]) -> Bool {
        guard let socketPath, !fields.isEmpty else { return false }
        let text = fields.map { key, value in key + "=" + value.split(whereSeparator: \.isNewline).joined(separator: " ") }
            .joined(separator: "\n")
        var bytes = Array(text.utf8)
        return bytes.withUnsafeMutableBufferPointer { buffer in
            buffer.baseAddress!.withMemoryRebound(to: CChar.self, capacity: buffer.count) { pointer in
                tapedeck_notify_send(socketPath, pointer, buffer.count) == 0
            }
        }
    }

    /// `READY=1`: start-up is over (for a recording: audio flows), with the first status line.
    @discardableResult
    public func ready(status: String) -> Bool { send([("READY", "1"), ("STATUS", status)]) }

    /// `STATUS=…`: what `systemctl status` shows under the unit.
    @discardableResult
    public func status(_ line: String) -> Bool { send([("STATUS", line)]) }

    /// `WATCHDOG=1`: still alive, and working (send it only when progress was made).
    @discardableResult
    public func watchdog() -> Bool { send([("WATCHDOG", "1")]) }

    /// `EXTEND_TIMEOUT_USEC=…`: the start (or stop) takes longer; wait `seconds` more from now.
    @discardableResult
    public func extendTimeout(seconds: Int) -> Bool { send([("EXTEND_TIMEOUT_USEC", String(seconds * 1_000_000))]) }

    /// `STOPPING=1`: the service is ending (the take is being finished).
    @discardableResult
    public func stopping(status: String) -> Bool { send([("STOPPING", "1"), ("STATUS", status)]) }
}
