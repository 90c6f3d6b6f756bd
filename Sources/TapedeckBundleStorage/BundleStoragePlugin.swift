public import TapedeckCore
import Foundation

/// The bundle storage plugin descriptor.
public enum BundleStoragePlugin {
    /// `storage.backend: bundle`.
    public static let storage = StoragePlugin(
        name: "bundle",
        summary: "A library of session bundles: one self-contained NAME.tapedeck folder (manifest.json + audio) per session; copy a bundle to another machine and open it there.",
        settings: [
            SettingDeclaration("path", .path, default: "",
                               help: "The library folder holding NAME.tapedeck bundles, or one bundle to open in place; empty means $XDG_DATA_HOME/tapedeck."),
            SettingDeclaration("lock-timeout", .double(0...600), default: "10",
                               help: "Seconds to wait for another tapedeck process that is changing the library."),
        ],
        make: { settings, context in
            let path = settings.string("path") ?? ""
            let url = path.isEmpty ? context.defaultLibraryURL : URL(fileURLWithPath: path)
            return try BundleStorage(rootURL: url, lockTimeout: settings.double("lock-timeout") ?? 10)
        })
}
