public import Hummingbird
public import TapedeckApp
import TapedeckCore
import Logging
import ServiceLifecycle
import HummingbirdCore
import HummingbirdWebSocket
import HTTPTypes
import NIOCore
#if canImport(Glibc)
import Glibc
#endif
public import Foundation
import Synchronization

/// `tapedeck serve`: the web page and JSON API over the same ``SessionStore`` and
/// ``RecordingDesk`` (and through it ``TakeRecorder``) the command line uses, built on
/// Hummingbird. Routes: docs/openapi.yaml.
///
/// Made and run on the main actor; requests are served on Hummingbird's event loops and hop to
/// the main actor for the library and recorder; files are read on a queue of their own.
@MainActor
public final class WebServer {
    let parts: ServerParts
    let options: ServerOptions
    let token: AccessToken?
    let live: LiveState
    let library: LibraryView
    let exports: ExportJobs
    let limiter = LoginLimiter()
    let metrics = MetricsExporter()
    let loginLinks = LoginLinks()
    var doctorCache: (Date, [DoctorFinding])?
    /// The upload backlog, kept until the library or the ledger changes (``uploadBacklog()``).
    var backlogCache: (key: String, backlog: UploadBacklog)?
    var doctorScan: Task<[DoctorFinding], any Error>?
    /// The fleet catalog's recorders, read in the background; `nil` without a catalog.
    let fleet: FleetView?
    static let doctorKeepSeconds = 10.0
    private nonisolated let group = Mutex<ServiceGroup?>(nil)
    nonisolated let connections: OpenConnections
    /// How long connections may stay open once a stop has finished the recording: a request
    /// under way (a download) gets this long to end; then every connection is closed. Without a
    /// bound, one connection a client leaves open (a half-sent request) would keep the server
    /// running.
    public nonisolated static let connectionGrace: Duration = .seconds(5)

    /// - Parameters:
    ///   - token: required when ``ServerOptions/requiresToken``; `nil` otherwise.
    ///   - exportFolder: a private folder for exports made on request (removed when the server stops).
    public init(parts: ServerParts, options: ServerOptions, token: AccessToken?, exportFolder: URL) {
        // Never a server off the loopback address that asks for nothing.
        precondition(token != nil || !options.requiresToken, "A server that requires a token was made without one.")
        self.parts = parts
        self.options = options
        self.token = options.requiresToken ? token : nil
        let live = LiveState(desk: parts.desk, libraryPath: parts.store.storage.rootURL.path, configuredFormat: parts.configuredFormat,
                             interval: options.stateInterval, others: parts.otherRecorders)
        self.live = live
        connections = OpenConnections(limits: ConnectionLimits(options), logger: parts.logger)
        library = LibraryView(store: parts.store, generation: { live.libraryGeneration })
        exports = ExportJobs(parts: parts, folder: exportFolder)
        fleet = parts.fleetCatalog.map { FleetView(catalog: $0, interval: parts.fleetRefreshSeconds) }
    }

    /// The router: pages, assets, the API and the live socket. `HEAD` is answered wherever `GET`
    /// is (without the body), and a method a path does not take with `405` and `Allow`.
    public func makeRouter() -> Router<ServerContext> {
        let router = Router(context: ServerContext.self, options: .autoGenerateHeadEndpoints)
        let routes = RecordedRoutes(router: router, table: RouteTable())
        router.add(middleware: ContentSecurityMiddleware<ServerContext>(contentSecurityPolicy: Self.contentSecurityPolicy))
        router.add(middleware: FramingHeaders())
        router.add(middleware: APIErrorMiddleware())
        router.add(middleware: MethodGuard(routes: routes.table))
        router.add(middleware: AccessGuard(token: token, loopbackOnly: options.isLoopback, limiter: limiter))
        addAPI(to: routes)
        addPages(to: routes)
        addLive(to: routes)
        return router
    }

    /// What the HTTP decoder accepts: a request line or header of at most 16 KiB, 64 KiB of
    /// headers in all, 200 headers (a browser sends a few KiB); more is refused with 400.
    nonisolated static let decoderLimits = HTTP1Channel.Configuration.DecoderConfiguration(
        maxHeaderFieldSize: 16 * 1024, maxHeaderListSize: 64 * 1024, maxHeaderFieldCount: 200)

    /// The Hummingbird application on ``ServerOptions`` host and port.
    /// - Parameter listening: told the address once the server listens (its real port when 0 was asked).
    public func makeApplication(listening: @escaping @Sendable (String) -> Void = { _ in }) -> some ApplicationProtocol {
        let router = makeRouter()
        return Application(
            router: router,
            server: connections.http1WebSocketUpgrade(webSocketRouter: router, configuration: .init(
                http1: .init(httpDecoderConfiguration: Self.decoderLimits), ws: .init(maxFrameSize: 1 << 16))),
            configuration: ApplicationConfiguration(address: .hostname(options.host, port: options.port), serverName: nil),
            onServerRunning: { channel in
                let address = channel.localAddress
                let host = address?.ipAddress.map { $0.contains(":") ? "[\($0)]" : $0 } ?? "127.0.0.1"
                listening("http://\(host):\(address?.port ?? 0)/")
            },
            logger: parts.logger)
    }

