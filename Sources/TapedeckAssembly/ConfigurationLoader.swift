public import Foundation
import TapedeckCore
import Configuration
#if canImport(Glibc)
import Glibc
#endif

/// Finds, reads, layers and validates the configuration.
///
/// Precedence: flags (`--set KEY=VALUE`) > environment (`TAPEDECK_CAPTURE_BACKEND=null`) > the
/// file's `machines:` section for this machine (chosen by `--machine NAME`, else by host name) >
/// the file's top level > built-in defaults. Layers are read through swift-configuration's `ConfigReader`;
/// every value, whatever its layer, is checked by the declaration of the host or plugin that owns
/// it, and every error names where the bad value came from.
public struct ConfigurationLoader: Sendable {
    /// Environment variables that are not settings but are read by Tapedeck.
    public static let reservedVariables: Set<String> = ["TAPEDECK_CONFIG", "TAPEDECK_LOG_LEVEL"]

    public var catalog: PluginCatalog
    public var environment: [String: String]
    /// This machine's host name, which selects a `machines:` section when `--machine` is not given.
    public var hostName: String

    public init(catalog: PluginCatalog, environment: [String: String], hostName: String = ConfigurationLoader.currentHostName()) {
        self.catalog = catalog
        self.environment = environment
        self.hostName = hostName
    }

