import Hummingbird
import HummingbirdCore
import HummingbirdWebSocket
import Logging
import NIOCore
import NIOHTTP1
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// How long a connection may keep the server waiting, and how many one address may hold
/// (``ServerOptions/headerTimeout``, ``ServerOptions/idleTimeout``,
/// ``ServerOptions/connectionsPerAddress``). A plain value; any thread.
struct ConnectionLimits: Sendable {
    /// From a connection's opening (or the first byte of a request after an idle spell) until
    /// its request's head is complete.
    var headerTimeout: TimeAmount
    /// Between requests on a connection kept open, and between the pieces of a request's body.
    var idleTimeout: TimeAmount
    /// How long a connection may read nothing of what it is sent (a download, the event stream,
    /// the live socket) before it is closed.
    var stallTimeout: TimeAmount
    /// Connections one address (an IPv6 /64 network) may hold open at once.
    var perAddress: Int
    /// Connections from every address together (loopback may open ``loopbackAllowance`` more).
    var inAll: Int
    static let loopbackAllowance = 64

    /// Descriptors kept for everything but connections: the recording's files, the library, the
    /// export children's pipes, the event loops, and loopback's allowance.
    static let reserve = 256

    init(_ options: ServerOptions) {
        headerTimeout = TimeAmount(options.headerTimeout)
        idleTimeout = TimeAmount(options.idleTimeout)
        stallTimeout = TimeAmount(options.stallTimeout)
        perAddress = max(1, options.connectionsPerAddress)
        var limit = rlimit()
        let descriptors = getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 && limit.rlim_cur != rlim_t.max
            ? Int(clamping: limit.rlim_cur) : 1 << 20
        inAll = max(1, options.connectionsInAll ?? max(16, descriptors - Self.reserve))
    }
}

/// The server's open connections: so a stop can end every one of them, and so no address holds
/// more than ``ConnectionLimits/perAddress`` (an attacker who opens connections and sends
/// nothing would otherwise starve the owner's requests from another address).
///
/// Hummingbird stops a server by telling each connection to finish (NIO's quiescing) and waiting
/// until all have closed. A connection of an HTTP/1 server that can upgrade to a WebSocket is
/// not told while it has not yet sent a complete request: until then its pipeline holds only the
/// upgrade handler, which ignores the request to finish. Browsers open such connections ahead of
/// need and keep them, so a stop would wait for as long as the browser keeps one (minutes). The
/// registry closes a connection that has sent nothing when the server stops, and
/// ``closeAll()`` ends whatever is still open once the grace after a stop has passed. Deadlines
/// while a connection is open are its ``ConnectionWatch``'s.
///
/// Thread: any; never blocks (closing is handed to each connection's event loop).
final class OpenConnections: Sendable {
    private struct State {
        var channels: [ObjectIdentifier: any Channel] = [:]
        var perAddress: [String: Int] = [:]
        /// Connections counted, from every address.
        var counted = 0
        /// Addresses told of in the log as holding too many (until they hold none).
        var reported: Set<String> = []
        /// Whether the log has said that connections in all are at their limit (until below).
        var reportedInAll = false
    }
    private let state = Mutex(State())
    let limits: ConnectionLimits
    let logger: Logger

    init(limits: ConnectionLimits, logger: Logger) {
        self.limits = limits
        self.logger = logger
    }

    /// Connections open now.
    var count: Int { state.withLock { $0.channels.count } }

    /// Closes every connection still open: its input side first (a request still arriving then
    /// ends as if the client had hung up, quietly), then, a second later, the connection.
    func closeAll() {
        let open = state.withLock { Array($0.channels.values) }
        for channel in open {
            channel.close(mode: .input, promise: nil)
            channel.eventLoop.scheduleTask(in: .seconds(1)) { channel.close(promise: nil) }
        }
    }

    func add(_ channel: any Channel) {
        state.withLock { $0.channels[ObjectIdentifier(channel)] = channel }
    }

    func remove(_ channel: any Channel) {
        _ = state.withLock { $0.channels.removeValue(forKey: ObjectIdentifier(channel)) }
    }

