public import Foundation
public import Logging

/// What every plugin factory is given besides its own settings.
public struct PluginContext: Sendable {
    /// Where the plugin logs. Never a global logger.
    public var logger: Logger
    /// The library folder to use when the storage settings name none
    /// (`$XDG_DATA_HOME/tapedeck`, else `~/.local/share/tapedeck`).
    public var defaultLibraryURL: URL

    public init(logger: Logger, defaultLibraryURL: URL) {
        self.logger = logger
        self.defaultLibraryURL = defaultLibraryURL
    }
}

/// The role a plugin fills in the graph.
public enum PluginRole: String, Sendable, Hashable, Codable, CaseIterable {
    case capture, playback, encoder, decoder, storage
}

/// A plugin as compiled into Tapedeck: its config name, summary, declared settings, and a factory.
///
/// Backend modules expose descriptors as static values (e.g. `NullPlugin.capture`); the
/// composition root lists them in its catalog. The host validates settings against
/// ``settings`` before calling ``make``, so factories read validated values only.
public struct PluginDescriptor<Made: Sendable>: Sendable {
    /// The name used in config files, e.g. `null`.
    public var name: String
    /// One line for `tapedeck backends`.
    public var summary: String
    /// The settings the plugin accepts in its own config section.
    public var settings: [SettingDeclaration]
    /// Builds the plugin from validated settings.
    /// - Thread: any; called once while the graph is assembled. May block briefly.
    public var make: @Sendable (PluginSettings, PluginContext) throws -> Made

    public init(name: String, summary: String, settings: [SettingDeclaration],
                make: @escaping @Sendable (PluginSettings, PluginContext) throws -> Made) {
        self.name = name
        self.summary = summary
        self.settings = settings
        self.make = make
    }
}

public typealias CapturePlugin = PluginDescriptor<any CaptureBackend>
public typealias PlaybackPlugin = PluginDescriptor<any PlaybackBackend>
public typealias EncoderPlugin = PluginDescriptor<any AudioEncoder>
public typealias DecoderPlugin = PluginDescriptor<any AudioDecoder>
public typealias StoragePlugin = PluginDescriptor<any TakeStorage>
