public import TapedeckCore
import TapedeckApp

/// The config sections the host itself owns, with the settings of each. Plugin sub-sections
/// come from the plugins' own declarations; the host's settings are declared beside the code
/// that reads them (`RecordingSettings`, `FormatSettings`, `PlaybackEngine`).
public enum HostSettings {
    /// A config section: its name, the key naming the plugin that fills it, and its own settings.
    public struct Section: Sendable {
        public var name: String
        /// `backend` or `name`; `nil` for sections with no plugin (`format`).
        public var selector: String?
        public var role: PluginRole?
        public var settings: [SettingDeclaration]
    }

    public static let sections: [Section] = [
        Section(name: "capture", selector: "backend", role: .capture, settings: RecordingSettings.captureDeclarations),
        Section(name: "playback", selector: "backend", role: .playback, settings: [PlaybackEngine.periodFrames.declaration]),
        Section(name: "format", selector: nil, role: nil, settings: FormatSettings.declarations),
        Section(name: "encoder", selector: "name", role: .encoder, settings: []),
        Section(name: "storage", selector: "backend", role: .storage, settings: RecordingSettings.storageDeclarations),
        Section(name: "metadata", selector: nil, role: nil, settings: MetadataSettings.declarations),
        Section(name: "sync", selector: "backend", role: .remote, settings: SyncSettings.declarations),
        Section(name: "retention", selector: nil, role: nil, settings: RetentionSettings.declarations),
        Section(name: "provenance", selector: nil, role: nil, settings: ProvenanceSettings.declarations),
    ]

    /// Built-in plugin choices. Capture and playback have none: recording or playing without a
    /// configured backend is an error, never a silent fallback to the null backend.
    public static let defaultSelections: [String: String] = [
        "encoder": "wav",
        "storage": "directory",
    ]
}
