public import Foundation
public import TapedeckApp
import TapedeckCore
public import TapedeckServer

/// The parts of the graph `tapedeck serve` and `tapedeck waveform` need.
extension Studio {
    /// Waveform overviews, kept in the user's cache folder (``UserPaths/waveformFolder``).
    /// - Thread: main actor. Never blocks.
    public func makeWaveforms() -> TakeWaveforms {
        TakeWaveforms(folder: paths.waveformFolder, decoders: decoders)
    }

    /// The web server over this studio's store and a recording desk whose recorders are made
    /// here (``makeRecorder(encoder:)``).
    /// - Parameters:
    ///   - otherRecorder, started, ended: how the desk learns of recorders in other processes and
    ///     tells them of its own (the command line's registry of running recorders).
    ///   - exportFolder: a private folder for exports made on request.
    /// - Thread: main actor. Never blocks.
    public func makeServer(options: ServerOptions, token: AccessToken?, exportFolder: URL,
                           otherRecorder: @escaping @MainActor () -> String? = { nil },
                           started: @escaping @MainActor (String) -> Void = { _ in },
                           ended: @escaping @MainActor () -> Void = {}) -> WebServer {
        let desk = RecordingDesk(makeRecorder: { [unowned self] in try self.makeRecorder() }, logger: logger,
                                 otherRecorder: otherRecorder, started: started, ended: ended)
        let parts = ServerParts(
            store: store, desk: desk, waveforms: makeWaveforms(),
            makeExporter: { [unowned self] in self.makeExporter() },
            makeEncoder: { [unowned self] name in try self.makeEncoder(named: name, overrides: [:]).0 },
            exportFormats: encoders.map(\.name), defaultExportFormat: "flac",
            mediaTypes: Dictionary(encoders.map { ($0.name, $0.mediaType) }, uniquingKeysWith: { a, _ in a }),
            makeDoctor: { [unowned self] in try self.makeDoctor() }, configuredFormat: configuration.recording.format,
            version: TapedeckVersion.string, logger: logger)
        return WebServer(parts: parts, options: options, token: token, exportFolder: exportFolder)
    }

    /// The doctor of the configured store (`tapedeck doctor`, the server's findings).
    /// - Throws: `.configuration` for a store that cannot be examined, saying which can.
    /// - Thread: main actor. Never blocks.
    public func makeDoctor() throws -> LibraryDoctor {
        guard let storage = store.storage as? any LibraryMaintenance else {
            let configured = configuration.storage.plugin ?? "configured"
            let others = catalog.storage.map(\.name).filter { $0 != configured }.joined(separator: ", ")
            throw TapedeckError(.configuration, "The \(configured) storage backend cannot be examined by doctor. Examine a library of another store instead (\(others): --set storage.backend=NAME).")
        }
        return LibraryDoctor(storage: storage, encoders: encoders, decoders: decoders)
    }

    /// Where `tapedeck serve` keeps its token unless `--token-file` says otherwise.
    /// - Thread: any. Never blocks.
    public nonisolated var defaultServeTokenFile: URL { paths.serveTokenFile }
}
