public import TapedeckCore
import Foundation

/// Bundle storage's settings (`storage.bundle.*`). A plain value; safe on any thread.
public struct BundleStorageSettings: SettingsGroup, Hashable {
    public static let path = Setting<String>.path("path",
        help: "The library folder holding NAME.tapedeck bundles, or one bundle to open in place; empty means $XDG_DATA_HOME/tapedeck.")
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

/// The bundle storage plugin descriptor.
public enum BundleStoragePlugin {
    /// `storage.backend: bundle`. - Thread: `make` runs on any thread; it blocks while the
    /// library opens.
    public static let storage = StoragePlugin(
        name: "bundle",
        summary: "A library of session bundles: one self-contained NAME.tapedeck folder (manifest.json + audio) per session; copy a bundle to another machine and open it there.",
        settings: BundleStorageSettings.self,
        make: { settings, context in
            try BundleStorage(rootURL: context.libraryURL(settings.path), lockTimeout: settings.lockTimeout,
                          lockTimeoutKey: context.key(BundleStorageSettings.lockTimeout))
        })
}
