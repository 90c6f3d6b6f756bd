import Logging
import NIOCore
import NIOHTTP1

/// The first handler of every connection: counts it in ``OpenConnections`` (closing it at once
/// when its address holds too many), and closes it when it keeps the server waiting:
///
/// - a request's head must be complete within ``ConnectionLimits/headerTimeout`` of the
///   connection's opening, or of the request's first byte after an idle spell (a client that
///   sends nothing, half a head, or a head a byte at a time is closed then);
/// - between requests a connection may be idle for ``ConnectionLimits/idleTimeout``, and a
///   request's body must have arrived within that time of its head;
/// - while a response is being written (a download, the Server-Sent Events of `/api/events`)
///   and once a connection has become a WebSocket (`/api/live`), their length is not timed:
///   those end when the client or the server ends them. But a client that stops reading (the
///   connection stays unwritable: its socket's buffer and NIO's are full) for
///   ``ConnectionLimits/stallTimeout`` is closed, whatever is under way.
///
/// Where a request begins and ends it learns from the ``RequestGuard`` after the HTTP decoder.
/// When the server stops, a connection that has sent nothing is closed at once (the upgrade
/// handler would ignore the request to finish; see ``OpenConnections``).
///
/// Event loop only (the connection's); never blocks.
final class ConnectionWatch: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny

    private enum Phase: Equatable {
        /// Waiting for a request: idle between requests (`started` false), or its head arriving.
        case awaitingHead(started: Bool)
        case readingBody
        case answering
        /// A WebSocket upgrade was asked for: until the server answers it.
        case upgrading
        /// A WebSocket.
        case stream
        case closing
    }

    private let connections: OpenConnections
    private var channel: (any Channel)?
    private var received = false
    private var checked = false
    /// The address it is counted under (``OpenConnections/admit(_:)``), while counted.
    private var address: String?
    private var phase = Phase.awaitingHead(started: true)
    /// Requests whose head has arrived and whose response has not ended.
    private var open = 0
    private var deadline: NIODeadline?
    private var timer: Scheduled<Void>?
    private var timerAt: NIODeadline?
    /// Set while the connection is unwritable: closes it when that lasts ``ConnectionLimits/stallTimeout``.
    private var stall: Scheduled<Void>?

    init(connections: OpenConnections) {
        self.connections = connections
    }

    // MARK: Events of the pipeline

    func handlerAdded(context: ChannelHandlerContext) {
        channel = context.channel
        connections.add(context.channel)
        if context.channel.isActive { admit(context.channel) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        ended(context.channel)
        channel = nil
    }

    func channelActive(context: ChannelHandlerContext) {
        context.fireChannelActive()
        admit(context.channel)
    }

    func channelInactive(context: ChannelHandlerContext) {
        ended(context.channel)
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        received = true
        switch phase {
        case .awaitingHead(started: false):
            phase = .awaitingHead(started: true)
            setDeadline(after: connections.limits.headerTimeout)
        case .readingBody:
            // The body's deadline is set once, at its head: a byte now and then does not hold
            // the connection (the API's bodies are small).
            break
        default:
            break
        }
        context.fireChannelRead(data)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            stall?.cancel()
            stall = nil
        } else if stall == nil, phase != .closing {
            let channel = context.channel
            stall = context.eventLoop.assumeIsolated().scheduleTask(in: connections.limits.stallTimeout) { [weak self] () -> Void in
                guard let self, self.stall != nil, !channel.isWritable else { return }
                self.stall = nil
                self.phase = .closing
                self.deadline = nil
                self.connections.logger.debug("Closed a connection from \(channel.remoteAddress?.ipAddress ?? "an unknown address"): it read nothing of its response for \(self.connections.limits.stallTimeout.nanoseconds / 1_000_000_000) s.")
                Self.closeQuietly(channel)
            }
        }
        context.fireChannelWritabilityChanged()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is ChannelShouldQuiesceEvent && !received {
            // The input side only: the upgrade handler then ends as for a client that hung up.
            context.close(mode: .input, promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    // MARK: What the request guard tells

    /// A request's head has arrived: its body (if any) must keep coming.
    func headArrived() {
        guard phase != .closing else { return }
        open += 1
        phase = .readingBody
        setDeadline(after: connections.limits.idleTimeout)
    }

    /// A request has arrived whole: it is answered untimed (or, when its response has already
    /// gone out, the connection waits for the next one).
    func requestEnded() {
        guard phase == .readingBody else { return }
        if open > 0 {
            phase = .answering
            deadline = nil
        } else {
            waitForNextRequest()
        }
    }

    /// A final response has been written whole.
    func responseEnded() {
        open = max(0, open - 1)
        if open == 0, phase == .answering { waitForNextRequest() }
    }

    /// A request asked for a WebSocket: the server must answer within the header timeout.
    func upgradeAsked() {
        guard phase != .closing else { return }
        open += 1
        phase = .upgrading
        setDeadline(after: connections.limits.headerTimeout)
    }

    /// The connection became a WebSocket: untimed from now on.
    func upgraded() {
        guard phase != .closing else { return }
        phase = .stream
        deadline = nil
    }

    /// The upgrade was not made: the request is answered as any other.
    func upgradeDeclined() {
        guard phase == .upgrading else { return }
        phase = .answering
        deadline = nil
    }

    /// Whether a request is being answered (or waits for its answer): a refusal must not be
    /// written into the middle of its response.
    var hasOpenRequests: Bool { open > 0 }

    /// Whether the connection is being closed (by a deadline or a refusal).
    var isClosing: Bool { phase == .closing }

    /// The request guard refuses the connection's request and closes it.
    func refused() {
        phase = .closing
        deadline = nil
    }

    /// Closes the connection a second from now (after a refusal, when the client has had time to
    /// read it and hang up).
    func closeSoon() {
        phase = .closing
        setDeadline(after: .seconds(1))
    }

    /// Ends a connection without the upgrade handler calling it a failure: its input side first
    /// (as for a client that hung up), then all of it. - Thread: its event loop.
    static func closeQuietly(_ channel: any Channel) {
        channel.close(mode: .input, promise: nil)
        channel.close(promise: nil)
    }

    // MARK: Deadlines

    private func waitForNextRequest() {
        phase = .awaitingHead(started: false)
        setDeadline(after: connections.limits.idleTimeout)
    }

    private func admit(_ channel: any Channel) {
        guard !checked else { return }
        checked = true
        let key = OpenConnections.addressKey(channel.remoteAddress)
        guard connections.admit(key) else {
            phase = .closing
            Self.closeQuietly(channel)
            return
        }
        address = key
        setDeadline(after: connections.limits.headerTimeout)
    }

    private func ended(_ channel: any Channel) {
        connections.remove(channel)
        if let address { connections.release(address) }
        address = nil
        deadline = nil
        timer?.cancel()
        timer = nil
        timerAt = nil
        stall?.cancel()
        stall = nil
    }

    /// Closes the connection at `now + delay` unless another deadline (or none) is set first. One
    /// scheduled task serves every deadline: a later one is found when it runs.
    private func setDeadline(after delay: TimeAmount) {
        let at = NIODeadline.now() + delay
        deadline = at
        if timer != nil, let timerAt, timerAt <= at { return }
        schedule(at)
    }

    private func schedule(_ at: NIODeadline) {
        guard let channel else { return }
        timer?.cancel()
        timerAt = at
        timer = channel.eventLoop.assumeIsolated().scheduleTask(deadline: at) { [weak self] () -> Void in
            self?.timerFired()
        }
    }

    private func timerFired() {
        timer = nil
        timerAt = nil
        guard let deadline, let channel else { return }
        guard NIODeadline.now() >= deadline else {
            schedule(deadline)
            return
        }
        let waited = phase
        phase = .closing
        self.deadline = nil
        let peer = channel.remoteAddress?.ipAddress ?? "an unknown address"
        let what: String? = switch waited {
        case .awaitingHead(started: true), .upgrading: "did not send a complete request in time"
        case .readingBody: "stopped sending its request's body"
        case .closing: nil
        default: "was idle"
        }
        if let what { connections.logger.debug("Closed a connection from \(peer): it \(what).") }
        Self.closeQuietly(channel)
    }
}

/// Right after the HTTP decoder of every connection: refuses what is not a well-formed
/// HTTP/1.0 or HTTP/1.1 request, and tells the ``ConnectionWatch`` where requests begin and
/// end.
///
/// A request the decoder cannot parse (two `Content-Length`s, `Content-Length` with
/// `Transfer-Encoding`, `Transfer-Encoding : chunked`, a negative length, bare LF line ends, a
/// NUL in a header, a request line or headers over the decoder's limits, HTTP/0.9), or one with
/// more than one `Host` (or none, in HTTP/1.1), is answered `400 Bad Request` and the connection
/// closed: without this, a parse error before a connection's first request reaches no handler
/// that answers it, and the connection stays open unanswered.
///
/// A request that asks for a WebSocket is passed on untouched until the server answers it: from
/// a `101` on, the connection carries WebSocket frames, which pass through as bytes.
///
/// Event loop only (the connection's); never blocks.
final class RequestGuard: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    private enum Mode {
        case http
        /// Until the answer to a WebSocket upgrade: what arrives is passed on unread (once the
        /// upgrade handler has taken the HTTP decoder away, it is bytes).
        case upgrading
        /// A WebSocket: everything passes unread.
        case stream
        case refused
    }

    private let watch: ConnectionWatch
    private var mode = Mode.http
    /// A final response's head has gone out and its end not yet.
    private var responding = false

    init(watch: ConnectionWatch) {
        self.watch = watch
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch mode {
        case .refused: return
        case .upgrading, .stream:
            context.fireChannelRead(data)
            return
        case .http:
            break
        }
        switch RequestGuard.unwrapInboundIn(data) {
        case .head(let head):
            if let problem = Self.problem(with: head) {
                refuse(context: context, because: problem)
                return
            }
            if head.headers["Upgrade"].contains(where: { !$0.isEmpty }) {
                mode = .upgrading
                watch.upgradeAsked()
            } else {
                watch.headArrived()
            }
        case .body:
            break
        case .end:
            watch.requestEnded()
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if mode == .stream {
            context.write(data, promise: promise)
            return
        }
        // Before the answer to an upgrade, only HTTP response parts are written (the 101, a
        // refusal, or an ordinary response when the upgrade is not made).
        let part = RequestGuard.unwrapOutboundIn(data)
        if mode == .upgrading {
            if case .head(let head) = part, head.status == .switchingProtocols {
                mode = .stream
                watch.upgraded()
                context.write(data, promise: promise)
                return
            }
            mode = .http
            watch.upgradeDeclined()
        }
        switch part {
        case .head(let head) where head.status.code >= 200:
            responding = true
        case .end:
            responding = false
            watch.responseEnded()
        default:
            break
        }
        context.write(data, promise: promise)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard mode == .http || mode == .refused, error is HTTPParserError || error is ByteToMessageDecoderError else {
            context.fireErrorCaught(error)
            return
        }
        // Answered here (never passed on: the server's own handling would leave it open).
        if mode == .http { refuse(context: context, because: Self.reason(error)) }
    }

    /// What is wrong with a request's head, or `nil`.
    static func problem(with head: HTTPRequestHead) -> String? {
        guard head.version.major == 1, head.version.minor <= 1 else {
            return "only HTTP/1.0 and HTTP/1.1 are served"
        }
        let hosts = head.headers["Host"].count
        if hosts > 1 { return "the request has \(hosts) Host headers" }
        if hosts == 0, head.version.minor == 1 { return "an HTTP/1.1 request must have a Host header" }
        return nil
    }

    /// A decoder's error in words.
    static func reason(_ error: any Error) -> String {
        switch error as? HTTPParserError {
        case .headerOverflow?: "the request line or headers are longer than this server accepts"
        case .invalidVersion?: "only HTTP/1.0 and HTTP/1.1 are served"
        case .unexpectedContentLength?, .invalidContentLength?: "its Content-Length is not one whole number"
        default: "it is not well-formed HTTP/1.1"
        }
    }

    /// Answers 400 (unless a response is under way) and closes the connection.
    private func refuse(context: ChannelHandlerContext, because reason: String) {
        mode = .refused
        let canAnswer = !responding && !watch.hasOpenRequests && !watch.isClosing
        watch.refused()
        let channel = context.channel
        guard canAnswer else {
            ConnectionWatch.closeQuietly(channel)
            return
        }
        let text = "Bad request: \(reason). The connection is closed.\n"
        let headers = HTTPHeaders([
            ("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", String(text.utf8.count)), ("Connection", "close"),
            ("Cache-Control", "no-store"), ("X-Content-Type-Options", "nosniff"),
        ])
        context.write(RequestGuard.wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .badRequest, headers: headers))), promise: nil)
        context.write(RequestGuard.wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: text)))), promise: nil)
        let watch = self.watch
        let written = context.eventLoop.makePromise(of: Void.self)
        context.writeAndFlush(RequestGuard.wrapOutboundOut(.end(nil)), promise: written)
        written.futureResult.assumeIsolated().whenComplete { _ in
            // Half-closed first: the client reads the answer and hangs up, and what it still sends
            // is read and dropped (closing with bytes unread would reset the connection, which can
            // lose the answer on the way). Closed all the same a moment later.
            channel.close(mode: .output, promise: nil)
            watch.closeSoon()
        }
    }
}
