public import Hummingbird
public import HummingbirdWebSocket
import NIOCore

/// The request context of `tapedeck serve`: Hummingbird's, the peer's address (for the login
/// rate limit), the WebSocket hand-off, and the API's JSON: bodies are read by
/// ``APIRequestDecoder`` (`request.decode(as:context:)`) and values handlers return are written by
/// ``APIResponseEncoder``. A value made per request; any thread. Never blocks.
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

    /// Request bodies as the API reads them: one JSON object, unknown keys refused.
    public var requestDecoder: APIRequestDecoder { APIRequestDecoder() }

    /// Responses as the API writes them: sorted keys, ISO 8601 UTC dates, never cached.
    public var responseEncoder: APIResponseEncoder { APIResponseEncoder() }
}
