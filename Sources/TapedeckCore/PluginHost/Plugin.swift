public import Foundation
public import Logging

/// What every plugin factory is given besides its own settings.
public struct PluginContext: Sendable {
    /// Where the plugin logs. Never a global logger.
    public var logger: Logger
    /// The library folder to use when the storage settings name none
    /// (`$XDG_DATA_HOME/tapedeck`, else `~/.local/share/tapedeck`).
    public var defaultLibraryURL: URL
    /// The plugin's config section, e.g. `capture.alsa` or `storage.bundle`: messages name a
    /// setting as ``key(_:)`` gives it, never by a key written out. Empty where the plugin was
    /// made outside a configuration (a test, a library user); ``key(_:)`` then gives the bare key.
    public var section: String
    /// Sample-rate conversion, for a plugin whose source has a rate of its own (a network stream
    /// recorded at the rate the user chose). `nil` where the composition root gives none.
    public var resampler: (any SampleRateConversion)?

    public init(logger: Logger, defaultLibraryURL: URL, section: String = "") {
        self.logger = logger
        self.defaultLibraryURL = defaultLibraryURL
        self.section = section
    }

    /// The library folder a store's path setting names: ``defaultLibraryURL`` when it is empty.
    /// - Thread: any. Never blocks.
    public func libraryURL(_ path: String) -> URL {
        path.isEmpty ? defaultLibraryURL : URL(fileURLWithPath: path)
    }

    /// The full key of one of the plugin's settings, e.g. `capture.alsa.periods`.
    /// - Thread: any. Never blocks.
    public func key<Value>(_ setting: Setting<Value>) -> String {
        section.isEmpty ? setting.key : section + "." + setting.key
    }
}

/// The role a plugin fills in the graph.
public enum PluginRole: String, Sendable, Hashable, Codable, CaseIterable {
    case capture, playback, encoder, decoder, storage
    /// A place finished takes are copied to (object storage, a folder on a NAS).
    case remote
}

/// A plugin as compiled into Tapedeck: its config name, summary, declared settings, and a factory.
///
/// Backend modules expose descriptors as static values (e.g. `NullPlugin.capture`); the
/// composition root lists them in its catalog. The host validates settings against
/// ``settings`` before calling ``make``, so factories read validated values only, typed, through
/// the plugin's ``SettingsGroup``.
public struct PluginDescriptor<Made: Sendable>: Sendable {
    /// The name used in config files, e.g. `null`.
    public var name: String
    /// One line for `tapedeck backends`.
    public var summary: String
    /// The settings the plugin accepts in its own config section (its group's declarations).
    public let settings: [SettingDeclaration]
    /// Builds the plugin from validated settings.
    /// - Thread: any; called once while the graph is assembled. May block briefly.
    public let make: @Sendable (PluginSettings, PluginContext) throws -> Made
    /// Whether listing its devices means waiting on the network (RTP's SAP discovery): `tapedeck
    /// devices` lists it only when asked by name (`--backend NAME`). False unless set.
    public var listsOnlyWhenNamed = false

    /// A descriptor whose factory is handed its settings read into `Group`, which declares them.
    public init<Group: SettingsGroup>(name: String, summary: String, settings group: Group.Type,
                                      make: @escaping @Sendable (Group, PluginContext) throws -> Made) {
        self.name = name
        self.summary = summary
        self.settings = Group.declarations
        self.make = { settings, context in try make(Group(settings), context) }
    }

    /// A descriptor whose factory reads `declarations` itself (a callback backend declaring its
    /// settings once for both roles).
    init(name: String, summary: String, declarations: [SettingDeclaration],
         make: @escaping @Sendable (PluginSettings, PluginContext) throws -> Made) {
        self.name = name
        self.summary = summary
        self.settings = declarations
        self.make = make
    }

    /// A descriptor for a plugin with no settings.
    public init(name: String, summary: String, make: @escaping @Sendable (PluginContext) throws -> Made) {
        self.init(name: name, summary: summary, settings: NoSettings.self) { _, context in try make(context) }
    }
}

public typealias CapturePlugin = PluginDescriptor<any CaptureBackend>
public typealias PlaybackPlugin = PluginDescriptor<any PlaybackBackend>
public typealias EncoderPlugin = PluginDescriptor<any AudioEncoder>
public typealias DecoderPlugin = PluginDescriptor<any AudioDecoder>
public typealias StoragePlugin = PluginDescriptor<any TakeStorage>
public typealias RemotePlugin = PluginDescriptor<any TakeRemote>
