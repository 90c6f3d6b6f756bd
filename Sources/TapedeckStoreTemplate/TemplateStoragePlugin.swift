public import TapedeckCore
import Foundation

/// The store's settings (`storage.template.*`). A plain value; safe on any thread.
public struct TemplateStorageSettings: SettingsGroup, Hashable {
    public static let path = Setting<String>.path("path",
        help: "The library folder; empty means $XDG_DATA_HOME/tapedeck (~/.local/share/tapedeck).")
    public static let lockTimeout = Setting<Double>("lock-timeout", range: 0...600, default: 10,
        help: "Seconds to wait for another tapedeck process that is changing the library.")
    public static let declarations = [path.declaration, lockTimeout.declaration]

    /// The library folder; empty for the default one.
    public var path: String
    public var lockTimeout: Double

    public init(_ settings: PluginSettings) {
        path = settings[Self.path]
        lockTimeout = settings[Self.lockTimeout]
    }
}

/// The store's plugin descriptor: list it in a `PluginCatalog` (Tapedeck's `builtIn`, or
/// `.builtIn.adding(storage: [...])` in a program of your own).
public enum TemplateStoragePlugin {
    /// `storage.backend: template`. - Thread: `make` runs on any thread; it blocks while the
    /// library opens.
    public static let storage = StoragePlugin(
        name: "template",
        summary: "A library folder with one JSON catalog and the audio files beside it.",
        settings: TemplateStorageSettings.self,
        make: { settings, context in
            try TemplateStorage(rootURL: context.libraryURL(settings.path), lockTimeout: settings.lockTimeout)
        })
}
