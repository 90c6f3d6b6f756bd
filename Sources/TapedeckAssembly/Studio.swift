public import Foundation
public import Logging
public import TapedeckApp
public import TapedeckCore
public import TapedeckAlerts
import TapedeckBundleStorage
public import TapedeckProvenance
import TapedeckLoudness
import TapedeckResample

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
    /// The user's folders, for messages that say where a config file goes.
    let paths: UserPaths
    /// The sender of time-stamp requests (`provenance.tsa`), made with the first sealer.
    public internal(set) var timeStamper: TimeStamper?

    /// Assembles storage, encoders and decoders. Capture and playback are made on first use, so
    /// commands that only read the library work on machines with no audio device configured.
    /// - Thread: main actor. Blocks briefly while the library opens.
    public init(configuration: TapedeckConfiguration, catalog: PluginCatalog, logger: Logger,
                environment: [String: String] = ProcessInfo.processInfo.environment) throws {
        self.configuration = configuration
        self.catalog = catalog
        self.logger = logger
        let paths = UserPaths(environment: environment)
        self.paths = paths
        var context = PluginContext(logger: logger, defaultLibraryURL: paths.defaultLibrary)
        context.resampler = SoxrConversion()
        self.context = context

        guard let storageName = configuration.storage.plugin,
              let storagePlugin = catalog.storage.first(where: { $0.name == storageName }) else {
            throw TapedeckError(.configuration, "storage.backend is not set. Set it to one of: \(catalog.storage.map(\.name).joined(separator: ", ")).")
        }
        // The default library is made private (0700), as the XDG specification asks.
        if configuration.libraryPath(catalog: catalog, paths: paths) == paths.defaultLibrary.path {
            try FileModes.makePrivateFolder(paths.defaultLibrary)
        }
        store = SessionStore(storage: try storagePlugin.make(configuration.storage.settings, Self.context(context, "storage", storageName)),
                             logger: logger)

        var encoders: [any AudioEncoder] = []
        for plugin in catalog.encoders {
            let settings = plugin.name == configuration.encoder.plugin
                ? configuration.encoder.settings
                : try PluginSettings.resolving(plugin.settings, overrides: Self.configuredTexts(of: plugin.name, in: configuration))
            encoders.append(try plugin.make(settings, Self.context(context, "encoder", plugin.name)))
        }
        self.encoders = encoders
        guard let chosen = encoders.first(where: { $0.name == configuration.encoder.plugin }) else {
            throw TapedeckError(.configuration, "encoder.name is not set. Set it to one of: \(encoders.map(\.name).joined(separator: ", ")).")
        }
        encoder = chosen
        decoders = try catalog.decoders.map { try $0.make(try PluginSettings.resolving($0.settings), context) }
    }

    /// Opens the library: recovers takes interrupted by a crash, then (with `loadingSessions`)
    /// loads the sessions. A command that only records passes `false`, so that it reads nothing
    /// of the library but the session it records into.
    /// - Returns: the takes recovered.
    /// - Thread: main actor; suspends while storage works.
    @discardableResult
    public func openLibrary(loadingSessions: Bool = true) async throws -> [Take] {
        try await store.open(recoveringWith: encoders, loadingSessions: loadingSessions)
    }

    /// The full key of the configured storage's library folder (its path setting), e.g.
    /// `storage.directory.path`, for messages that say where else the library could be.
    /// - Thread: main actor. Never blocks.
    public var libraryPathKey: String? { configuration.librarySetting(catalog: catalog)?.key }

    /// The configured capture backend.
    /// - Throws: `.configuration` when `capture.backend` is not set (never a silent null fallback).
    /// - Thread: main actor. May block briefly while the plugin is made.
    public func makeCaptureBackend() throws -> any CaptureBackend {
        guard let name = configuration.capture.plugin, let plugin = catalog.capture.first(where: { $0.name == name }) else {
            throw TapedeckError(.configuration,
                "No capture backend is configured or found on this machine. Choose one with --set capture.backend=NAME (\(catalog.capture.map(\.name).joined(separator: ", ")); null makes a test tone, no sound card needed), or write a config with `tapedeck config init`. `tapedeck devices` lists what each backend sees.")
        }
        return try plugin.make(configuration.capture.settings, context(for: "capture", name))
    }

    /// The configured playback backend.
    /// - Throws: `.configuration` when `playback.backend` is not set.
    /// - Thread: main actor. May block briefly while the plugin is made.
    public func makePlaybackBackend() throws -> any PlaybackBackend {
        guard let name = configuration.playback.plugin, let plugin = catalog.playback.first(where: { $0.name == name }) else {
            throw TapedeckError(.configuration,
                "No playback backend is configured or found on this machine. Choose one with --set playback.backend=NAME (\(catalog.playback.map(\.name).joined(separator: ", "))), or write a config with `tapedeck config init`.")
        }
        return try plugin.make(configuration.playback.settings, context(for: "playback", name))
    }

    /// A recorder wired to the configured capture backend, encoder and store.
    /// - Thread: main actor. May block briefly while the plugin is made.
    /// - Parameter encoder: another of ``encoders`` (`record -o NAME.flac`); `nil` for the configured one.
    public func makeRecorder(encoder: (any AudioEncoder)? = nil) throws -> TakeRecorder {
        let capture = try makeCaptureBackend()
        let device = Credentials.hidden(in: configuration.capture.settings.values["device"]?.description ?? "")
        let source = CaptureSource(host: ConfigurationLoader.currentHostName(), backend: capture.name, device: device.isEmpty ? "default" : device)
        return TakeRecorder(capture: capture, encoder: encoder ?? self.encoder, store: store,
                            settings: configuration.recording, logger: logger,
                            analyzer: configuration.recording.measuresLoudness ? EBUR128Analyzer() : nil,
                            facts: TakeFacts(identity: configuration.identity, source: source), waveforms: makeWaveforms(),
                            sealer: try makeSealer())
    }

    /// An encoder by plugin name, with its configured settings (when it is the configured
    /// encoder) overridden by `overrides`, validated against the plugin's declarations.
    /// - Returns: the encoder and its effective settings as text, for reports.
    /// - Throws: `.invalidArgument` for an unknown encoder or a setting it does not accept.
    /// - Thread: main actor. Never blocks for long.
    /// - Parameters:
    ///   - name: the encoder plugin's name, e.g. `flac`.
    ///   - overrides: settings of the encoder by key, as text, over its configured ones.
    ///   - options: the command-line option that gave each override (`level` → `--level`),
    ///     named by the message when its value is refused.
    public func makeEncoder(named name: String, overrides: [String: String], options: [String: String] = [:]) throws -> (any AudioEncoder, [String: SettingValue]) {
        guard let plugin = catalog.encoders.first(where: { $0.name == name }) else {
            throw TapedeckError(.invalidArgument,
                "Unknown format \"\(name)\". Formats in this build: \(catalog.encoders.map(\.name).joined(separator: ", ")).")
        }
        var texts = Self.configuredTexts(of: name, in: configuration)
        if name == configuration.encoder.plugin {
            for (k, v) in configuration.encoder.settings.values { texts[k] = v.description }
        }
        for (k, v) in overrides {
            guard let declaration = plugin.settings.first(where: { $0.key == k }) else {
                let option = options[k].map { "\($0): the" } ?? "The"
                let settings = plugin.settings.isEmpty ? "It has no settings." : "Its settings: \(plugin.settings.map(\.key).joined(separator: ", "))."
                throw TapedeckError(.invalidArgument, "\(option) \(name) format has no \(k) setting. \(settings)")
            }
            if let option = options[k], case .failure(let problem) = declaration.parse(v) {
                throw TapedeckError(.invalidArgument, "\(option) \(v): \(problem.reason) for \(name).")
            }
            texts[k] = v
        }
        let settings: PluginSettings
        do {
            settings = try PluginSettings.resolving(plugin.settings, overrides: texts, section: "encoder.\(name)")
        } catch let e as TapedeckError {
            throw TapedeckError(.invalidArgument, e.message)
        }
        return (try plugin.make(settings, context(for: "encoder", name)), settings.values)
    }

    /// The devices a capture or playback backend sees (both roles merged by the caller), made with
    /// its configured settings when it is the configured backend, else its defaults.
    /// - Thread: main actor. Blocks while the audio system is asked.
    public func devices(ofBackend name: String) throws -> [AudioDevice] {
        var found: [AudioDevice] = []
        if let plugin = catalog.capture.first(where: { $0.name == name }) {
            let settings = name == configuration.capture.plugin ? configuration.capture.settings : try PluginSettings.resolving(plugin.settings)
            found += try plugin.make(settings, context(for: "capture", name)).devices()
        }
        if let plugin = catalog.playback.first(where: { $0.name == name }) {
            let settings = name == configuration.playback.plugin ? configuration.playback.settings : try PluginSettings.resolving(plugin.settings)
            found += try plugin.make(settings, context(for: "playback", name)).devices()
        }
        return found
    }

    /// The plugin context for the plugin `name` in config section `section`.
    func context(for section: String, _ name: String) -> PluginContext {
        Self.context(context, section, name)
    }

    private static func context(_ base: PluginContext, _ section: String, _ name: String) -> PluginContext {
        var c = base
        c.section = section + "." + name
        return c
    }

    /// An exporter wired to every decoder and the store. - Thread: main actor; never blocks.
    /// - Parameter partials: where its temporary files are registered (a stop signal removes them).
    public func makeExporter(partials: PartialFiles = PartialFiles()) -> TakeExporter {
        let exporter = TakeExporter(decoders: decoders, store: store, logger: logger, partials: partials, facts: TakeFacts(identity: configuration.identity),
                                    analyzer: EBUR128Analyzer(), resampler: SoxrConversion())
        // A machine that signs its takes signs what its exports were made from (docs/PROVENANCE.md).
        exporter.attester = makeAttester()
        return exporter
    }

    /// Measures the loudness of takes in the library (`tapedeck loudness`).
    /// - Thread: main actor; never blocks.
    public func makeLoudnessScanner(partials: PartialFiles = PartialFiles()) -> LoudnessScanner {
        LoudnessScanner(store: store, decoders: decoders, encoders: encoders, analyzer: EBUR128Analyzer(),
                        facts: TakeFacts(identity: configuration.identity), partials: partials)
    }

    /// An importer into the library, transcoding with the configured encoder where needed.
    /// - Thread: main actor; never blocks.
    /// - Parameter partials: where its temporary files are registered (a stop signal removes them).
    public func makeImporter(partials: PartialFiles = PartialFiles()) -> TakeImporter {
        TakeImporter(storage: store.storage, encoder: encoder, decoders: decoders, partials: partials, analyzer: EBUR128Analyzer(),
                     facts: TakeFacts(identity: configuration.identity), waveforms: makeWaveforms())
    }

    /// Opens a `.tapedeck` bundle in place, read as untrusted input, as the source of an import.
    /// - Thread: main actor. Blocks briefly while the manifest is read and validated.
    public func openBundle(at url: URL) throws -> any TakeStorage {
        try BundleStorage(rootURL: url, lockTimeoutKey: context(for: "storage", "bundle").key(BundleStorageSettings.lockTimeout))
    }

    /// A player wired to the configured playback backend and every decoder.
    /// - Thread: main actor. May block briefly while the plugin is made.
    public func makePlayer() throws -> TakePlayer {
        TakePlayer(playback: try makePlaybackBackend(), decoders: decoders, store: store,
                   periodFrames: configuration.playbackPeriodFrames, logger: logger)
    }
}

