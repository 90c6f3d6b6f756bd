import ArgumentParser
import Foundation
import Logging
import TapedeckAssembly
import TapedeckCore

/// Options every command takes.
struct GlobalOptions: ParsableArguments {
    @Option(name: .long, help: "The config file (default: $TAPEDECK_CONFIG, then $XDG_CONFIG_HOME/tapedeck/config.yaml, then /etc/tapedeck/config.yaml).",
            completion: .file(extensions: ["yaml", "yml"]))
    var config: String?

    @Option(name: .customLong("set"), help: ArgumentHelp("Override one setting, e.g. --set format.channels=1 (repeatable; beats environment and file).", valueName: "key=value"))
    var settings: [String] = []

    @Option(name: .long, help: "Use this machines: section of the config file (default: the one named like this host, if any).")
    var machine: String?

    @Option(name: .long, help: "Log level on stderr (default notice, or $TAPEDECK_LOG_LEVEL).")
    var logLevel: LogLevelChoice?

    @Flag(name: .shortAndLong, help: "Say only errors on stderr: no meter, banner, progress or warnings (as arecord -q and sox -q). The report on stdout stays.")
    var quiet = false

    @Flag(name: .shortAndLong, help: "Say more on stderr: each step as it happens (--log-level info).")
    var verbose = false

    func validate() throws {
        if quiet && verbose { throw ValidationError("Give -q/--quiet or -v/--verbose, not both.") }
    }

    /// These options as arguments again, for a `tapedeck` this one starts (exports on request).
    var arguments: [String] {
        var out: [String] = config.map { ["--config", $0] } ?? []
        out += settings.flatMap { ["--set", $0] }
        if let machine { out += ["--machine", machine] }
        if let logLevel { out += ["--log-level", logLevel.rawValue] }
        if quiet { out.append("--quiet") }
        if verbose { out.append("--verbose") }
        return out
    }

    /// `--set` pairs as a dictionary.
    func flagSettings() throws -> [String: String] {
        var out: [String: String] = [:]
        for pair in settings {
            guard let eq = pair.firstIndex(of: "="), eq != pair.startIndex else {
                throw TapedeckError(.invalidArgument, "--set \(pair): expected KEY=VALUE, e.g. --set format.channels=1.")
            }
            out[String(pair[..<eq])] = String(pair[pair.index(after: eq)...])
        }
        return out
    }

    /// The logger for these options; with `--quiet`, progress and banners are off from here on.
    func makeLogger() throws -> Logger {
        if quiet { Terminal.quiet.store(true, ordering: .relaxed) }
        let text = ProcessInfo.processInfo.environment["TAPEDECK_LOG_LEVEL"] ?? LogLevelChoice.notice.rawValue
        let chosen = logLevel ?? (quiet ? .error : verbose ? .info : nil)
        guard let level = chosen ?? LogLevelChoice(rawValue: text.lowercased()) else {
            throw TapedeckError(.configuration,
                "environment variable TAPEDECK_LOG_LEVEL: unknown log level \"\(text)\". Use one of: \(LogLevelChoice.allCases.map(\.rawValue).joined(separator: ", ")).")
        }
        return UserLogHandler.logger(level: level.level)
    }

    /// Loads the configuration and assembles the graph, then opens the library (recovering
    /// interrupted takes, and with `loadingSessions` listing every session and take).
    @MainActor
    /// - Parameter writing: the command writes audio into the library (`record`, `import`): a full
    ///   or read-only disk and a format the encoder cannot store are then answered with advice.
    ///   `detecting`: the roles the command uses (`record` capture, `play` playback): with no
    ///   backend configured for one, the machine's sound server or ALSA is chosen (``BackendDetection``).
    func makeStudio(loadingSessions: Bool = false, writing: Bool = false, flags extra: [String: String] = [:],
                    overrides: [PluginOverride] = [], detecting: Set<PluginRole> = []) async throws -> Studio {
        let studio = try makeStudioWithoutLibrary(flags: extra, overrides: overrides, detecting: detecting)
        if writing { ErrorAdvice.current?.writingLibrary(studio) }
        try await studio.openLibrary(loadingSessions: loadingSessions)
        return studio
    }

    /// Loads the configuration and assembles the graph without opening the library.
    @MainActor
    /// - Parameters:
    ///   - extra: settings a command's own options give (`-r` → `format.sample-rate`); they beat
    ///     `--set` for the same key.
    ///   - overrides: options that set the selected plugin's settings (`-D`).
    func makeStudioWithoutLibrary(flags extra: [String: String] = [:], overrides: [PluginOverride] = [],
                                  detecting: Set<PluginRole> = []) throws -> Studio {
        let environment = ProcessInfo.processInfo.environment
        let loader = ConfigurationLoader(catalog: BoundCatalog.current, environment: environment)
        let flags = try flagSettings().merging(extra) { _, own in own }
        let logger = try makeLogger()
        let detection = detecting.isEmpty ? nil
            : BackendDetection(catalog: BoundCatalog.current, roles: detecting, logger: logger, defaultLibraryURL: UserPaths(environment: environment).defaultLibrary)
        let configuration = try loader.load(explicitPath: config, flags: flags, machine: machine, overrides: overrides, detection: detection)
        let studio = try Studio(configuration: configuration, catalog: BoundCatalog.current, logger: logger, environment: environment)
        for section in ["capture", "playback"] where configuration.isDetected(section) {
            guard let chosen = configuration.settings[section + ".backend"] else { continue }
            // What to do when the backend Tapedeck chose cannot open the machine's default device.
            ErrorAdvice.current?.on(.deviceUnavailable, say: "(No \(section) backend is configured; Tapedeck chose \(chosen.value) because \(chosen.source.description.replacingOccurrences(of: "detected: ", with: "")).) See what there is with `tapedeck devices`, choose a device with --device NAME, or write a config with `tapedeck config init`. To try Tapedeck with no sound card, use its test tone: --set \(section).backend=null.")
            logger.debug("\(section).backend: \(chosen.value) (\(chosen.source))")
        }
        // A backend the config file names (as `config init` writes the one it found): when its
        // server is not running, say where it was chosen and how to let Tapedeck choose.
        for role in detecting where role == .capture || role == .playback {
            let section = role == .capture ? "capture" : "playback"
            guard !configuration.isDetected(section), let chosen = configuration.settings[section + ".backend"] else { continue }
            switch chosen.source {
            case .file, .machine:
                ErrorAdvice.current?.on(.deviceUnavailable, say: "(\(section).backend is \(chosen.value), set at \(chosen.source). Comment that line out to have Tapedeck use whichever sound server is running, or choose another backend with --set \(section).backend=NAME; `tapedeck devices` shows what there is.)")
            default:
                break
            }
        }
        return studio
    }
}