    /// The host name (`gethostname`), without a domain. - Thread: any. Never blocks.
    public static func currentHostName() -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return "" }
        let name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return String(name.split(separator: ".").first ?? "")
    }

    /// The config file to use: `explicitPath` (`--config`), `$TAPEDECK_CONFIG`,
    /// `$XDG_CONFIG_HOME/tapedeck/config.yaml` (`~/.config/…`), `/etc/tapedeck/config.yaml`; `nil` if none exists.
    /// - Thread: any. Blocks briefly on file-system checks.
    public func locate(explicitPath: String?) -> URL? {
        if let explicitPath { return URL(fileURLWithPath: explicitPath) }
        if let env = environment["TAPEDECK_CONFIG"], !env.isEmpty { return URL(fileURLWithPath: env) }
        let home = environment["HOME"] ?? NSHomeDirectory()
        let xdg = environment["XDG_CONFIG_HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? home + "/.config"
        for candidate in [xdg + "/tapedeck/config.yaml", "/etc/tapedeck/config.yaml"]
        where FileManager.default.isReadableFile(atPath: candidate) {
            return URL(fileURLWithPath: candidate)
        }
        return nil
    }

    /// Locates, reads and resolves the configuration.
    /// - Thread: any. Blocks on disk I/O.
    public func load(explicitPath: String?, flags: [String: String], machine: String? = nil) throws -> TapedeckConfiguration {
        let file = try locate(explicitPath: explicitPath).map(ConfigFile.load)
        return try resolve(file: file, flags: flags, machine: machine)
    }

    /// The `machines:` section that applies: `explicit` (which must exist), else the one named
    /// like this host, else none.
    /// - Thread: any. Never blocks.
    public func machineSection(in file: ConfigFile?, explicit: String?) throws -> String? {
        let known = (file?.machines.keys).map { Array($0).sorted() } ?? []
        if let explicit {
            guard let file, file.machines[explicit] != nil else {
                let where_ = file.map { "\($0.name) has" } ?? "There is no config file, so there are"
                throw TapedeckError(.configuration,
                    "--machine \(explicit): \(where_) no machines.\(explicit) section\(Suggestion.phrase(explicit, known)). \(known.isEmpty ? "Add one, or leave out --machine." : "Known: " + known.joined(separator: ", ") + ".")")
            }
            return explicit
        }
        return file?.machines[hostName] != nil ? hostName : nil
    }

    /// Resolves the layers into a validated configuration.
    /// - Throws: ``TapedeckError`` `.configuration` naming the source, key path and accepted values.
    /// - Thread: any. Never blocks (the file was read already).
    public func resolve(file: ConfigFile?, flags: [String: String], machine explicitMachine: String? = nil) throws -> TapedeckConfiguration {
        if let file { try validateStructure(of: file) }
        for key in flags.keys { try validateKey(key, origin: "--set \(key)") }
        try validateEnvironment()
        let machine = try machineSection(in: file, explicit: explicitMachine)
        let machineEntries = machine.flatMap { file?.machines[$0]?.entries } ?? [:]

        let envSettings = environment.filter { $0.key.hasPrefix("TAPEDECK_") && !Self.reservedVariables.contains($0.key) }
        let reader = ConfigReader(providers: [
            InMemoryProvider(name: "flags", values: Self.values(flags)),
            EnvironmentVariablesProvider(environmentVariables: envSettings).prefixKeys(with: "tapedeck"),
            InMemoryProvider(name: machine.map { "machines.\($0)" } ?? "no machine section", values: Self.values(machineEntries.mapValues(\.value))),
            InMemoryProvider(name: file?.name ?? "no file", values: Self.values(file?.entries.mapValues(\.value) ?? [:])),
        ])

        var settings: [String: ResolvedSetting] = [:]
        func source(of key: String) -> ConfigSource {
            if flags[key] != nil { return .flag }
            let variable = Self.environmentName(for: key)
            if envSettings[variable] != nil { return .environment(variable: variable) }
            if let machine, let entry = machineEntries[key] { return .machine(name: machine, path: file!.name, line: entry.line) }
            if let entry = file?.entries[key] { return .file(path: file!.name, line: entry.line) }
            return .builtIn
        }
        func describe(_ src: ConfigSource, _ key: String) -> String {
            switch src {
            case .flag: "--set \(key)"
            case .environment(let v): "environment variable \(v)"
            case .file(let path, let line): line.map { "\(path):\($0)" } ?? path
            case .machine(let name, let path, let line): (line.map { "\(path):\($0)" } ?? path) + " (machines.\(name))"
            case .builtIn: "built-in default"
            }
        }
        func resolveDeclarations(_ decls: [SettingDeclaration], prefix: String) throws -> PluginSettings {
            var values: [String: SettingValue] = [:]
            for d in decls {
                let key = prefix + "." + d.key
                let src = source(of: key)
                var text = reader.string(forKey: ConfigKey(key)) ?? d.defaultValue
                if d.type == .path { text = Self.absolutePath(text, source: src) }
                switch d.parse(text) {
                case .success(let v):
                    values[d.key] = v
                    settings[key] = ResolvedSetting(value: v, source: src)
                case .failure(let p):
                    throw TapedeckError(.configuration, "\(describe(src, key)): \(key): \(p.reason).")
                }
            }
            return PluginSettings(values)
        }
        func selection(_ section: HostSettings.Section) throws -> RoleSelection {
            guard let selector = section.selector, let role = section.role else {
                return RoleSelection(plugin: nil, settings: PluginSettings())
            }
            let key = section.name + "." + selector
            let src = source(of: key)
            let chosen = reader.string(forKey: ConfigKey(key)) ?? HostSettings.defaultSelections[section.name] ?? ""
            guard !chosen.isEmpty else { return RoleSelection(plugin: nil, settings: PluginSettings()) }
            let entries = catalog.entries(for: role)
            let known = entries.map(\.name).sorted()
            guard let entry = entries.first(where: { $0.name == chosen }) else {
                if let trait = PluginCatalog.optionalBackends[chosen], role == .capture || role == .playback {
                    throw TapedeckError(.configuration,
                        "\(describe(src, key)): \(key): this build of Tapedeck has no \(chosen) backend: it was built without the \(trait) trait. Rebuild with the default traits (`swift build`, which needs \(trait == "ALSA" ? "libasound2-dev" : "libpulse-dev")), or choose one of: \(known.joined(separator: ", ")).")
                }
                throw TapedeckError(.configuration,
                    "\(describe(src, key)): \(key): unknown \(role == .encoder ? "encoder" : "backend") \"\(chosen)\"\(Suggestion.phrase(chosen, known)). Known: \(known.joined(separator: ", ")).")
            }
            settings[key] = ResolvedSetting(value: .string(chosen), source: src)
            return RoleSelection(plugin: chosen, settings: try resolveDeclarations(entry.settings, prefix: section.name + "." + chosen))
        }

        var host: [String: PluginSettings] = [:]
        var roles: [String: RoleSelection] = [:]
        for section in HostSettings.sections {
            host[section.name] = try resolveDeclarations(section.settings, prefix: section.name)
            roles[section.name] = try selection(section)
            // A section for a plugin that is not selected is still checked: a typo there would
            // otherwise surface only on the day that plugin is chosen.
            if let role = section.role {
                for entry in catalog.entries(for: role) where entry.name != roles[section.name]?.plugin {
                    let prefix = section.name + "." + entry.name + "."
                    let present = (file?.entries.keys.contains { $0.hasPrefix(prefix) } ?? false)
                        || machineEntries.keys.contains { $0.hasPrefix(prefix) }
                        || flags.keys.contains { $0.hasPrefix(prefix) }
                        || envSettings.keys.contains { $0.hasPrefix(Self.environmentName(for: prefix + "x").dropLast()) }
                    if present {
                        let saved = settings
                        _ = try resolveDeclarations(entry.settings, prefix: section.name + "." + entry.name)
                        settings = saved
                    }
                }
            }
        }
        let f = host["format"]!
        let format = AudioFormat(sampleRate: f.int("sample-rate")!, channels: f.int("channels")!,
                                 sampleFormat: SampleFormat(rawValue: f.string("sample-format")!)!)
        // The hand-off buffer is allocated up front: keep it within reason for small machines.
        let bufferSeconds = host["capture"]!.double("buffer-seconds")!
        let bufferBytes = bufferSeconds * Double(format.bytesPerSecond)
        if bufferBytes > Double(Self.maxBufferBytes) {
            let most = Double(Self.maxBufferBytes) / Double(format.bytesPerSecond)
            throw TapedeckError(.configuration,
                "\(describe(source(of: "capture.buffer-seconds"), "capture.buffer-seconds")): capture.buffer-seconds: \(bufferSeconds) s at \(format) needs \(Int(bufferBytes / 1_048_576)) MiB of memory. Use at most \(String(format: "%.1f", most)) s for this format.")
        }
        return TapedeckConfiguration(
            file: file?.name,
            machine: machine,
            capture: roles["capture"]!, playback: roles["playback"]!, encoder: roles["encoder"]!, storage: roles["storage"]!,
            format: format,
            capturePeriodFrames: host["capture"]!.int("period-frames")!,
            captureBufferSeconds: host["capture"]!.double("buffer-seconds")!,
            playbackPeriodFrames: host["playback"]!.int("period-frames")!,
            checkpointSeconds: host["storage"]!.double("checkpoint-seconds")!,
            warnFreeMinutes: host["storage"]!.double("warn-free-minutes")!,
            settings: settings)
    }

    // MARK: checking everything (tapedeck config check)

    /// Every problem in the configuration, not only the first: each key of the file (every
    /// machine section included), of the flags and of the environment, then the values as this
    /// machine resolves them and as each machine section does.
    /// - Returns: one full sentence per problem, naming its source, line and key; empty when usable.
    /// - Thread: any. Never blocks (the file was read already).
    public func problems(file: ConfigFile?, flags: [String: String], machine: String?) -> [String] {
        var problems: [String] = []
        func collect(_ body: () throws -> Void) {
            do { try body() } catch let error as TapedeckError { problems.append(error.message) } catch { problems.append("\(error)") }
        }
        if let file {
            for key in file.entries.keys.sorted() { collect { try validateKey(key, origin: file.location(of: key)) } }
            for key in file.sections.keys.sorted() { collect { try validateSection(key, origin: file.location(of: key)) } }
            for (name, m) in file.machines.sorted(by: { $0.key < $1.key }) {
                for key in m.entries.keys.sorted() { collect { try validateKey(key, origin: file.location(of: key, machine: name)) } }
                for key in m.sections.keys.sorted() { collect { try validateSection(key, origin: file.location(of: key, machine: name)) } }
            }
        }
        for key in flags.keys.sorted() { collect { try validateKey(key, origin: "--set \(key)") } }
        collect { try validateEnvironment() }
        guard problems.isEmpty else { return problems }
        collect { _ = try resolve(file: file, flags: flags, machine: machine) }
        for name in (file?.machines.keys.sorted() ?? []) where name != machine {
            collect { _ = try resolve(file: file, flags: flags, machine: name) }
        }
        var seen = Set<String>()
        return problems.filter { seen.insert($0).inserted }
    }

    // MARK: validation of key paths

    /// Every key path a file may contain, for suggestions.
    func knownKeys() -> [String] {
        var keys: [String] = []
        for section in HostSettings.sections {
            keys += section.settings.map { section.name + "." + $0.key }
            if let selector = section.selector, let role = section.role {
                keys.append(section.name + "." + selector)
                for entry in catalog.entries(for: role) {
                    keys += entry.settings.map { "\(section.name).\(entry.name).\($0.key)" }
                }
            }
        }
        return keys
    }

    private func validateStructure(of file: ConfigFile) throws {
        for key in file.entries.keys.sorted() { try validateKey(key, origin: file.location(of: key)) }
        for key in file.sections.keys.sorted() { try validateSection(key, origin: file.location(of: key)) }
        // Every machine's section is checked, not only this machine's: a typo for the studio Pi
        // is found on the laptop too.
        for (name, machine) in file.machines.sorted(by: { $0.key < $1.key }) {
            for key in machine.entries.keys.sorted() { try validateKey(key, origin: file.location(of: key, machine: name)) }
            for key in machine.sections.keys.sorted() { try validateSection(key, origin: file.location(of: key, machine: name)) }
        }
    }

    private func validateSection(_ path: String, origin: String) throws {
        let parts = path.split(separator: ".").map(String.init)
        // A section key with no name (`""`, `.`) has no parts at all.
        guard let first = parts.first, let section = HostSettings.sections.first(where: { $0.name == first }) else {
            throw unknownKey(path, origin: origin)
        }
        if parts.count == 1 { return }
        guard parts.count == 2, let role = section.role, catalog.entries(for: role).contains(where: { $0.name == parts[1] }) else {
            throw unknownKey(path, origin: origin)
        }
        _ = section
    }

    private func validateKey(_ path: String, origin: String) throws {
        guard knownKeys().contains(path) else { throw unknownKey(path, origin: origin) }
    }

    private func unknownKey(_ path: String, origin: String) -> TapedeckError {
        let keys = knownKeys()
        let parts = path.split(separator: ".").map(String.init)
        if parts.count >= 2, let section = HostSettings.sections.first(where: { $0.name == parts[0] }), let role = section.role,
           parts.count == 3 || !catalog.entries(for: role).contains(where: { $0.name == parts[1] }) {
            let plugins = catalog.entries(for: role).map(\.name)
            if let trait = PluginCatalog.optionalBackends[parts[1]], !plugins.contains(parts[1]), role == .capture || role == .playback {
                return TapedeckError(.configuration,
                    "\(origin): \(path): this build of Tapedeck has no \(parts[1]) backend: it was built without the \(trait) trait. Rebuild with the default traits, or remove the \(parts.prefix(2).joined(separator: ".")) section.")
            }
            if parts.count == 3, !plugins.contains(parts[1]) {
                return TapedeckError(.configuration,
                    "\(origin): \(path): \"\(parts[1])\" is not a \(role.rawValue) plugin\(Suggestion.phrase(parts[1], plugins)). Known: \(plugins.sorted().joined(separator: ", ")).")
            }
        }
        let siblings = keys.filter { $0.split(separator: ".").dropLast().joined(separator: ".") == parts.dropLast().joined(separator: ".") }
        let guess = Suggestion.closest(to: path, in: keys).map { " (did you mean \"\($0)\"?)" } ?? ""
        let accepted = siblings.isEmpty
            ? "Sections: " + HostSettings.sections.map(\.name).joined(separator: ", ")
            : "Accepted here: " + siblings.map { String($0.split(separator: ".").last!) }.sorted().joined(separator: ", ")
        return TapedeckError(.configuration, "\(origin): \(path): unknown setting\(guess). \(accepted).")
    }

    private func validateEnvironment() throws {
        let candidates = environment.keys.filter { $0.hasPrefix("TAPEDECK_") && !Self.reservedVariables.contains($0) }
        guard !candidates.isEmpty else { return }
        let names = Dictionary(knownKeys().map { (Self.environmentName(for: $0), $0) }, uniquingKeysWith: { a, _ in a })
        for variable in candidates.sorted() {
            guard names[variable] == nil else { continue }
            let guess = Suggestion.closest(to: variable, in: Array(names.keys)).map { " (did you mean \($0)?)" } ?? ""
            throw TapedeckError(.configuration,
                "environment variable \(variable): not a Tapedeck setting\(guess). Unset it, or see `tapedeck backends` for the settings.")
        }
    }

    // MARK: helpers

    /// The largest capture hand-off buffer accepted, in bytes.
    public static let maxBufferBytes = 256 * 1_048_576

    /// `~` expanded; relative paths resolved against the config file's folder (for values from
    /// the file) or the working directory (environment and flags). Empty stays empty.
    static func absolutePath(_ text: String, source: ConfigSource) -> String {
        guard !text.isEmpty else { return text }
        let expanded = (text as NSString).expandingTildeInPath
        if expanded.hasPrefix("/") { return URL(fileURLWithPath: expanded).standardizedFileURL.path }
        let base: URL = switch source {
        case .file(let path, _), .machine(_, let path, _): URL(fileURLWithPath: path).deletingLastPathComponent()
        default: URL(fileURLWithPath: FileManager.default.currentDirectoryPath)
        }
        return base.appendingPathComponent(expanded).standardizedFileURL.path
    }

    /// `capture.null.overrun-at-frame` → `TAPEDECK_CAPTURE_NULL_OVERRUN_AT_FRAME`.
    public static func environmentName(for key: String) -> String {
        guard key.utf8.allSatisfy({ $0 < 0x80 }) else {
            return "TAPEDECK_" + key.split(separator: ".").map { part in
                String(part.uppercased().map { $0.isLetter || $0.isNumber ? $0 : "_" })
            }.joined(separator: "_")
        }
        // Setting names are ASCII: the same result without Unicode property lookups.
        var name = Array("TAPEDECK_".utf8)
        for byte in key.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"): name.append(byte - 32)
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): name.append(byte)
            default: name.append(UInt8(ascii: "_"))
            }
        }
        return String(decoding: name, as: UTF8.self)
    }

    private static func values(_ dict: [String: String]) -> [AbsoluteConfigKey: ConfigValue] {
        Dictionary(uniqueKeysWithValues: dict.map { (AbsoluteConfigKey(ConfigKey($0.key)), ConfigValue(.string($0.value), isSecret: false)) })
    }
}
