public import TapedeckApp
public import TapedeckCore
public import Foundation
public import Logging
import Dispatch

/// What the composition root hands the server: the same objects the command line uses, and
/// factories for the ones made per use. A plain value; made and used on the main actor.
public struct ServerParts {
    public var store: SessionStore
    public var desk: RecordingDesk
    public var waveforms: TakeWaveforms
    /// The program that exports on request and the options that give it this server's
    /// configuration and library: the `tapedeck` executable, then e.g. `--config …`, `--set
    /// storage.directory.path=…`. Each export runs as `EXECUTABLE export ID OPTIONS… --format F
    /// -o DIR/ --json --progress-fd 3` (``ExportChild``).
    public var exportCommand: [String]
    /// The format names exports may use, the one offered first, and each encoding's media type.
    public var exportFormats: [String]
    public var defaultExportFormat: String
    public var mediaTypes: [String: String]
    /// The library's doctor, for its findings (throws, saying why, for a store it cannot examine).
    public var makeDoctor: @MainActor () throws -> LibraryDoctor
    /// The format recordings are configured to use (for the time left on the disk).
    public var configuredFormat: AudioFormat
    public var version: String
    public var logger: Logger
    /// The control sockets (``RecorderControl``) of other processes' recorders recording into
    /// this library now: the page shows and controls the first while the desk is idle.
    public var otherRecorders: @MainActor () -> [URL]
    /// Minutes of audio the library's disk must hold for the server to be healthy
    /// (`storage.warn-free-minutes`; 0: not checked).
    public var warnFreeMinutes: Double = 10
    /// The alerts' folder (`UserPaths.alertsFolder`), whose outbox `/metrics` counts and
    /// `/api/health` checks; `nil` without alert rules.
    public var alertsFolder: URL?
    /// Retention's state file for this library (`RetentionRunner.stateFile`), whose deletions
    /// `/metrics` counts; `nil`: none counted.
    public var retentionState: URL?
    /// The ledger of uploads to the configured remote, whose backlog `/metrics` shows and
    /// `/api/health` checks; `nil` without a remote.
    public var uploadLedger: UploadLedger?
    /// The config's recording schedule (`schedule:`), whose next stretches the page shows; `nil`
    /// without one.
    public var schedule: RecordingSchedule?
    /// The fleet catalog (`sync.catalog`), whose recorders' heartbeats `/api/fleet` and the page
    /// show, read again every `fleetRefreshSeconds`; `nil` without one.
    public var fleetCatalog: (any FleetIndex)?
    public var fleetRefreshSeconds: Double = 10

    public init(store: SessionStore, desk: RecordingDesk, waveforms: TakeWaveforms,
                exportCommand: [String],
                exportFormats: [String], defaultExportFormat: String, mediaTypes: [String: String],
                makeDoctor: @escaping @MainActor () throws -> LibraryDoctor, configuredFormat: AudioFormat, version: String, logger: Logger,
                otherRecorders: @escaping @MainActor () -> [URL] = { [] }) {
        self.store = store
        self.desk = desk
        self.waveforms = waveforms
        self.exportCommand = exportCommand
        self.exportFormats = exportFormats
        self.defaultExportFormat = defaultExportFormat
        self.mediaTypes = mediaTypes
        self.makeDoctor = makeDoctor
        self.configuredFormat = configuredFormat
        self.version = version
        self.logger = logger
        self.otherRecorders = otherRecorders
    }
}

/// Blocking work the server does off the main actor and off Swift's cooperative pool: reading
/// audio files for responses (many at once) and decoding takes for waveforms (one at a time).
enum OffMain {
    static let files = DispatchQueue(label: "tapedeck.serve.files", attributes: .concurrent)
    static let decoding = DispatchQueue(label: "tapedeck.serve.decoding")

    static func run<T: Sendable>(on queue: DispatchQueue, _ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { cont in
            queue.async { cont.resume(with: Result { try body() }) }
        }
    }
}
