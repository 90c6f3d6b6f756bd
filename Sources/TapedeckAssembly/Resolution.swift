import Foundation
import TapedeckCore

/// One pass over the configuration's layers: every host section and selected plugin read
/// against its declarations, each value's source kept, and every bad value collected in
/// ``problems`` rather than stopping at the first (a bad value is replaced by its default so the
/// pass goes on). Used once by ``ConfigurationLoader``; a plain value, safe on any thread.
struct Resolution {
    let catalog: PluginCatalog
    var layers: ConfigLayers
    /// Options that set a setting of whichever plugin is selected (`-D`).
    let overrides: [PluginOverride]
    /// Chooses a backend for a role no layer configures (``BackendDetection``); `nil` leaves it unset.
    let detect: (@Sendable (PluginRole) -> (plugin: String, reason: String)?)?
    /// Every effective key with its value and source.
    private(set) var settings: [String: ResolvedSetting] = [:]
    /// One full sentence per bad value: source, key, what is accepted.
    private(set) var problems: [String] = []

    init(catalog: PluginCatalog, layers: ConfigLayers, overrides: [PluginOverride] = [],
         detect: (@Sendable (PluginRole) -> (plugin: String, reason: String)?)? = nil) {
        self.catalog = catalog
        self.layers = layers
        self.overrides = overrides
        self.detect = detect
    }

    /// Resolves everything. - Thread: any. Never blocks.
    mutating func run() -> TapedeckConfiguration {
        var host: [String: PluginSettings] = [:]
        var roles: [String: RoleSelection] = [:]
        for section in HostSettings.sections {
            host[section.name] = read(section.settings, section: section.name)
            if let role = section.role, let selector = section.selector {
                roles[section.name] = select(role, section: section.name, selector: selector)
                // A plugin section that is not selected is still checked: a typo there would
                // otherwise surface only on the day that plugin is chosen. An encoder's is kept
                // too: `export --format flac` uses encoder.flac.* whatever encoder.name says.
                for entry in catalog.entries(for: role) where entry.name != roles[section.name]?.plugin {
                    let prefix = section.name + "." + entry.name
                    if layers.mentions(section: prefix) { _ = read(entry.settings, section: prefix, keeping: role == .encoder) }
                }
            }
        }
        let format = FormatSettings(host["format"] ?? PluginSettings()).format
        var recording = RecordingSettings(format: format, capture: host["capture"] ?? PluginSettings(),
                                          storage: host["storage"] ?? PluginSettings())
        recording.formatChoice = formatChoice()
        checkBufferMemory(recording)
        let none = RoleSelection(plugin: nil, settings: PluginSettings())
        var configuration = TapedeckConfiguration(
            file: layers.file?.name, machine: layers.machine,
            capture: roles["capture"] ?? none, playback: roles["playback"] ?? none,
            encoder: roles["encoder"] ?? none, storage: roles["storage"] ?? none,
            sync: roles["sync"] ?? none, syncSettings: host["sync"] ?? PluginSettings(),
            recording: recording,
            identity: MetadataSettings(host["metadata"] ?? PluginSettings()).identity,
            playbackPeriodFrames: (host["playback"] ?? PluginSettings())[PlaybackEngine.periodFrames],
            settings: settings)
        configuration.retentionSettings = host["retention"] ?? PluginSettings()
        configuration.provenanceSettings = host["provenance"] ?? PluginSettings()
        return configuration
    }

    /// The network capture backend a device URL names (`http://` and `https://`: `stream`;
    /// `rtp://`: `rtp`), or nil.
    static func networkBackend(for device: String) -> String? {
        let lower = device.lowercased()
        if lower.hasPrefix("http://") || lower.hasPrefix("https://") { return "stream" }
        if lower.hasPrefix("rtp://") { return "rtp" }
        return nil
    }

    /// The parts of the format some layer set (a file, a machine section, a flag), not defaults.
    private func formatChoice() -> FormatChoice {
        var choice: FormatChoice = []
        for (setting, part) in [(FormatSettings.sampleRate.key, FormatChoice.sampleRate), (FormatSettings.channels.key, .channels),
                                (FormatSettings.sampleFormat.key, .sampleFormat)] {
            if let source = settings["format." + setting]?.source, source != .builtIn { choice.insert(part) }
        }
        return choice
    }

