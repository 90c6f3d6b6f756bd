public import Foundation
public import Logging
public import TapedeckApp
public import TapedeckCore
import Hummingbird
import HummingbirdCore
import NIOCore
import ServiceLifecycle
import Synchronization
import TapedeckAlerts

/// `record --metrics ADDRESS`: the `/metrics` of one recording run without the page, for
/// Prometheus to scrape: the same series as `tapedeck serve`'s (``MetricsExporter``) for the
/// recorder, its channels, the disk and the alerts' outbox; the library's takes are not counted
/// (the run never reads the whole library). `GET /metrics` only; anything else is 404.
/// - Thread: main actor; ``run(listening:)`` suspends while serving, ``shutdown()`` never blocks.
@MainActor
public final class MetricsListener {
    private let live: LiveState
    private let exporter = MetricsExporter()
    private let host: String
    private let port: Int
    private let version: String
    private let alertsFolder: URL?
    private let logger: Logger
    private nonisolated let group = Mutex<ServiceGroup?>(nil)

    /// - Parameters:
    ///   - address: `HOST:PORT`, `[IPv6]:PORT`, `:PORT` or `PORT` (loopback), as `serve --listen`.
    ///   - status: the recorder's status now; `nil` while it records nothing (a schedule's wait).
    ///   - alertsFolder: the alerts' folder whose outbox is counted; `nil` without alert rules.
    /// - Throws: `.invalidArgument` for an address that is not one.
    public init(address: String, status: @escaping @MainActor () -> RecorderStatus?, libraryPath: String,
                configuredFormat: AudioFormat, alertsFolder: URL?, version: String, logger: Logger) throws {
        let parsed: (String, Int)
        do { parsed = try ServerOptions.parse(address) } catch is TapedeckError {
            // Not serve's advice: this listener has no token, and its own port.
            throw TapedeckError(.invalidArgument, "--metrics \(address): write ADDRESS:PORT, e.g. 127.0.0.1:9470 (this machine only) or 0.0.0.0:9470 (every network: /metrics asks for no token, so only where that network is trusted).")
        }
        (host, port) = parsed
        let desk = RecordingDesk(makeRecorder: { throw TapedeckError(.invalidArgument, "record --metrics does not record on request.") }, logger: logger)
        live = LiveState(desk: desk, libraryPath: libraryPath, configuredFormat: configuredFormat, interval: .milliseconds(250), local: status)
        self.alertsFolder = alertsFolder
        self.version = version
        self.logger = logger
    }

    /// One scrape's text.
    func scrape() -> [UInt8] {
        let state = live.snapshot()
        let quiet = live.secondsSinceFrames()
        let waiting = alertsFolder.map { AlertOutbox(folder: $0).entries() } ?? []
        let entries = (count: waiting.count, oldestSeconds: waiting.first.map { max(0, Date().timeIntervalSince($0.event.time)) })
        let healthy = !state.recording || (quiet ?? 0) < WebServer.framesStaleSeconds
        let facts = MetricsExporter.Facts(takesByState: nil, sessionCount: nil, secondsSinceFrames: quiet, alertsWaiting: entries.count,
                                          retentionDeleted: (0, 0), oldestAlertSeconds: entries.oldestSeconds, healthy: healthy, version: version)
        return exporter.scrape(state, facts)
    }

    /// Serves until ``shutdown()``.
    /// - Parameter listening: told the address once it listens (its real port when 0 was asked).
    /// - Throws: `.busy` when the address is in use, `.invalidArgument` when it is not this machine's.
    public func run(listening: @escaping @Sendable (String) -> Void = { _ in }) async throws {
        let router = Router()
        router.get("metrics") { @MainActor _, _ in
            Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8", .cacheControl: "no-store"],
                     body: ResponseBody(byteBuffer: ByteBuffer(bytes: self.scrape())))
        }
        let app = Application(router: router, configuration: ApplicationConfiguration(address: .hostname(host, port: port), serverName: nil),
                              onServerRunning: { channel in
                                  let address = channel.localAddress
                                  let host = address?.ipAddress.map { $0.contains(":") ? "[\($0)]" : $0 } ?? "127.0.0.1"
                                  listening("http://\(host):\(address?.port ?? 0)/metrics")
                              }, logger: logger)
        let serviceGroup = ServiceGroup(configuration: .init(services: [.init(service: app)], gracefulShutdownSignals: [], logger: logger))
        group.withLock { $0 = serviceGroup }
        live.start()
        defer { live.stop() }
        do {
            try await serviceGroup.run()
        } catch let error as IOError {
            throw WebServer.listenError(error, host: host, port: port, flag: "--metrics", other: "another recorder's --metrics, or a `tapedeck serve`?")
        } catch is SocketAddressError {
            throw TapedeckError(.invalidArgument, "--metrics \(host):\(port): no address of that name. Give an address (127.0.0.1, 0.0.0.0, [::]) or a name this machine can look up.")
        }
    }

    /// Stops listening. - Thread: any; never blocks.
    public nonisolated func shutdown() {
        guard let group = group.withLock({ $0 }) else { return }
        Task { await group.triggerGracefulShutdown() }
    }
}
