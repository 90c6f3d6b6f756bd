import PackagePlugin

/// `swift package --allow-writing-to-package-directory scaffold-backend --kind encoder --name Opus`:
/// runs the `tapedeck-scaffold` tool with the package directory. All logic lives in the
/// TapedeckScaffold library, which has its own tests.
@main
struct ScaffoldBackend: CommandPlugin {
    func performCommand(context: PluginContext, arguments: [String]) async throws {
        let tool = try context.tool(named: "tapedeck-scaffold")
        let process = try Process.run(tool.url, arguments: ["--package-dir", context.package.directoryURL.path] + arguments)
        process.waitUntilExit()
        if process.terminationStatus != 0 {
            Diagnostics.error("scaffold-backend failed (exit \(process.terminationStatus)); see the message above.")
        }
    }
}

import Foundation
