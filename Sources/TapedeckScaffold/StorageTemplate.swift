import Foundation

/// The files of a new storage module. A store must keep the whole storage contract (crash points,
/// I/O errors, recovery, locks between processes), which no few-line template can, so the
/// template is the package's own bundle store, renamed: real, passing `StorageConformance` as
/// generated, for the author to change into the new store.
enum StorageTemplate {
    static func files(_ n: ScaffoldName, packageRoot: URL) throws -> [GeneratedFile] {
        let source = packageRoot.appendingPathComponent("Sources/TapedeckBundleStorage")
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: source.path)) ?? []).filter { $0.hasSuffix(".swift") }.sorted()
        guard names.contains("BundleStorage.swift"), names.contains("BundleStoragePlugin.swift") else {
            throw ScaffoldError("--kind storage starts from Sources/TapedeckBundleStorage, which this package does not have.")
        }
        var files: [GeneratedFile] = []
        for name in names {
            let text = try String(contentsOf: source.appendingPathComponent(name), encoding: .utf8)
            files.append(GeneratedFile(path: "Sources/Tapedeck\(n.type)/" + rename(name, n), contents: rename(text, n)))
        }
        files.append(GeneratedFile(path: "Tests/Tapedeck\(n.type)Tests/\(n.type)ConformanceTests.swift", contents: """
            import Foundation
            import TapedeckCore
            import TapedeckTesting
            import Tapedeck\(n.type)
            import Testing

            @Suite("\(n.type) storage conformance")
            struct \(n.type)ConformanceTests {
                func tempRoot() throws -> URL {
                    let url = FileManager.default.temporaryDirectory.appendingPathComponent("\(n.config)-conf-\\(UUID().uuidString)")
                    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
                    return url
                }

                @Test("the storage conformance suite passes", arguments: StorageConformance.Area.allCases)
                func conformance(_ area: StorageConformance.Area) throws {
                    try StorageConformance.check(area, make: { seam in try \(n.type)Storage(rootURL: try tempRoot(), seam: seam) },
                                               reopen: { try \(n.type)Storage(rootURL: $0.rootURL) })
                }
            }

            """))
        return files
    }

    /// `BundleStorage` → `NAMEStorage`, the plugin's config name `bundle` → `name`.
    static func rename(_ text: String, _ n: ScaffoldName) -> String {
        text.replacingOccurrences(of: "BundleStoragePlugin", with: "\(n.type)StoragePlugin")
            .replacingOccurrences(of: "BundleStorage", with: "\(n.type)Storage")
            .replacingOccurrences(of: "name: \"bundle\",", with: "name: \"\(n.config)\",")
    }
}