    /// Reads `declarations` under `section`; a bad value is a problem and reads as its default.
    private mutating func read(_ declarations: [SettingDeclaration], section: String, keeping: Bool = true) -> PluginSettings {
        var values: [String: SettingValue] = [:]
        for d in declarations {
            let key = section + "." + d.key
            let (text, source) = layers.value(of: key, fallback: d.defaultValue, isPath: d.type == .path)
            switch d.parse(text) {
            case .success(let v):
                values[d.key] = v
                if keeping { settings[key] = ResolvedSetting(value: v, source: source) }
            case .failure(let p):
                problems.append("\(Self.origin(source, key, text)): \(p.reason).")
                if case .success(let v) = d.parse(d.defaultValue) { values[d.key] = v }
            }
        }
        return PluginSettings(values)
    }

    /// The plugin chosen for `role` (`section.selector`) and its settings.
    private mutating func select(_ role: PluginRole, section: String, selector: String) -> RoleSelection {
        let key = section + "." + selector
        var (chosen, source) = layers.value(of: key, fallback: HostSettings.defaultSelections[section] ?? "")
        let mine = overrides.filter { $0.section == section }
        // `-D http://…` names a network stream whatever backend is configured: the URL is the choice.
        if role == .capture, let url = mine.last(where: { $0.key == "device" })?.value, let network = Self.networkBackend(for: url),
           catalog.entries(for: role).contains(where: { $0.name == network }) {
            (chosen, source) = (network, .flag)
        }
        if chosen.isEmpty, let found = detect?(role) {
            (chosen, source) = (found.plugin, .detected(reason: found.reason))
        }
        let none = RoleSelection(plugin: nil, settings: PluginSettings())
        let entries = catalog.entries(for: role)
        guard !chosen.isEmpty else {
            for o in mine {
                problems.append("\(o.option) \(o.value): no \(section) backend is configured or found on this machine. Choose one with --set \(key)=NAME (\(entries.map(\.name).sorted().joined(separator: ", "))).")
            }
            return none
        }
        let known = entries.map(\.name).sorted()
        guard let entry = entries.first(where: { $0.name == chosen }) else {
            if let trait = PluginCatalog.trait(bringing: chosen, as: role) {
                let needs = PluginCatalog.optionalBackendPackages[chosen].map { ", which needs \($0)" } ?? ""
                let kind = role == .remote ? "remote" : "backend"
                let instead = known.isEmpty ? "remove \(key)" : "choose one of: \(known.joined(separator: ", "))"
                problems.append("\(Self.origin(source, key, chosen)): this build of Tapedeck has no \(chosen) \(kind): it was built without the \(trait) trait. Rebuild with the default traits (`swift build`\(needs)), or \(instead).")
            } else {
                problems.append("\(Self.origin(source, key, chosen)): unknown \(role == .encoder ? "encoder" : "backend") \"\(chosen)\"\(Suggestion.phrase(chosen, known)). Known: \(known.joined(separator: ", ")).")
            }
            return none
        }
        settings[key] = ResolvedSetting(value: .string(chosen), source: source)
        for o in mine {
            if entry.settings.contains(where: { $0.key == o.key }) {
                layers.flags[section + "." + chosen + "." + o.key] = o.value
            } else {
                let able = entries.filter { $0.settings.contains { $0.key == o.key } }.map(\.name).sorted()
                problems.append("\(o.option) \(o.value): the \(chosen) \(section) backend has no \(o.key) setting. Choose a backend that has (--set \(key)=NAME: \(able.joined(separator: ", "))).")
            }
        }
        return RoleSelection(plugin: chosen, settings: read(entry.settings, section: section + "." + chosen))
    }

    /// Where a value came from and its key, as a message begins: `FILE:LINE: KEY`,
    /// `environment variable X: KEY`, or `--set KEY=VALUE` as it was typed.
    static func origin(_ source: ConfigSource, _ key: String, _ text: String) -> String {
        source == .flag ? "--set \(key)=\(SettingProblem.shown(text))" : "\(source): \(key)"
    }

    /// The hand-off buffer is allocated up front: keep it within reason for small machines.
    private mutating func checkBufferMemory(_ recording: RecordingSettings) {
        let format = recording.format
        let bytes = recording.bufferSeconds * Double(format.bytesPerSecond)
        guard bytes > Double(ConfigurationLoader.maxBufferBytes) else { return }
        let key = "capture." + RecordingSettings.bufferSeconds.key
        let most = Double(ConfigurationLoader.maxBufferBytes) / Double(format.bytesPerSecond)
        let source = settings[key]?.source ?? .builtIn
        problems.append("\(Self.origin(source, key, String(recording.bufferSeconds))): \(recording.bufferSeconds) s at \(format) needs \(Int(bytes / 1_048_576)) MiB of memory. Use at most \(String(format: "%.1f", most)) s for this format.")
    }
}
