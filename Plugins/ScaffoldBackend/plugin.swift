import PackagePlugin

/// `swift package --allow-writing-to-package-directory scaffold-backend --kind encoder --name Opus`:
/// runs the `tapedeck-scaffold` tool with the package directory. All logic lives in the
/// TapedeckScaffold library, which has its own tests.
///
/// Run in Tapedeck's own package, the new module joins Tapedeck's targets and built-in catalog.
/// Run in a package that depends on Tapedeck, it is made there, and the tool is told where
/// Tapedeck's package is (its templates) and what the package calls it (for the lines to add).
@main
struct ScaffoldBackend: CommandPlugin {
    func performCommand(context: PluginContext, arguments: [String]) async throws {
        let tool = try context.tool(named: "tapedeck-scaffold")
        var toolArguments = ["--package-dir", context.package.directoryURL.path]
        if !context.package.targets.contains(where: { $0.name == "TapedeckCore" }),
           let tapedeck = Self.tapedeck(among: context.package.dependencies) {
            toolArguments += ["--tapedeck-dir", tapedeck.directoryURL.path, "--tapedeck-package", tapedeck.id]
        }
        let process = try Process.run(tool.url, arguments: toolArguments + arguments)
        process.waitUntilExit()
        if process.terminationStatus != 0 {
            Diagnostics.error("scaffold-backend failed (exit \(process.terminationStatus)); see the message above.")
        }
    }

    /// The package that vends `TapedeckCore`, among `dependencies` and theirs.
    static func tapedeck(among dependencies: [PackageDependency]) -> Package? {
        for dependency in dependencies {
            if dependency.package.products.contains(where: { $0.name == "TapedeckCore" }) { return dependency.package }
            if let found = tapedeck(among: dependency.package.dependencies) { return found }
        }
        return nil
    }
}

import Foundation