extension Studio {
    /// The name this machine's takes go under on a remote: the `machines:` section applied, else
    /// the host name. - Thread: main actor. Never blocks.
    public var machineName: String {
        configuration.machine ?? ConfigurationLoader.currentHostName()
    }

    /// The alerts of the config's `alerts:` rules, their outbox in `paths`' state folder; `nil`
    /// when there are none. Call `AlertCenter.start()` to send, `finish(within:)` at the end.
    /// - Thread: main actor. Never blocks.
    public func makeAlertCenter(environment: [String: String]) -> AlertCenter? {
        guard !configuration.alerts.isEmpty else { return nil }
        return AlertCenter(rules: configuration.alerts, outbox: AlertOutbox(folder: UserPaths(environment: environment).alertsFolder),
                           delivery: AlertDelivery(environment: environment, agent: "tapedeck/\(TapedeckVersion.string)"), logger: logger)
    }

    /// The configured remote (`sync.backend`). Shut it down when done.
    /// - Throws: `.configuration` when no remote is configured (naming the keys to set) or its
    ///   settings or credentials cannot work.
    /// - Thread: main actor. Blocks briefly while credentials are read.
    public func makeRemote() throws -> any TakeRemote {
        guard let name = configuration.sync.plugin, let plugin = catalog.remotes.first(where: { $0.name == name }) else {
            throw TapedeckError(.configuration,
                "No remote is configured. Add a sync: section to the config file (sync: {backend: s3, s3: {endpoint: …, bucket: …, path-style: true}}) or give --set sync.backend=\(catalog.remotes.map(\.name).joined(separator: "|")) with its settings. `tapedeck config example` shows every sync key.")
        }
        return try plugin.make(configuration.sync.settings, context(for: "sync", name))
    }

