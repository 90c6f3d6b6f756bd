public import TapedeckCore

/// The config sections the host itself owns, with the settings of each (plugin sub-sections
/// come from the plugins' own declarations).
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
        Section(name: "capture", selector: "backend", role: .capture, settings: [
            SettingDeclaration("period-frames", .int(16...65_536), default: "8192",
                               help: "Frames per device read: larger costs less CPU, smaller stops and meters more promptly."),
            SettingDeclaration("buffer-seconds", .double(0.1...60), default: "2",
                               help: "Seconds of audio buffered between the device thread and the writer before an overrun."),
        ]),
        Section(name: "playback", selector: "backend", role: .playback, settings: [
            SettingDeclaration("period-frames", .int(16...65_536), default: "1024", help: "Frames per device write."),
        ]),
        Section(name: "format", selector: nil, role: nil, settings: [
            SettingDeclaration("sample-rate", .int(AudioFormat.sampleRateRange), default: "48000", help: "Frames per second."),
            SettingDeclaration("channels", .int(AudioFormat.channelRange), default: "2", help: "Channels to record."),
            SettingDeclaration("sample-format", .choice(SampleFormat.allCases.map(\.rawValue)), default: "s16",
                               help: "Sample format: s16, s24, s32 (integer) or f32 (float)."),
        ]),
        Section(name: "encoder", selector: "name", role: .encoder, settings: []),
        Section(name: "storage", selector: "backend", role: .storage, settings: [
            SettingDeclaration("checkpoint-seconds", .double(0.05...60), default: "1",
                               help: "How often a recording's header is updated and its file synced."),
            SettingDeclaration("warn-free-minutes", .double(0...1440), default: "10",
                               help: "Warn before and during a recording when the library's disk has room for fewer minutes than this at the recording's format (uncompressed); 0: never."),
        ]),
    ]

    /// Built-in plugin choices. Capture and playback have none: recording or playing without a
    /// configured backend is an error, never a silent fallback to the null backend.
    public static let defaultSelections: [String: String] = [
        "encoder": "wav",
        "storage": "directory",
    ]
}
