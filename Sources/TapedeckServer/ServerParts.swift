public import TapedeckApp
public import TapedeckCore
import Foundation
public import Logging
import Dispatch

/// What the composition root hands the server: the same objects the command line uses, and
/// factories for the ones made per use. A plain value; made and used on the main actor.
public struct ServerParts {
    public var store: SessionStore
    public var desk: RecordingDesk
    public var waveforms: TakeWaveforms
    /// An exporter (with every decoder, the loudness meter and resampler), per export.
    public var makeExporter: @MainActor () -> TakeExporter
    /// An encoder by format name (`flac`, `wav`, …) with its configured settings.
    public var makeEncoder: @MainActor (String) throws -> any AudioEncoder
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

    public init(store: SessionStore, desk: RecordingDesk, waveforms: TakeWaveforms,
                makeExporter: @escaping @MainActor () -> TakeExporter, makeEncoder: @escaping @MainActor (String) throws -> any AudioEncoder,
                exportFormats: [String], defaultExportFormat: String, mediaTypes: [String: String],
                makeDoctor: @escaping @MainActor () throws -> LibraryDoctor, configuredFormat: AudioFormat, version: String, logger: Logger) {
        self.store = store
        self.desk = desk
        self.waveforms = waveforms
        self.makeExporter = makeExporter
        self.makeEncoder = makeEncoder
        self.exportFormats = exportFormats
        self.defaultExportFormat = defaultExportFormat
        self.mediaTypes = mediaTypes
        self.makeDoctor = makeDoctor
        self.configuredFormat = configuredFormat
        self.version = version
        self.logger = logger
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
