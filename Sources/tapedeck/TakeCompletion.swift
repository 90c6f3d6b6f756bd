import ArgumentParser
import Foundation
import Logging
import TapedeckAssembly
import TapedeckCore

/// Shell completion of take and session names: the catalog is read as the configuration says
/// (`--config` on the line being completed, else the usual lookup), without recovery or any
/// other change. Any failure completes nothing. Runs on the thread the shell's call runs on;
/// blocks briefly on the catalog.
enum TakeCompletion {
    /// For `@Argument(completion:)`: `last`, session names and `SESSION/TAKE`, then short ids.
    static let kind = CompletionKind.custom { arguments, _, prefix in candidates(arguments: arguments, prefix: prefix) }

    static func candidates(arguments: [String], prefix: String) -> [String] {
        let environment = ProcessInfo.processInfo.environment
        let config = arguments.firstIndex(of: "--config").flatMap { $0 + 1 < arguments.count ? arguments[$0 + 1] : nil }
        let catalog = PluginCatalog.builtIn
        guard let configuration = try? ConfigurationLoader(catalog: catalog, environment: environment).load(explicitPath: config, flags: [:]),
              let name = configuration.storage.plugin,
              let plugin = catalog.storage.first(where: { $0.name == name }) else { return [] }
        let logger = Logger(label: "tapedeck") { _ in SwiftLogNoOpLogHandler() }
        let context = PluginContext(logger: logger, defaultLibraryURL: UserPaths(environment: environment).defaultLibrary,
                                    section: "storage." + name)
        guard let storage = try? plugin.make(configuration.storage.settings, context),
              let sessions = try? storage.sessions() else { return [] }
        var names = ["last"]
        for s in sessions {
            names.append(s.name)
            names += s.takes.map { "\(s.name)/\($0.name)" }
        }
        names += sessions.flatMap { s in s.takes.map(\.shortID) }
        return names.filter { $0.hasPrefix(prefix) }
    }
}
