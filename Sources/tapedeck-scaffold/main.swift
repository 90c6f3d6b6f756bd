import Foundation
import TapedeckScaffold

// The tool behind `swift package scaffold-backend`: the plugin passes the package directory and
// the user's arguments; this does the work, so that the plugin itself stays thin.
//   tapedeck-scaffold --package-dir DIR --kind encoder|capture|playback|device|storage --name Name
//                     [--tapedeck-dir DIR --tapedeck-package ID]
// The last two, in a package that depends on Tapedeck (not Tapedeck's own): where Tapedeck's
// package is (the storage template is read there) and its identity in the package's manifest.

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("scaffold-backend: \(message)\n".utf8))
    exit(1)
}

var options: [String: String] = [:]
var args = Array(CommandLine.arguments.dropFirst())
while !args.isEmpty {
    let key = args.removeFirst()
    guard key.hasPrefix("--"), !args.isEmpty else {
        fail("usage: swift package --allow-writing-to-package-directory scaffold-backend --kind encoder|capture|playback|device|storage --name Name")
    }
    options[String(key.dropFirst(2))] = args.removeFirst()
}
guard let kindText = options["kind"], let kind = BackendKind(rawValue: kindText) else {
    fail("--kind must be one of: \(BackendKind.allCases.map(\.rawValue).joined(separator: ", ")).")
}
guard let nameText = options["name"], let root = options["package-dir"] else {
    fail("--name is required, e.g. --name Opus.")
}
do {
    let name = try ScaffoldName(nameText)
    let outside = options["tapedeck-package"]
    let created = try Scaffold.write(kind: kind, name: name, into: URL(fileURLWithPath: root),
                                     templateRoot: options["tapedeck-dir"].map { URL(fileURLWithPath: $0) })
    print("Created:")
    for path in created { print("  \(path)") }
    let lines = Scaffold.registration(kind: kind, name: name, tapedeckPackage: outside)
    print("\nAdd to Package.swift, in targets:")
    for line in lines.package { print("  \(line)") }
    if let id = outside {
        let executable = "tapedeck-\(name.config)"
        print("\nYour own tapedeck with it (every Tapedeck command, and the new plugin): add this target too,")
        print("  \(Scaffold.executableTarget(named: executable, modules: ["Tapedeck\(name.type)"], tapedeckPackage: id))")
        print("and Sources/\(executable)/main.swift:")
        for line in lines.catalog { print("  \(line)") }
        print("\nThen: swift build --build-tests && swift test --skip-build --filter Tapedeck\(name.type)Tests && swift run \(executable) backends")
    } else {
        print("\nAdd to PluginCatalog.builtIn (Sources/TapedeckAssembly/PluginCatalog.swift):")
        for line in lines.catalog { print("  \(line)") }
        print("\nThen: swift build --build-tests && swift test --skip-build --filter Tapedeck\(name.type)Tests")
    }
} catch {
    fail("\(error)")
}
