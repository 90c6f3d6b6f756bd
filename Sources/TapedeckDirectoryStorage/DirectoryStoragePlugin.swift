public import TapedeckCore
import Foundation

/// The directory storage plugin descriptor.
public enum DirectoryStoragePlugin {
    /// `storage.backend: directory`.
    public static let storage = StoragePlugin(
        name: "directory",
        summary: "A library folder with catalog.sqlite and one folder of audio files per session.",
        settings: [
            SettingDeclaration("path", .path, default: "",
                               help: "The library folder; empty means $XDG_DATA_HOME/tapedeck (~/.local/share/tapedeck)."),
            SettingDeclaration("busy-timeout", .double(0...600), default: "10",
                               help: "Seconds to wait for another tapedeck process that holds the catalog."),
        ],
        make: { settings, context in
            let path = settings.string("path") ?? ""
            let url = path.isEmpty ? context.defaultLibraryURL : URL(fileURLWithPath: path)
            return try DirectoryStorage(rootURL: url, busyTimeout: settings.double("busy-timeout") ?? 10)
        })
}
