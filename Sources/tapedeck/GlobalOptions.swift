import ArgumentParser
import Foundation
import Logging
import TapedeckAssembly
import TapedeckCore

/// Options every command takes.
struct GlobalOptions: ParsableArguments {
    @Option(name: .long, help: "The config file (default: $TAPEDECK_CONFIG, then $XDG_CONFIG_HOME/tapedeck/config.yaml, then /etc/tapedeck/config.yaml).")
    var config: String?

    @Option(name: .customLong("set"), help: ArgumentHelp("Override one setting, e.g. --set format.channels=1 (repeatable; beats environment and file).", valueName: "key=value"))
    var settings: [String] = []

    @Option(name: .long, help: "Use this machines: section of the config file (default: the one named like this host, if any).")
    var machine: String?

    @Option(name: .long, help: "Log level on stderr (default notice, or $TAPEDECK_LOG_LEVEL).")
    var logLevel: LogLevelChoice?

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

    func makeLogger() throws -> Logger {
        let text = ProcessInfo.processInfo.environment["TAPEDECK_LOG_LEVEL"] ?? LogLevelChoice.notice.rawValue
        guard let level = logLevel ?? LogLevelChoice(rawValue: text.lowercased()) else {
            throw TapedeckError(.configuration,
                "environment variable TAPEDECK_LOG_LEVEL: unknown log level \"\(text)\". Use one of: \(LogLevelChoice.allCases.map(\.rawValue).joined(separator: ", ")).")
        }
        var logger = Logger(label: "tapedeck") { StreamLogHandler.standardError(label: $0) }
        logger.logLevel = level.level
        return logger
    }

    /// Loads the configuration and assembles the graph, then opens the library (recovering
    /// interrupted takes, and with `loadingSessions` listing every session and take).
    @MainActor
    /// - Parameter writing: the command writes audio into the library (`record`, `import`): a full
    ///   or read-only disk and a format the encoder cannot store are then answered with advice.
    func makeStudio(loadingSessions: Bool = true, writing: Bool = false, flags extra: [String: String] = [:],
                    overrides: [PluginOverride] = []) async throws -> Studio {
        let studio = try makeStudioWithoutLibrary(flags: extra, overrides: overrides)
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
    func makeStudioWithoutLibrary(flags extra: [String: String] = [:], overrides: [PluginOverride] = []) throws -> Studio {
        let environment = ProcessInfo.processInfo.environment
        let loader = ConfigurationLoader(catalog: .builtIn, environment: environment)
        let flags = try flagSettings().merging(extra) { _, own in own }
        let configuration = try loader.load(explicitPath: config, flags: flags, machine: machine, overrides: overrides)
        return try Studio(configuration: configuration, catalog: .builtIn, logger: try makeLogger(), environment: environment)
    }
}
