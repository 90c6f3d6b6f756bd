import ArgumentParser
import Foundation
import Logging
import TapedeckAssembly
import TapedeckCore

/// Shell completion of take and session names, and of devices: the catalog (or the configured
/// backend) is read as the configuration says (`--config` on the line being completed, else the
/// usual lookup), without recovery or any other change. Any failure completes nothing. Runs on
/// the thread the shell's call runs on; blocks briefly on the catalog or the audio system.
///
/// Names are offered as the shell must receive them: bash gets each escaped (`Session\ 1/Take\ 1`:
/// its `compgen -W` takes the quoting off and readline puts it back as it inserts the word),
/// matched against the word as typed, escapes and all, so `play Session\ 1/<TAB>` finds the
/// takes of "Session 1".
enum TakeCompletion {
    /// What a command's argument accepts.
    enum Accepts { case takes, sessions, both }

    /// `last`, `SESSION/TAKE` and short ids (takes); session names (sessions).
    static func kind(_ accepts: Accepts) -> CompletionKind {
        .custom { arguments, _, prefix in candidates(arguments: arguments, prefix: prefix, accepts: accepts) }
    }

    /// For arguments that take a take or a session.
    static let kind = kind(.both)

    static func candidates(arguments: [String], prefix: String, accepts: Accepts) -> [String] {
        let environment = ProcessInfo.processInfo.environment
        let catalog = BoundCatalog.current
        guard let configuration = ShellWords.configuration(arguments: arguments, environment: environment),
              let name = configuration.storage.plugin,
              let plugin = catalog.storage.first(where: { $0.name == name }) else { return [] }
        let logger = Logger(label: "tapedeck") { _ in SwiftLogNoOpLogHandler() }
        let context = PluginContext(logger: logger, defaultLibraryURL: UserPaths(environment: environment).defaultLibrary,
                                    section: "storage." + name)
        guard let storage = try? plugin.make(configuration.storage.settings, context),
              let sessions = try? storage.sessions() else { return [] }
        var names: [String] = []
        if accepts != .sessions { names.append("last") }
        for s in sessions {
            if accepts != .takes { names.append(s.name) }
            if accepts != .sessions { names += s.takes.map { "\(s.name)/\($0.name)" } }
        }
        if accepts != .sessions { names += sessions.flatMap { s in s.takes.map(\.shortID) } }
        return ShellWords.offer(names, prefix: prefix, environment: environment)
    }
}

/// Device names for `-D`: the devices of the configured (or, with none, of every) backend of the role.
enum DeviceCompletion {
    static func kind(capture: Bool) -> CompletionKind {
        .custom { arguments, _, prefix in
            guard Thread.isMainThread else { return [] }
            return MainActor.assumeIsolated { candidates(arguments: arguments, prefix: prefix, capture: capture) }
        }
    }

    @MainActor
    static func candidates(arguments: [String], prefix: String, capture: Bool) -> [String] {
        let environment = ProcessInfo.processInfo.environment
        let catalog = BoundCatalog.current
        let logger = Logger(label: "tapedeck") { _ in SwiftLogNoOpLogHandler() }
        guard let configuration = ShellWords.configuration(arguments: arguments, environment: environment),
              let studio = try? Studio(configuration: configuration, catalog: catalog, logger: logger, environment: environment) else { return [] }
        let configured = capture ? configuration.capture.plugin : configuration.playback.plugin
        let backends = configured.map { [$0] } ?? (capture ? catalog.capture.map(\.name) : catalog.playback.map(\.name))
        var names: [String] = []
        for backend in backends {
            let devices = (try? studio.devices(ofBackend: backend)) ?? []
            names += devices.filter { (capture ? $0.canCapture : $0.canPlay) && !$0.isProcessingStage }.map(\.name)
        }
        return ShellWords.offer(Array(Set(names)).sorted(), prefix: prefix, environment: environment)
    }
}

/// Completion words as the shell asking for them must get them.
enum ShellWords {
    /// The configuration as the line being completed names it (`--config` on it, else the
    /// usual lookup); `nil` when it cannot be read.
    static func configuration(arguments: [String], environment: [String: String]) -> TapedeckConfiguration? {
        let config = arguments.firstIndex(of: "--config").flatMap { $0 + 1 < arguments.count ? arguments[$0 + 1] : nil }
        return try? ConfigurationLoader(catalog: BoundCatalog.current, environment: environment).load(explicitPath: config, flags: [:])
    }

    /// The words that begin with `prefix` (the word as typed), escaped for the shell in
    /// `SAP_SHELL` (bash: escaped, for `compgen -W`; zsh and fish quote what they insert).
    static func offer(_ words: [String], prefix: String, environment: [String: String]) -> [String] {
        guard environment["SAP_SHELL"] == "bash" else { return words.filter { $0.hasPrefix(prefix) } }
        return words.map(escaped).filter { $0.hasPrefix(prefix) }
    }

    /// `word` with each character the shell would read as syntax behind a backslash.
    static func escaped(_ word: String) -> String {
        var out = ""
        for c in word {
            if " \t!\"#$&'()*;<>?[\\]^`{|}~=:,".contains(c) { out.append("\\") }
            out.append(c)
        }
        return out
    }
}
