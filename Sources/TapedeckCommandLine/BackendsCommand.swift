import ArgumentParser
import TapedeckAssembly
import TapedeckApp
import TapedeckCore

struct BackendsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "backends",
        abstract: "List the plugins compiled into this build, with the settings each accepts.")

    @Flag(help: "Print JSON.")
    var json = false

    struct SettingJSON: Encodable {
        var key: String
        var configKey: String
        var type: String
        var defaultValue: String
        var help: String
    }

    struct PluginJSON: Encodable {
        var kind = "backend"
        var schema = JSONSchema.version
        var role: String
        var name: String
        var summary: String
        var settings: [SettingJSON]
    }

    @MainActor
    mutating func run() async throws {
        try await reportingErrors {
            let catalog = BoundCatalog.current
            let sectionName: [PluginRole: String] = [.capture: "capture", .playback: "playback", .encoder: "encoder", .storage: "storage", .remote: "sync"]
            let plugins = PluginRole.allCases.flatMap { role in
                catalog.entries(for: role).map { entry in
                    PluginJSON(role: role.rawValue, name: entry.name, summary: entry.summary, settings: entry.settings.map { s in
                        SettingJSON(key: s.key, configKey: sectionName[role].map { "\($0).\(entry.name).\(s.key)" } ?? s.key,
                                    type: s.type.summary, defaultValue: s.defaultValue, help: s.help)
                    })
                }
            }
            if json { return try Terminal.printJSON(plugins) }
            for role in PluginRole.allCases {
                print("\(role.rawValue):")
                for p in plugins where p.role == role.rawValue {
                    print("  \(p.name) — \(p.summary)")
                    for s in p.settings {
                        print("      \(s.configKey) (\(s.type), default \(s.defaultValue.isEmpty ? "\"\"" : s.defaultValue)): \(s.help)")
                    }
                }
            }
        }
    }
}