    /// Counts one more connection from `address` (an ``addressKey(_:)``), or refuses it (`false`)
    /// when that address already holds ``ConnectionLimits/perAddress``, or when
    /// ``ConnectionLimits/inAll`` are open (loopback has ``ConnectionLimits/loopbackAllowance``
    /// more, so the owner on this machine is still answered): said in the log once while it
    /// goes on.
    func admit(_ address: String) -> Bool {
        let loopback = Self.isLoopback(address)
        let (admitted, report) = state.withLock { s -> (Bool, String?) in
            let held = s.perAddress[address, default: 0]
            if held >= limits.perAddress {
                return (false, s.reported.insert(address).inserted
                    ? "\(address.isEmpty ? "An unknown address" : address) holds \(limits.perAddress) connections, the most one address may: its further connections are closed as they arrive (other addresses are still served)." : nil)
            }
            if s.counted >= limits.inAll + (loopback ? ConnectionLimits.loopbackAllowance : 0) {
                defer { s.reportedInAll = true }
                return (false, s.reportedInAll ? nil
                    : "\(limits.inAll) connections are open, the most the server takes (its descriptor limit less a reserve for recording): further ones are closed as they arrive, but for \(ConnectionLimits.loopbackAllowance) more from this machine. Raise the limit with `ulimit -n` (or LimitNOFILE= in a systemd unit).")
            }
            s.perAddress[address] = held + 1
            s.counted += 1
            return (true, nil)
        }
        if let report { logger.warning("\(report)") }
        return admitted
    }

    /// One connection ``admit(_:)`` counted has closed.
    func release(_ address: String) {
        state.withLock { s in
            let held = s.perAddress[address, default: 1] - 1
            s.perAddress[address] = held > 0 ? held : nil
            if held <= 0 { s.reported.remove(address) }
            s.counted = max(0, s.counted - 1)
            if s.counted < limits.inAll { s.reportedInAll = false }
        }
    }

    /// Whether an ``addressKey(_:)`` is where the owner on this machine connects from:
    /// 127.0.0.1, or ::1 (whose /64, `::/64`, holds no address another machine can have). The
    /// rest of 127.0.0.0/8 is not: many such addresses must not take the owner's allowance.
    static func isLoopback(_ key: String) -> Bool {
        key == "127.0.0.1" || key == "0000:0000:0000:0000::/64"
    }

    /// What connections are counted by: an IPv4 address (also when it comes as an IPv4-mapped
    /// IPv6 address), or the /64 network of an IPv6 address (one machine often has a whole /64).
    static func addressKey(_ address: SocketAddress?) -> String {
        guard case .v6(let v6)? = address else { return address?.ipAddress ?? "" }
        let bytes = withUnsafeBytes(of: v6.address.sin6_addr) { Array($0) }
        guard bytes.count == 16 else { return address?.ipAddress ?? "" }
        if bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xFF, bytes[11] == 0xFF {
            return bytes[12...].map(String.init).joined(separator: ".")
        }
        let hex = bytes[0..<8].map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }
        return stride(from: 0, to: 8, by: 2).map { hex[$0] + hex[$0 + 1] }.joined(separator: ":") + "::/64"
    }

    /// An HTTP/1 server with WebSocket upgrades whose connections are kept in this registry and
    /// watched (``ConnectionWatch``, ``RequestGuard``).
    func http1WebSocketUpgrade<WSResponderBuilder: HTTPResponderBuilder & _HB_SendableMetatype>(
        webSocketRouter: WSResponderBuilder, configuration: HTTP1WebSocketUpgradeChannel.Configuration
    ) -> HTTPServerBuilder where WSResponderBuilder.Responder.Context: WebSocketRequestContext {
        let webSocketResponder = webSocketRouter.buildResponder()
        return HTTPServerBuilder { responder in
            TrackedChildChannel(base: HTTP1WebSocketUpgradeChannel(responder: responder, webSocketResponder: webSocketResponder,
                                                                   configuration: configuration),
                                connections: self)
        }
    }
}

/// A connection set up by `base`, with a ``ConnectionWatch`` first in its pipeline and a
/// ``RequestGuard`` right after the HTTP decoder.
struct TrackedChildChannel<Base: ServerChildChannel>: ServerChildChannel {
    typealias Value = Base.Value
    let base: Base
    let connections: OpenConnections

    /// - Thread: the connection's event loop (NIO calls the initializer there).
    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        let watch = ConnectionWatch(connections: connections)
        do {
            try channel.pipeline.syncOperations.addHandler(watch, position: .first)
        } catch {
            return channel.eventLoop.makeFailedFuture(error)
        }
        return base.setup(channel: channel, logger: logger).assumeIsolated().map { (value: Value) -> Value in
            // The decoder is there once `base` has set the pipeline up (synchronously).
            if let decoder = try? channel.pipeline.syncOperations.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self) {
                try? channel.pipeline.syncOperations.addHandler(RequestGuard(watch: watch), position: .after(decoder))
            } else {
                logger.warning("The HTTP decoder was not found in a connection's pipeline: malformed requests on it are not answered.")
            }
            return value
        }.nonisolated()
    }

    func handle(value: Value, logger: Logger) async {
        await base.handle(value: value, logger: logger)
    }
}
