public import Foundation
import TapedeckCore
#if canImport(Glibc)
import Glibc
#endif

/// How `tapedeck serve` listens and who may use it. A plain value; any thread.
public struct ServerOptions: Sendable, Hashable {
    /// The address and port to listen on (`--listen`).
    public var host: String
    public var port: Int
    /// The file holding the access token (`--token-file`); made, 0600, on first start.
    public var tokenFile: URL
    /// Ask for the token even on the loopback address (`--require-token`); always asked elsewhere.
    public var alwaysRequireToken: Bool
    /// How often live state goes out while recording (and, idle, once a second).
    public var stateInterval: Duration
    /// How long a connection may take to send a request's head, from its opening or from the
    /// request's first byte after an idle spell; then it is closed (a client that sends nothing,
    /// half a request, or one byte now and then cannot hold a connection).
    public var headerTimeout: Duration = .seconds(10)
    /// How long a connection may stay idle between requests, or between the pieces of a request's
    /// body. A response being written (a download, `/api/events`) and a WebSocket (`/api/live`)
    /// are not timed, unless the client reads nothing of them for ``stallTimeout``.
    public var idleTimeout: Duration = .seconds(30)
    /// How long a client may read nothing of a response under way (a download, `/api/events`,
    /// `/api/live`) before its connection is closed.
    public var stallTimeout: Duration = .seconds(60)
    /// How many connections one address (an IPv6 /64 network) may hold open at once; more are
    /// closed as they arrive, so that one client holding connections cannot starve the others.
    public var connectionsPerAddress = 32
    /// How many connections may be open at once, all addresses together (nil: the descriptor
    /// limit less a reserve of 256 for the recording, the library and the server's own; see
    /// ``ConnectionLimits``). Loopback may open 64 more, so the owner on this machine is
    /// answered while others hold the rest; and the server never runs out of descriptors (where
    /// `accept` would fail over and over).
    public var connectionsInAll: Int?

    /// The default `--listen`: the loopback address only.
    public static let defaultListen = "127.0.0.1:8470"

    public init(listen: String = ServerOptions.defaultListen, tokenFile: URL, alwaysRequireToken: Bool = false,
                stateInterval: Duration = .milliseconds(100)) throws {
        (host, port) = try Self.parse(listen)
        self.tokenFile = tokenFile
        self.alwaysRequireToken = alwaysRequireToken
        self.stateInterval = stateInterval
    }

    /// Whether the address is the loopback address (reachable from this machine only).
    public var isLoopback: Bool {
        host == "localhost" || Self.isLoopbackAddress(host)
    }

    /// Whether `text` is a numeric IPv4 address in 127.0.0.0/8 or the IPv6 address ::1.
    public static func isLoopbackAddress(_ text: String) -> Bool {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 { return UInt32(bigEndian: v4.s_addr) >> 24 == 127 }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, text, &v6) == 1 else { return false }
        return withUnsafeBytes(of: &v6) { b in b.prefix(15).allSatisfy { $0 == 0 } && b[15] == 1 }
    }

    /// Whether requests must carry the token: always off the loopback address.
    public var requiresToken: Bool { alwaysRequireToken || !isLoopback }

    /// `HOST:PORT`, `[IPv6]:PORT`, `:PORT` (all addresses) or `PORT` (loopback).
    static func parse(_ text: String) throws -> (String, Int) {
        let usage = "--listen \(text): write ADDRESS:PORT, e.g. 127.0.0.1:8470 (this machine only), 0.0.0.0:8470 (every network, with a token) or [::]:8470."
        var host = "127.0.0.1"
        var portText = text
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { throw TapedeckError(.invalidArgument, usage) }
            host = String(text[text.index(after: text.startIndex)..<close])
            let rest = text[text.index(after: close)...]
            guard rest.hasPrefix(":") else { throw TapedeckError(.invalidArgument, usage) }
            portText = String(rest.dropFirst())
        } else if let colon = text.lastIndex(of: ":") {
            guard text.firstIndex(of: ":") == colon else { throw TapedeckError(.invalidArgument, usage) }
            let h = String(text[..<colon])
            host = h.isEmpty ? "0.0.0.0" : h
            portText = String(text[text.index(after: colon)...])
        }
        guard let port = Int(portText), (0...65535).contains(port), !host.isEmpty,
              host.allSatisfy({ $0.isLetter || $0.isNumber || ".:-".contains($0) }) else {
            throw TapedeckError(.invalidArgument, usage)
        }
        return (host, port)
    }
}