    /// Serves until ``shutdown()``: then finishes a recording in progress as `record` does on
    /// Ctrl-C (drained, the take finished), closes the live streams and stops listening;
    /// connections still open ``connectionGrace`` after that are closed.
    /// - Thread: main actor; suspends while serving.
    public func run(listening: @escaping @Sendable (String) -> Void = { _ in }) async throws {
        let app = makeApplication(listening: listening)
        let recorder = DeskService(server: self)
        let serviceGroup = ServiceGroup(configuration: .init(
            services: [.init(service: app), .init(service: recorder)],
            gracefulShutdownSignals: [], logger: parts.logger))
        group.withLock { $0 = serviceGroup }
        live.start()
        fleet?.start()
        do {
            try await serviceGroup.run()
            await fleet?.stop()
        } catch let error as IOError {
            live.stop()
            await fleet?.stop()
            throw Self.listenError(error, options: options)
        } catch is SocketAddressError {
            live.stop()
            await fleet?.stop()
            throw TapedeckError(.invalidArgument, "--listen \(options.host):\(options.port): no address of that name. Give an address (127.0.0.1, 0.0.0.0, [::]) or a name this machine can look up.")
        } catch {
            await fleet?.stop()
            throw error
        }
    }

    /// What a failure to listen means, and what to do about it.
    nonisolated static func listenError(_ error: IOError, options: ServerOptions) -> TapedeckError {
        listenError(error, host: options.host, port: options.port, flag: "--listen", other: "another `tapedeck serve`?")
    }

    /// What a failure to listen at `host`:`port` (given with `flag`) means, and what to do.
    nonisolated static func listenError(_ error: IOError, host: String, port: Int, flag: String, other: String) -> TapedeckError {
        let address = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        switch error.errnoCode {
        case EADDRINUSE:
            return TapedeckError(.busy, "\(address) is in use by another program (\(other)). Choose another port with \(flag) \(host):PORT, or stop the other one.", systemCode: EADDRINUSE)
        case EACCES:
            return TapedeckError(.configuration, "Listening on port \(port) needs privileges this user lacks (ports below 1024 are root's). Choose a port of 1024 or more with \(flag), or put a reverse proxy in front (see the README).", systemCode: EACCES)
        case EADDRNOTAVAIL:
            return TapedeckError(.invalidArgument, "No network interface of this machine has the address \(host). Listen on 0.0.0.0 (every network) or on one of this machine's addresses (`ip -brief address` lists them).", systemCode: EADDRNOTAVAIL)
        default:
            return TapedeckError(.io, "Could not listen on \(address): \(error). Choose another address with \(flag).", systemCode: error.errnoCode)
        }
    }

    /// Begins a graceful shutdown (a stop signal arrived). - Thread: any. Never blocks.
    public nonisolated func shutdown() {
        guard let g = group.withLock({ $0 }) else { return }
        Task { await g.triggerGracefulShutdown() }
    }

    /// A one-time login link to this server at `base` (its address, e.g. `http://192.168.1.5:8470/`),
    /// good once within 15 minutes; `nil` when no token is asked for.
    /// - Thread: any. Never blocks.
    public nonisolated func loginLink(at base: String) -> String? {
        guard token != nil else { return nil }
        return (base.hasSuffix("/") ? base : base + "/") + "login?once=" + loginLinks.issue()
    }

    /// The server's own recorder (its recording's control socket answers from it).
    public var desk: RecordingDesk { parts.desk }

    /// Sets a marker in the recording (`tapedeck mark`, SIGUSR1). - Thread: main actor. Never blocks.
    public func markFromSignal(label: String) throws {
        try parts.desk.mark(label: label)
    }

    /// Called when the server shuts down: the recording is finished first.
    func finishForShutdown() async {
        if parts.desk.isRecording { parts.logger.info("Finishing the recording in progress…") }
        await parts.desk.finish()
        live.stop()
        exports.removeAll()
        let connections = self.connections, logger = parts.logger
        Task.detached {
            try? await Task.sleep(for: Self.connectionGrace)
            let open = connections.count
            guard open > 0 else { return }
            logger.notice("Closing \(open) connection(s) still open \(Self.connectionGrace) after the stop.")
            connections.closeAll()
        }
    }
}

/// Finishes the recorder when the service group shuts down; listed after the application, so
/// it is shut down first (ServiceLifecycle stops services in reverse order).
struct DeskService: Service {
    let server: WebServer

    func run() async throws {
        try? await gracefulShutdown()
        // In a task of its own, so no cancellation cuts the take's finishing short.
        let server = self.server
        await Task { @MainActor in await server.finishForShutdown() }.value
    }
}

/// What every response may load: only the page's own script, style and media (and pictures
/// as `data:` URLs); no framing, no form posts or `<base>` elsewhere. Hummingbird's
/// `ContentSecurityMiddleware` sends it, with `X-Content-Type-Options: nosniff`, on every
/// response, refusals included (``APIErrorMiddleware`` runs inside it).
extension WebServer {
    nonisolated static let contentSecurityPolicy: ContentSecurityPolicy = [
        .defaultSrc(.self), .imgSrc(.self, "data:"), .mediaSrc(.self), .connectSrc(.self), .styleSrc(.self), .scriptSrc(.self),
        .frameAncestors(.none), .formAction(.self), .baseURI(.none),
    ]
}

/// The headers every response carries that Hummingbird's `ContentSecurityMiddleware` does not
/// set: no framing (for browsers that predate `frame-ancestors`) and no referrer to other sites
/// (the same-origin policy keeps the `Origin` header on the page's own form posts). Refusals
/// carry them too (``APIErrorMiddleware`` runs inside it). A plain value; any thread. Never blocks.
struct FramingHeaders: RouterMiddleware {
    typealias Context = ServerContext

    func handle(_ request: Request, context: ServerContext, next: (Request, ServerContext) async throws -> Response) async throws -> Response {
        var response = try await next(request, context)
        response.headers[HTTPField.Name("X-Frame-Options")!] = "DENY"
        response.headers[HTTPField.Name("Referrer-Policy")!] = "same-origin"
        return response
    }
}
