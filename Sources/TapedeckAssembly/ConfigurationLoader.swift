public import Foundation
public import TapedeckCore
public import TapedeckAlerts
public import TapedeckApp
#if canImport(Glibc)
import Glibc
#endif

/// Finds, reads, layers and validates the configuration.
///
/// Precedence: flags (`--set KEY=VALUE`) > environment (`TAPEDECK_CAPTURE_BACKEND=null`) > the
/// file's `machines:` section for this machine (chosen by `--machine NAME`, else by host name) >
/// the file's top level > built-in defaults, looked up by `ConfigLayers`; every value, whatever
/// its layer, is checked by the declaration of the host or plugin that owns it (`Resolution`),
/// and every error names where the bad value came from.
public struct ConfigurationLoader: Sendable {
    /// Environment variables that are not settings but are read by Tapedeck.
    public static let reservedVariables: Set<String> = ["TAPEDECK_CONFIG", "TAPEDECK_LOG_LEVEL", "TAPEDECK_JOURNAL_SOCKET"]

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
        for candidate in [UserPaths(environment: environment).configHome + "/tapedeck/config.yaml", "/etc/tapedeck/config.yaml"]
        where FileManager.default.isReadableFile(atPath: candidate) {
            return URL(fileURLWithPath: candidate)
        }
        return nil
    }

    /// Locates, reads and resolves the configuration.
    /// - Thread: any. Blocks on disk I/O.
    /// - Parameters:
    ///   - explicitPath: the file named by `--config`; `nil` to look for one (see ``locate(explicitPath:)``).
    ///   - flags: the `--set KEY=VALUE` settings, by key path: the top layer.
    ///   - machine: the `machines:` section named by `--machine`; `nil` for the one named like this host.
    ///   - overrides: options that set a setting of the plugin filling a role (`-D hw:1`), as flags.
    ///   - detection: chooses the capture and playback backends when no layer sets them
    ///     (a command that records or plays); `nil` leaves them unset.
    public func load(explicitPath: String?, flags: [String: String], machine: String? = nil,
                     overrides: [PluginOverride] = [], detection: BackendDetection? = nil) throws -> TapedeckConfiguration {
        let file = try locate(explicitPath: explicitPath).map(ConfigFile.load)
        return try resolve(file: file, flags: flags, machine: machine, overrides: overrides, detection: detection)
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
    /// - Throws: `TapedeckError` `.configuration` naming the source, key path and accepted
    ///   values of the first problem (and how many more `tapedeck config check` lists).
    /// - Thread: any. Never blocks (the file was read already).
    public func resolve(file: ConfigFile?, flags: [String: String], machine explicitMachine: String? = nil,
                        overrides: [PluginOverride] = [], detection: BackendDetection? = nil) throws -> TapedeckConfiguration {
        let file = withEmptySections(file)
        let keyProblems = Self.inFileOrder(self.keyProblems(file: file, flags: flags))
        // The first problem, and how many more the whole check finds (bad values too).
        if !keyProblems.isEmpty { throw Self.error(keyProblems, total: problems(file: file, flags: flags, machine: explicitMachine).count) }
        var detect: (@Sendable (PluginRole) -> (plugin: String, reason: String)?)?
        if let detection { detect = { role in detection.choose(for: role) } }
        var resolution = Resolution(catalog: catalog, layers: try layers(file: file, flags: flags, machine: explicitMachine),
                                    overrides: overrides, detect: detect)
        var configuration = resolution.run()
        if !resolution.problems.isEmpty { throw Self.error(Self.inFileOrder(resolution.problems)) }
        let machineName = try machineSection(in: file, explicit: explicitMachine)
        configuration.alerts = alertRules(file: file, machine: machineName).rules
        configuration.programs = programs(file: file, machine: machineName).rules
        configuration.schedule = schedule(file: file, machine: machineName).schedule
        return configuration
    }

    /// The layers of this configuration, with the machine section that applies.
    private func layers(file: ConfigFile?, flags: [String: String], machine explicit: String?) throws -> ConfigLayers {
        ConfigLayers(flags: flags,
                     environment: environment.filter { $0.key.hasPrefix("TAPEDECK_") && !Self.reservedVariables.contains($0.key) },
                     file: file, machine: try machineSection(in: file, explicit: explicit),
                     paths: UserPaths(environment: environment))
    }

    private static func error(_ problems: [String], total: Int? = nil) -> TapedeckError {
        let others = max(problems.count, total ?? 0) - 1
        let more = others > 0 ? " (\(others) more: run `tapedeck config check` to see them all.)" : ""
        return TapedeckError(.configuration, problems[0] + more)
    }

    /// Problems of the file in the order of its lines (`FILE:LINE: …`), then the others (flags,
    /// environment) as they came. - Thread: any. Never blocks.
    static func inFileOrder(_ problems: [String]) -> [String] {
        func place(_ text: String) -> (Int, String, Int) {
            let parts = text.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            guard parts.count == 3, let line = Int(parts[1]) else { return (1, "", 0) }
            return (0, String(parts[0]), line)
        }
        return problems.enumerated().sorted { a, b in
            let (pa, pb) = (place(a.element), place(b.element))
            return pa.0 != pb.0 ? pa.0 < pb.0 : pa.1 != pb.1 ? pa.1 < pb.1 : pa.2 != pb.2 ? pa.2 < pb.2 : a.offset < b.offset
        }.map(\.element)
    }

    // MARK: checking everything (tapedeck config check)

    /// Every problem in the configuration, not only the first: each key of the file (every
    /// machine section included), of the flags and of the environment, then every value as this
    /// machine resolves them and as each machine section does.
    /// - Returns: one full sentence per problem, naming its source, line and key; empty when usable.
    /// - Thread: any. Never blocks (the file was read already).
    public func problems(file: ConfigFile?, flags: [String: String], machine: String?) -> [String] {
        let file = withEmptySections(file)
        // Unknown keys do not change how the known ones resolve, so every bad value is reported
        // in the same run.
        var problems = keyProblems(file: file, flags: flags)
        // The alerts' credentials files, checked here (not as every command reads the config).
        problems += AlertRules.credentialProblems(alertRules(file: file, machine: machine).rules, environment: environment)
            .map { "\(file?.name ?? "config"): \($0)" }
        let machines = [machine] + (file?.machines.keys.sorted() ?? []).filter { $0 != machine }.map(Optional.some)
        for name in machines {
            do {
                var resolution = Resolution(catalog: catalog, layers: try layers(file: file, flags: flags, machine: name))
                let configuration = resolution.run()
                problems += resolution.problems
                if resolution.problems.isEmpty, let problem = ProvenanceSettings(configuration.provenanceSettings).tsaProblem {
                    problems.append(problem + (name.map { " (machines.\($0))" } ?? ""))
                }
            } catch let error as TapedeckError {
                problems.append(error.message)
            } catch {
                problems.append("\(error)")
            }
        }
        var seen = Set<String>()
        return Self.inFileOrder(problems.filter { seen.insert($0).inserted })
    }

    /// Every key given that no host section or plugin declares: the file's (each machine
    /// section's too), the flags' and the environment's.
    private func keyProblems(file: ConfigFile?, flags: [String: String]) -> [String] {
        var problems: [String] = []
        func collect(_ body: () throws -> Void) {
            do { try body() } catch let error as TapedeckError { problems.append(error.message) } catch { problems.append("\(error)") }
        }
        if let file {
            problems += alertRules(file: file, machine: nil).problems
            problems += schedule(file: file, machine: nil).problems
            problems += programs(file: file, machine: nil).problems
            for name in file.machines.keys.sorted() where file.machines[name]?.lists["programs"] != nil {
                problems += programs(file: file, machine: name).problems.map { $0 + " (machines.\(name))" }
            }
            for name in file.machines.keys.sorted() where file.machines[name]?.lists["alerts"] != nil {
                problems += alertRules(file: file, machine: name).problems.map { $0 + " (machines.\(name))" }
            }
            // A section is checked on its own only when no key in it is (a misspelt section's
            // keys say it better, with a guess).
            func bare(_ section: String, _ entries: [String: ConfigFile.Entry]) -> Bool { !entries.keys.contains { $0.hasPrefix(section + ".") } }
            for key in file.entries.keys.sorted() { collect { try validateKey(key, origin: file.location(of: key)) } }
            for key in file.sections.keys.sorted() where bare(key, file.entries) { collect { try validateSection(key, origin: file.location(of: key)) } }
            // Every machine's section is checked, not only this machine's: a typo for the studio
            // Pi is found on the laptop too.
            for (name, m) in file.machines.sorted(by: { $0.key < $1.key }) {
                for key in m.entries.keys.sorted() { collect { try validateKey(key, origin: file.location(of: key, machine: name)) } }
                for key in m.sections.keys.sorted() where bare(key, m.entries) { collect { try validateSection(key, origin: file.location(of: key, machine: name)) } }
            }
        }
        for key in flags.keys.sorted() { collect { try validateKey(key, origin: "--set \(key)") } }
        problems += environmentProblems()
        return problems
    }

    // MARK: validation of key paths

    /// Every key path a file may contain: the host's settings, each section's selector, and
    /// every plugin's settings under `SECTION.PLUGIN.`. - Thread: any. Never blocks.
    public func knownKeys() -> [String] {
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

    /// `file` with each `SECTION:` or `SECTION.PLUGIN:` that has no value read as an empty
    /// section, not a setting. - Thread: any. Never blocks.
    public func withEmptySections(_ file: ConfigFile?) -> ConfigFile? {
        guard var file else { return nil }
        let settings = Set(knownKeys())
        file.nullsAsSections { key in
            guard !settings.contains(key) else { return false }
            // A group of a section's own settings (`sync.catalog:` holds `catalog.postgres`).
            if settings.contains(where: { $0.hasPrefix(key + ".") }) { return true }
            let parts = key.split(separator: ".").map(String.init)
            guard let section = HostSettings.sections.first(where: { $0.name == parts[0] }) else { return ["machines", "alerts", "programs"].contains(key) }
            if parts.count == 1 { return true }
            guard parts.count == 2, let role = section.role else { return false }
            return catalog.entries(for: role).contains { $0.name == parts[1] }
        }
        return file
    }

    private func validateSection(_ path: String, origin: String) throws {
        // `alerts:` with nothing under it: no alerts.
        if path == "alerts" || path == "programs" || ["schedule", "schedule.location", "schedule.duty-cycle"].contains(path) { return }
        // A group of a section's own settings, e.g. `sync.catalog:`.
        if knownKeys().contains(where: { $0.hasPrefix(path + ".") }) { return }
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
        if path.hasPrefix("schedule.") && file_scheduleKey(path) { return }
        if path == "alerts" || path.hasPrefix("alerts.") {
            throw TapedeckError(.configuration, "\(origin): alerts: is a list of rules, each with when: and a route, e.g. alerts: [ { when: [silence, device-lost], webhook: { url: https://… } } ]. It is read from the config file only, not from --set or the environment.")
        }
        if path == "programs" || path.hasPrefix("programs.") {
            throw TapedeckError(.configuration, "\(origin): programs: is a list of programmes, e.g. programs: [ { name: News, time: \"09:00-09:10\", pad: 2m, days: mon-fri } ]. It is read from the config file only; on the command line give record --program \"News 09:00-09:10 pad 2m\".")
        }
        guard knownKeys().contains(path) else { throw unknownKey(path, origin: origin) }
    }

    /// The `programs:` that apply with `machine`'s section (its own list replaces the top
    /// level's), and a sentence for each problem. - Thread: any. Never blocks.
    public func programs(file: ConfigFile?, machine: String?) -> (rules: [ProgramRule], problems: [String]) {
        guard let file else { return ([], []) }
        let list = machine.flatMap { file.machines[$0]?.lists["programs"] } ?? file.lists["programs"] ?? []
        let entries = list.map { entry in
            (line: entry.line, values: entry.entries.mapValues { RecordingSchedule.Text($0.value, line: $0.line) })
        }
        return ProgramRule.parse(entries: entries, file: file.name)
    }

    /// Whether `path` is a key of `schedule:` (its own problems are said by ``schedule(file:machine:)``).
    private func file_scheduleKey(_ path: String) -> Bool { path.hasPrefix("schedule.") }

    /// The `schedule:` section that applies with `machine`'s section (its own replaces the top
    /// level's), and a sentence for each problem; `nil` without one. - Thread: any. Never blocks.
    public func schedule(file: ConfigFile?, machine: String?) -> (schedule: RecordingSchedule?, problems: [String]) {
        guard let file else { return (nil, []) }
        let m = machine.flatMap { file.machines[$0] }
        let fromMachine = m.map { $0.entries.keys.contains { $0.hasPrefix("schedule.") } || $0.lists["schedule.windows"] != nil } ?? false
        let entries = fromMachine ? m!.entries : file.entries
        let values = entries.filter { $0.key.hasPrefix("schedule.") }
            .reduce(into: [String: RecordingSchedule.Text]()) { $0[String($1.key.dropFirst("schedule.".count))] = .init($1.value.value, line: $1.value.line) }
        let list = (fromMachine ? m!.lists["schedule.windows"] : file.lists["schedule.windows"]) ?? []
        guard !values.isEmpty || !list.isEmpty else { return (nil, []) }
        let windows = list.map { entry in
            (line: entry.line, values: entry.entries.mapValues { RecordingSchedule.Text($0.value, line: $0.line) })
        }
        return RecordingSchedule.parse(values: values, windows: windows, file: file.name)
    }

    /// The `alerts:` rules that apply with `machine`'s section (its own list replaces the top
    /// level's), and a sentence for each problem in them. - Thread: any. Never blocks.
    public func alertRules(file: ConfigFile?, machine: String?) -> (rules: [AlertRule], problems: [String]) {
        guard let file else { return ([], []) }
        let list = machine.flatMap { file.machines[$0]?.lists["alerts"] } ?? file.lists["alerts"] ?? []
        let texts = list.map { entry in
            AlertRuleText(line: entry.line, values: entry.entries.mapValues(\.value),
                          lines: entry.entries.compactMapValues(\.line))
        }
        return AlertRules.parse(texts, file: file.name)
    }

    private func unknownKey(_ path: String, origin: String) -> TapedeckError {
        let keys = knownKeys()
        let parts = path.split(separator: ".").map(String.init)
        if parts.count >= 2, let section = HostSettings.sections.first(where: { $0.name == parts[0] }), let role = section.role,
           parts.count == 3 || !catalog.entries(for: role).contains(where: { $0.name == parts[1] }) {
            let plugins = catalog.entries(for: role).map(\.name)
            if let trait = PluginCatalog.trait(bringing: parts[1], as: role), !plugins.contains(parts[1]) {
                return TapedeckError(.configuration,
                    "\(origin): \(path): this build of Tapedeck has no \(parts[1]) \(role == .remote ? "remote" : "backend"): it was built without the \(trait) trait. Rebuild with the default traits, or remove the \(parts.prefix(2).joined(separator: ".")) section.")
            }
            if parts.count == 3, !plugins.contains(parts[1]) {
                return TapedeckError(.configuration,
                    "\(origin): \(path): \"\(parts[1])\" is not \(role == .encoder ? "an" : "a") \(role.rawValue) plugin\(Suggestion.phrase(parts[1], plugins)). Known: \(plugins.sorted().joined(separator: ", ")).")
            }
        }
        let siblings = keys.filter { $0.split(separator: ".").dropLast().joined(separator: ".") == parts.dropLast().joined(separator: ".") }
        // A plugin's own section (encoder.wav.…) is guessed from within: never another plugin's key.
        let inPlugin = parts.count == 3 && HostSettings.sections.contains { $0.name == parts[0] && $0.role != nil }
        let guess = Suggestion.closest(to: path, in: inPlugin ? siblings : keys).map { " (did you mean \"\($0)\"?)" } ?? ""
        let accepted = siblings.isEmpty
            ? (inPlugin ? "\(parts[0]).\(parts[1]) has no settings" : "Sections: " + HostSettings.sections.map(\.name).joined(separator: ", "))
            : "Accepted here: " + siblings.map { $0.split(separator: ".").last.map(String.init) ?? $0 }.sorted().joined(separator: ", ")
        return TapedeckError(.configuration, "\(origin): \(path): unknown setting\(guess). \(accepted).")
    }

    private func environmentProblems() -> [String] {
        let candidates = environment.keys.filter { $0.hasPrefix("TAPEDECK_") && !Self.reservedVariables.contains($0) }
        guard !candidates.isEmpty else { return [] }
        let names = Dictionary(knownKeys().map { (ConfigLayers.environmentName(for: $0), $0) }, uniquingKeysWith: { a, _ in a })
        return candidates.sorted().compactMap { variable in
            guard names[variable] == nil else { return nil }
            let guess = Suggestion.closest(to: variable, in: Array(names.keys)).map { " (did you mean \($0)?)" } ?? ""
            return "environment variable \(variable): not a Tapedeck setting\(guess). Unset it, or see `tapedeck backends` for the settings."
        }
    }

    // MARK: helpers

    /// The largest capture hand-off buffer accepted, in bytes.
    public static let maxBufferBytes = 256 * 1_048_576
}
