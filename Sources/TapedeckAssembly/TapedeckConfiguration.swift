public import TapedeckCore
public import TapedeckAlerts
public import TapedeckApp

/// Where an effective setting came from. One wording, used by `config show` and by every
/// message about a value.
public enum ConfigSource: Sendable, Hashable, CustomStringConvertible {
    case flag
    case environment(variable: String)
    case file(path: String, line: Int?)
    /// A `machines.NAME:` section of the file.
    case machine(name: String, path: String, line: Int?)
    case builtIn
    /// No layer sets it: Tapedeck chose it on this machine (a capture or playback backend when
    /// none is configured), for `reason`.
    case detected(reason: String)

    /// `--set`, `environment variable X`, `PATH:LINE`, `PATH:LINE (machines.NAME)`,
    /// `built-in default` or `detected: REASON`.
    public var description: String {
        switch self {
        case .flag: "--set"
        case .environment(let v): "environment variable \(v)"
        case .file(let path, let line): line.map { "\(path):\($0)" } ?? path
        case .machine(let name, let path, let line): (line.map { "\(path):\($0)" } ?? path) + " (machines.\(name))"
        case .builtIn: "built-in default"
        case .detected(let reason): "detected: \(reason)"
        }
    }

    /// The layer, one word: `flag`, `environment`, `machine`, `file`, `default` or `detected`.
    public var layer: String {
        switch self {
        case .flag: "flag"
        case .environment: "environment"
        case .machine: "machine"
        case .file: "file"
        case .builtIn: "default"
        case .detected: "detected"
        }
    }
}

/// A command-line option that sets a setting of whichever plugin fills a role, e.g. `-D hw:1`
/// for the selected capture backend's `device`. It is a flag (the top layer); a plugin that has
/// no such setting makes it an error naming the option. A plain value.
public struct PluginOverride: Sendable, Hashable {
    /// The role's config section: `capture` or `playback`.
    public var section: String
    /// The setting's key inside the plugin's section, e.g. `device`.
    public var key: String
    public var value: String
    /// The option as the user typed it, for messages, e.g. `-D/--device`.
    public var option: String

    public init(section: String, key: String, value: String, option: String) {
        self.section = section
        self.key = key
        self.value = value
        self.option = option
    }
}

/// One effective setting and its source.
public struct ResolvedSetting: Sendable, Hashable {
    public var value: SettingValue
    public var source: ConfigSource
}

/// Which plugin fills a role, and its validated settings.
public struct RoleSelection: Sendable, Hashable {
    /// The plugin's config name; `nil` when the role is not configured.
    public var plugin: String?
    public var settings: PluginSettings
}

/// The resolved configuration: flags over environment over file over built-in defaults,
/// validated against what the host and each plugin declare. A plain value.
public struct TapedeckConfiguration: Sendable, Hashable {
    /// The config file used, if any.
    public var file: String?
    /// The `machines:` section applied, if any.
    public var machine: String?
    public var capture: RoleSelection
    public var playback: RoleSelection
    public var encoder: RoleSelection
    public var storage: RoleSelection
    /// The remote takes are pushed to (`sync.backend`); no plugin when none is configured.
    public var sync: RoleSelection
    /// `sync.*` itself (`keep-local`).
    public var syncSettings: PluginSettings
    /// How recordings are made (`format.*`, `capture.*`, `storage.checkpoint-seconds`, …).
    public var recording: RecordingSettings
    /// What every take's file says of who made it (`metadata.*`).
    public var identity: FileIdentity
    /// `playback.period-frames`.
    public var playbackPeriodFrames: Int
    /// Every effective key (dotted path) with its value and source.
    public var settings: [String: ResolvedSetting]
    /// The `schedule:` section: when `record --schedule` records; `nil` without one.
    public var schedule: RecordingSchedule?
    /// `retention.*`: which takes Tapedeck deletes by itself (`RetentionSettings`).
    public var retentionSettings = PluginSettings()
    /// `provenance.*`: whether takes are signed as they are recorded (`ProvenanceSettings`).
    public var provenanceSettings = PluginSettings()
    /// The `alerts:` rules of the file (its `machines:` section's, when that has its own).
    public var alerts: [AlertRule] = []
    /// The `programs:` of the file (its `machines:` section's, when that has its own): the
    /// programmes every `record` into the library also keeps as takes of their own.
    public var programs: [ProgramRule] = []

    /// Whether `section`'s backend (`capture`, `playback`) was detected on this machine rather
    /// than configured. - Thread: any. Never blocks.
    public func isDetected(_ section: String) -> Bool {
        if case .detected = settings[section + ".backend"]?.source { return true }
        return false
    }

    /// The recording format (`format.*`).
    public var format: AudioFormat { recording.format }

    /// The library folder the configured store opens: its path setting, or the default library
    /// when that is empty; `nil` for a store with no path setting.
    /// - Thread: any. Never blocks.
    public func libraryPath(catalog: PluginCatalog, paths: UserPaths) -> String? {
        guard let setting = librarySetting(catalog: catalog) else { return nil }
        let path = storage.settings.values[setting.declaration.key]?.description ?? ""
        return path.isEmpty ? paths.defaultLibrary.path : path
    }

    /// The configured store's path setting and its full key (`storage.directory.path`); `nil`
    /// for a store with none. - Thread: any. Never blocks.
    public func librarySetting(catalog: PluginCatalog) -> (key: String, declaration: SettingDeclaration)? {
        guard let name = storage.plugin,
              let setting = catalog.storage.first(where: { $0.name == name })?.settings.first(where: { $0.type == .path }) else { return nil }
        return ("storage.\(name).\(setting.key)", setting)
    }
}
