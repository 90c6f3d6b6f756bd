public import Foundation
public import Logging
public import TapedeckApp
public import TapedeckCore

/// The composition root: builds the object graph from a configuration and a plugin catalog,
/// through initializers only. The CLI and the tests build it the same way.
@MainActor
public final class Studio {
    public let configuration: TapedeckConfiguration
    public let catalog: PluginCatalog
    public let logger: Logger
    public let store: SessionStore
    public let encoder: any AudioEncoder
    /// Every encoder compiled in (used to repair interrupted takes of any encoding).
    public let encoders: [any AudioEncoder]
    public let decoders: [any AudioDecoder]
    private let context: PluginContext

    /// Assembles storage, encoders and decoders. Capture and playback are made on first use, so
    /// commands that only read the library work on machines with no audio device configured.
    /// - Thread: main actor. Blocks briefly while the library opens.
    public init(configuration: TapedeckConfiguration, catalog: PluginCatalog, logger: Logger,
                environment: [String: String] = ProcessInfo.processInfo.environment) throws {
        self.configuration = configuration
        self.catalog = catalog
        self.logger = logger
        let home = environment["HOME"] ?? NSHomeDirectory()
        let dataHome = environment["XDG_DATA_HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? home + "/.local/share"
        let context = PluginContext(logger: logger, defaultLibraryURL: URL(fileURLWithPath: dataHome).appendingPathComponent("tapedeck"))
        self.context = context

        guard let storageName = configuration.storage.plugin,
              let storagePlugin = catalog.storage.first(where: { $0.name == storageName }) else {
            throw TapedeckError(.configuration, "storage.backend is not set. Set it to one of: \(catalog.storage.map(\.name).joined(separator: ", ")).")
        }
        store = SessionStore(storage: try storagePlugin.make(configuration.storage.settings, context), logger: logger)

        var encoders: [any AudioEncoder] = []
        for plugin in catalog.encoders {
            let settings = plugin.name == configuration.encoder.plugin
                ? configuration.encoder.settings : try PluginSettings.resolving(plugin.settings)
            encoders.append(try plugin.make(settings, context))
        }
        self.encoders = encoders
        guard let chosen = encoders.first(where: { $0.name == configuration.encoder.plugin }) else {
            throw TapedeckError(.configuration, "encoder.name is not set. Set it to one of: \(encoders.map(\.name).joined(separator: ", ")).")
        }
        encoder = chosen
        decoders = try catalog.decoders.map { try $0.make(try PluginSettings.resolving($0.settings), context) }
    }

    /// Opens the library: recovers takes interrupted by a crash, then loads the sessions.
    /// - Returns: the takes recovered.
    /// - Thread: main actor; suspends while storage works.
    @discardableResult
    public func openLibrary() async throws -> [Take] {
        try await store.open(recoveringWith: encoders)
    }

    /// The configured capture backend.
    /// - Throws: `.configuration` when `capture.backend` is not set (never a silent null fallback).
    public func makeCaptureBackend() throws -> any CaptureBackend {
        guard let name = configuration.capture.plugin, let plugin = catalog.capture.first(where: { $0.name == name }) else {
            throw TapedeckError(.configuration,
                "No capture backend is configured. Set capture.backend in \(configuration.file ?? "a config file (see Configuration/tapedeck.yaml)"), e.g. `--config Configuration/ci.yaml` for the null backend. Known: \(catalog.capture.map(\.name).joined(separator: ", ")).")
        }
        return try plugin.make(configuration.capture.settings, context)
    }

    /// The configured playback backend.
    /// - Throws: `.configuration` when `playback.backend` is not set.
    public func makePlaybackBackend() throws -> any PlaybackBackend {
        guard let name = configuration.playback.plugin, let plugin = catalog.playback.first(where: { $0.name == name }) else {
            throw TapedeckError(.configuration,
                "No playback backend is configured. Set playback.backend in \(configuration.file ?? "a config file (see Configuration/tapedeck.yaml)"). Known: \(catalog.playback.map(\.name).joined(separator: ", ")).")
        }
        return try plugin.make(configuration.playback.settings, context)
    }

    /// A recorder wired to the configured capture backend, encoder and store.
    public func makeRecorder() throws -> TakeRecorder {
        let settings = RecordingSettings(
            format: configuration.format, periodFrames: configuration.capturePeriodFrames,
            bufferSeconds: configuration.captureBufferSeconds,
            checkpointInterval: .milliseconds(Int64(configuration.checkpointSeconds * 1000)))
        return TakeRecorder(capture: try makeCaptureBackend(), encoder: encoder, store: store, settings: settings, logger: logger)
    }

    /// A player wired to the configured playback backend and every decoder.
    public func makePlayer() throws -> TakePlayer {
        TakePlayer(playback: try makePlaybackBackend(), decoders: decoders, store: store, logger: logger)
    }
}
