public import TapedeckCore

/// The settings of the `sync:` section itself (its plugin's are in `sync.NAME.*`). A plain
/// value; safe on any thread.
public struct SyncSettings: SettingsGroup, Hashable {
    public static let keepLocal = Setting<String>("keep-local",
        help: "Delete local takes whose upload is verified once they are older than this (30d, 12h, 90m); empty keeps every take.")
    public static let declarations = [keepLocal.declaration]

    public var keepLocal: String

    public init(_ settings: PluginSettings) {
        keepLocal = settings[Self.keepLocal]
    }

    /// `keepLocal` in seconds; `nil` when it is empty (keep every take).
    /// - Throws: `.configuration` naming `sync.keep-local` and the forms accepted.
    /// - Thread: any. Never blocks.
    public func keepLocalSeconds() throws -> Double? {
        let text = keepLocal.trimmingSpaces.lowercased()
        guard !text.isEmpty else { return nil }
        let problem = TapedeckError(.configuration, "sync.keep-local: \"\(keepLocal)\" is not an age. Use days (30d), hours (12h) or minutes (90m), more than zero; leave it empty to keep every take.")
        if text.hasSuffix("d") {
            guard let days = Double(text.dropLast()), days > 0, days <= 36_500 else { throw problem }
            return days * 86_400
        }
        guard let seconds = try? DurationText.seconds(text, flag: "sync.keep-local") else { throw problem }
        return seconds
    }
}
