import GRDB
public import TapedeckCore
import Foundation

/// Directory storage's settings (`storage.directory.*`). A plain value; safe on any thread.
public struct DirectoryStorageSettings: SettingsGroup, Hashable {
    public static let path = Setting<String>.path("path",
        help: "The library folder; empty means $XDG_DATA_HOME/tapedeck (~/.local/share/tapedeck).")
    public static let busyTimeout = Setting<Double>("busy-timeout", range: 0...600, default: 10,
        help: "Seconds to wait for another tapedeck process that holds the catalog.")
    public static let declarations = [path.declaration, busyTimeout.declaration]

    /// The library folder; empty for the default one.
    public var path: String
    public var busyTimeout: Double

    public init(_ settings: PluginSettings) {
        path = settings[Self.path]
        busyTimeout = settings[Self.busyTimeout]
    }
}

/// The directory storage plugin descriptor.
public enum DirectoryStoragePlugin {
    /// The linked SQLite, e.g. `SQLite 3.40.1`. - Thread: any; never blocks.
    public static var library: String {
        let n = Database.sqliteLibVersionNumber
        return "SQLite \(n / 1_000_000).\(n / 1000 % 1000).\(n % 1000)"
    }

    /// `storage.backend: directory`. - Thread: `make` runs on any thread; it blocks while the
    /// library opens.
    public static let storage = StoragePlugin(
        name: "directory",
        summary: "A library folder with catalog.sqlite and one folder of audio files per session.",
        settings: DirectoryStorageSettings.self,
        make: { settings, context in
            try DirectoryStorage(rootURL: context.libraryURL(settings.path), busyTimeout: settings.busyTimeout)
        })
}
