public import Foundation

/// The kinds of backend `scaffold-backend` can start.
public enum BackendKind: String, Sendable, CaseIterable {
    case encoder, capture, playback, storage
    /// Capture and playback in one module: a callback backend over the shared ring stream
    /// (`RingBackend`, `RingDevice`).
    case device
}

/// A new backend's name in the forms the templates need: `Opus` (types, module `TapedeckOpus`)
/// and `opus` (the config name).
public struct ScaffoldName: Sendable, Hashable {
    public let type: String
    public let config: String

    /// Accepts an UpperCamelCase ASCII name of 2 to 40 letters and digits.
    /// - Throws: ``ScaffoldError`` saying what is accepted.
    public init(_ name: String) throws {
        let scalars = name.unicodeScalars
        guard (2...40).contains(name.count), let first = scalars.first, first.isASCII, ("A"..."Z").contains(first),
              scalars.allSatisfy({ $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0)) }) else {
            throw ScaffoldError("--name \(name.debugDescription): use an UpperCamelCase name of ASCII letters and digits, 2 to 40 characters, e.g. Opus or AacLc.")
        }
        type = name
        config = name.lowercased()
    }
}

/// A file the scaffold creates, relative to the package root.
public struct GeneratedFile: Sendable, Hashable {
    public var path: String
    public var contents: String
}

/// A scaffold failure, with what to do.
public struct ScaffoldError: Error, Sendable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// Creates the module, test target and registration lines of a new backend.
///
/// The generated module is a real, trivial implementation that builds and passes the matching
/// conformance suite as it is, for the author to replace. Existing files are never overwritten.
public enum Scaffold {
    /// The files of a new backend of `kind`.
    /// - Thread: any. Never blocks.
    /// `templateRoot` (the Tapedeck package's folder) is read for `--kind storage`, whose template
    /// is Tapedeck's template store.
    public static func files(kind: BackendKind, name: ScaffoldName, templateRoot: URL) throws -> [GeneratedFile] {
        switch kind {
        case .encoder: EncoderTemplate.files(name)
        case .capture: DeviceTemplates.capture(name)
        case .playback: DeviceTemplates.playback(name)
        case .device: DeviceTemplates.device(name)
        case .storage: try StorageTemplate.files(name, templateRoot: templateRoot)
        }
    }

    /// The lines to add to `Package.swift` (inside `targets:`) and to the plugin catalog: in
    /// Tapedeck's own package (`tapedeckPackage` nil) to `PluginCatalog.builtIn`; in another
    /// package, which depends on Tapedeck as `tapedeckPackage` (its identity), to the catalog its
    /// own `tapedeck` runs with (`PluginCatalog.builtIn.adding(...)`).
    /// - Thread: any. Never blocks.
    public static func registration(kind: BackendKind, name: ScaffoldName, tapedeckPackage: String? = nil) -> (package: [String], catalog: [String]) {
        let module = "Tapedeck\(name.type)"
        let package: [String]
        if let id = tapedeckPackage {
            let core = ".product(name: \"TapedeckCore\", package: \"\(id)\")"
            package = [
                ".target(name: \"\(module)\", dependencies: [\(core)], swiftSettings: [.swiftLanguageMode(.v6)]),",
                ".testTarget(name: \"\(module)Tests\", dependencies: [\"\(module)\", \(core), .product(name: \"TapedeckTesting\", package: \"\(id)\")], swiftSettings: [.swiftLanguageMode(.v6)]),",
            ]
        } else {
            package = [
                ".target(name: \"\(module)\", dependencies: [\"TapedeckCore\"], swiftSettings: swiftSettings),",
                ".testTarget(name: \"\(module)Tests\", dependencies: [\"\(module)\", \"TapedeckTesting\"], swiftSettings: swiftSettings),",
            ]
        }
        let plugins: [(role: String, value: String)] = switch kind {
        case .encoder: [("encoders", "\(name.type)Plugin.encoder"), ("decoders", "\(name.type)Plugin.decoder")]
        case .capture: [("capture", "\(name.type)Plugin.capture")]
        case .playback: [("playback", "\(name.type)Plugin.playback")]
        case .device: [("capture", "\(name.type)Plugin.capture"), ("playback", "\(name.type)Plugin.playback")]
        case .storage: [("storage", "\(name.type)StoragePlugin.storage")]
        }
        guard tapedeckPackage != nil else {
            var catalog = plugins.map { "\($0.role): \($0.value)" }
            if kind == .encoder {
                catalog = [catalog.joined(separator: ", ") + "  (and `import \(module)`; add \"\(module)\" to TapedeckAssembly's dependencies)"]
            }
            return (package, catalog)
        }
        let adding = plugins.map { "\($0.role): [\($0.value)]" }.joined(separator: ", ")
        return (package, [
            "import TapedeckAssembly",
            "import TapedeckCommandLine",
            "import \(module)",
            "await TapedeckCLI.main(catalog: .builtIn.adding(\(adding)))",
        ])
    }

    /// The executable target of a package's own `tapedeck` (`Sources/NAME/main.swift` holding the
    /// catalog lines of ``registration(kind:name:tapedeckPackage:)``), for a package that has none.
    /// - Thread: any. Never blocks.
    public static func executableTarget(named executable: String, modules: [String], tapedeckPackage id: String) -> String {
        let products = ["TapedeckCommandLine", "TapedeckAssembly"].map { ".product(name: \"\($0)\", package: \"\(id)\")" }
        return ".executableTarget(name: \"\(executable)\", dependencies: [\(modules.map { "\"\($0)\"" }.joined(separator: ", ")), \(products.joined(separator: ", "))], swiftSettings: [.swiftLanguageMode(.v6)]),"
    }

    /// Writes the files under `packageRoot`. Refuses before writing anything if any of them (or
    /// the module's folder) exists already, or if `packageRoot` is not a package.
    /// - Returns: the paths created, relative to `packageRoot`.
    /// - Thread: any. Blocks on disk I/O.
    /// `templateRoot` is the Tapedeck package's folder (the same as `packageRoot` inside Tapedeck).
    public static func write(kind: BackendKind, name: ScaffoldName, into packageRoot: URL, templateRoot: URL? = nil) throws -> [String] {
        let fm = FileManager.default
        guard fm.fileExists(atPath: packageRoot.appendingPathComponent("Package.swift").path) else {
            throw ScaffoldError("\(packageRoot.path) has no Package.swift; run the scaffold in a package (Tapedeck's, or one that depends on it).")
        }
        let files = try files(kind: kind, name: name, templateRoot: templateRoot ?? packageRoot)
        let folders = Set(files.map { ($0.path as NSString).deletingLastPathComponent })
        for path in folders.sorted() + files.map(\.path) where fm.fileExists(atPath: packageRoot.appendingPathComponent(path).path) {
            throw ScaffoldError("\(path) exists already; the scaffold never overwrites. Choose another --name, or remove it first.")
        }
        var created: [String] = []
        for file in files {
            let url = packageRoot.appendingPathComponent(file.path)
            try fm.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            // `withoutOverwriting`: a file that appeared meanwhile is still never replaced.
            try Data(file.contents.utf8).write(to: url, options: .withoutOverwriting)
            created.append(file.path)
        }
        return created
    }
}
