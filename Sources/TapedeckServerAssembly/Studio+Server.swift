public import Foundation
import TapedeckApp
public import TapedeckAssembly
import TapedeckCore
public import TapedeckServer

/// `tapedeck serve`'s part of the composition root: the web server over a ``Studio``. A module of
/// its own so that the web and HTTP stack (Hummingbird, its WebSocket module, the service
/// lifecycle) is linked only by what serves the page: the command line and the server's tests,
/// not the composition root's other users (the fuzz targets among them).
extension Studio {
    /// The web server over this studio's store and a recording desk whose recorders are made
    /// here (``makeRecorder(encoder:)``).
    /// - Parameters:
    ///   - otherRecorders: the control sockets (``RecorderControl``) of the recorders of other
    ///     processes recording into this library now (the command line's registry), which the
    ///     page shows and controls when its own desk is idle.
    ///   - started, ended: told when the desk's own recording starts and ends.
    ///   - exportFolder: a private folder for exports made on request.
    ///   - exportCommand: the `tapedeck` executable and the options of `export` that give
    ///     it this studio's configuration (``ServerParts/exportCommand``): exports on request
    ///     run in child processes.
    /// - Thread: main actor. Never blocks.
    public func makeServer(options: ServerOptions, token: AccessToken?, exportFolder: URL, exportCommand: [String],
                           otherRecorders: @escaping @MainActor () -> [URL] = { [] },
                           started: @escaping @MainActor (String) -> Void = { _ in },
                           ended: @escaping @MainActor () -> Void = {}) -> WebServer {
        let desk = RecordingDesk(makeRecorder: { [unowned self] in try self.makeRecorder() }, logger: logger,
                                 started: started, ended: ended)
        var parts = ServerParts(
            store: store, desk: desk, waveforms: makeWaveforms(),
            exportCommand: exportCommand,
            exportFormats: encoders.map(\.name), defaultExportFormat: "flac",
            mediaTypes: Dictionary(encoders.map { ($0.name, $0.mediaType) }, uniquingKeysWith: { a, _ in a }),
            makeDoctor: { [unowned self] in try self.makeDoctor() }, configuredFormat: configuration.recording.format,
            version: TapedeckVersion.string, logger: logger, otherRecorders: otherRecorders)
        parts.warnFreeMinutes = configuration.recording.warnFreeMinutes
        let stateFolder = URL(fileURLWithPath: UserPaths(environment: ProcessInfo.processInfo.environment).stateHome).appendingPathComponent("tapedeck")
        parts.retentionState = RetentionRunner.stateFile(library: store.storage.rootURL, stateFolder: stateFolder)
        // The backlog is read from the ledger of the remote's location; the remote is only made
        // to learn that location (no request is sent), then closed.
        if configuration.sync.plugin != nil, let remote = try? makeRemote() {
            parts.uploadLedger = UploadLedger(libraryURL: store.storage.rootURL, remote: remote.location)
            Task { await remote.shutdown() }
        }
        parts.schedule = configuration.schedule
        // A catalog its settings refuse is said by serve's heartbeat, which makes one too.
        if let catalog = try? makeFleetIndex(environment: ProcessInfo.processInfo.environment) {
            parts.fleetCatalog = catalog
            parts.fleetRefreshSeconds = SyncSettings(configuration.syncSettings).catalogHeartbeat
        }
        if !configuration.alerts.isEmpty {
            parts.alertsFolder = UserPaths(environment: ProcessInfo.processInfo.environment).alertsFolder
        }
        return WebServer(parts: parts, options: options, token: token, exportFolder: exportFolder)
    }
}
