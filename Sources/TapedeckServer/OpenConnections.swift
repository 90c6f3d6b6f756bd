import Hummingbird
import HummingbirdCore
import HummingbirdWebSocket
import Logging
import NIOCore
import Synchronization

/// The server's open connections, so a stop can end every one of them.
///
/// Hummingbird stops a server by telling each connection to finish (NIO's quiescing) and waiting
/// until all have closed. A connection of an HTTP/1 server that can upgrade to a WebSocket is
/// not told while it has not yet sent a complete request: until then its pipeline holds only the
/// upgrade handler, which ignores the request to finish. Browsers open such connections ahead of
/// need and keep them, so a stop would wait for as long as the browser keeps one (minutes). The
/// registry closes a connection that has sent nothing when the server stops, and
/// ``closeAll()`` ends whatever is still open once the grace after a stop has passed.
///
/// Thread: any; never blocks (closing is handed to each connection's event loop).
final class OpenConnections: Sendable {
    private let channels = Mutex<[ObjectIdentifier: any Channel]>([:])

    /// Connections open now.
    var count: Int { channels.withLock { $0.count } }

    /// Closes every connection still open: its input side first (a request still arriving then
    /// ends as if the client had hung up, quietly), then, a second later, the connection.
    func closeAll() {
        let open = channels.withLock { Array($0.values) }
        for channel in open {
            channel.close(mode: .input, promise: nil)
            channel.eventLoop.scheduleTask(in: .seconds(1)) { channel.close(promise: nil) }
        }
    }

    fileprivate func add(_ channel: any Channel) {
        channels.withLock { $0[ObjectIdentifier(channel)] = channel }
    }

    fileprivate func remove(_ channel: any Channel) {
        _ = channels.withLock { $0.removeValue(forKey: ObjectIdentifier(channel)) }
    }

    /// An HTTP/1 server with WebSocket upgrades whose connections are kept in this registry.
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

/// A connection set up by `base`, with a ``ConnectionWatch`` first in its pipeline.
struct TrackedChildChannel<Base: ServerChildChannel>: ServerChildChannel {
    typealias Value = Base.Value
    let base: Base
    let connections: OpenConnections

    /// - Thread: the connection's event loop (Hummingbird calls it there).
    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.addHandler(ConnectionWatch(connections: connections), position: .first)
        }.flatMap {
            base.setup(channel: channel, logger: logger)
        }
    }

    func handle(value: Value, logger: Logger) async {
        await base.handle(value: value, logger: logger)
    }
}

/// Keeps its connection in the registry while it is open, and closes it when the server stops
/// before it has sent a byte (the handlers after it would not). Event loop only.
final class ConnectionWatch: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny
    private let connections: OpenConnections
    private var received = false

    init(connections: OpenConnections) {
        self.connections = connections
    }

    func handlerAdded(context: ChannelHandlerContext) {
        connections.add(context.channel)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        connections.remove(context.channel)
    }

    func channelInactive(context: ChannelHandlerContext) {
        connections.remove(context.channel)
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        received = true
        context.fireChannelRead(data)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is ChannelShouldQuiesceEvent && !received {
            // The input side only: the upgrade handler then ends as for a client that hung up.
            context.close(mode: .input, promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }
}
