public import Hummingbird
public import HummingbirdWebSocket
import NIOCore

/// The request context of `tapedeck serve`: Hummingbird's, the peer's address (for the login
/// rate limit), and the WebSocket hand-off. A value made per request; any thread.
public struct ServerContext: RequestContext, WebSocketRequestContext {
    public var coreContext: CoreRequestContextStorage
    public let webSocket: WebSocketHandlerReference<ServerContext>
    /// The peer's address, without its port ("" when unknown).
    public let peer: String
    /// Whether the request carried the access token as a bearer header (not a cookie): no
    /// browser sends that on its own, so such a request cannot be a cross-site one.
    public var bearerAuthenticated = false

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        webSocket = .init()
        peer = source.channel.remoteAddress?.ipAddress ?? ""
    }

    /// Bodies the API accepts are small JSON objects (notes of up to 64 KiB, escaped).
    public var maxUploadSize: Int { 512 * 1024 }
}