    /// A pusher from the library to `remote`. - Thread: main actor; never blocks.
    public func makePusher(remote: any TakeRemote) -> TakePusher {
        TakePusher(store: store, remote: remote, machine: machineName, logger: logger)
    }

    /// The age after which verified takes are deleted locally (`sync.keep-local`); `nil` keeps them.
    /// - Throws: `.configuration` for a value that is not an age. - Thread: main actor; never blocks.
    public func keepLocalSeconds() throws -> Double? {
        try SyncSettings(configuration.syncSettings).keepLocalSeconds()
    }

    /// A reader of every machine's takes on `remote`, pulling through an importer into the library.
    /// - Thread: main actor; never blocks.
    public func makeFleetReader(remote: any TakeRemote, partials: PartialFiles) -> FleetReader {
        let reader = FleetReader(remote: remote, store: store, importer: makeImporter(partials: partials), partials: partials, logger: logger,
                                 audioExtensions: Set(encoders.map(\.fileExtension)).union(decoders.flatMap(\.encodings)), manifestCache: paths.manifestCacheFolder)
        reader.chainCheck = makeChainCheck()
        return reader
    }
}

extension Studio {
    /// The settings of the encoder `name` that the configuration sets (a file, the environment,
    /// `--set`), by key as text: an encoder other than `encoder.name` is set up as configured too.
    static func configuredTexts(of name: String, in configuration: TapedeckConfiguration) -> [String: String] {
        let prefix = "encoder.\(name)."
        var texts: [String: String] = [:]
        for (key, resolved) in configuration.settings where key.hasPrefix(prefix) {
            texts[String(key.dropFirst(prefix.count))] = resolved.value.description
        }
        return texts
    }
}
