import Foundation
import Logging
import TapedeckCore
import TapedeckStoreTemplate
import TapedeckTesting
import Testing

/// The template store passes the whole storage contract, as the store `scaffold-backend --kind
/// storage` generates from it must.
@Suite("Template storage conformance")
struct TemplateStorageTests {
    func tempRoot() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("template-conf-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    @Test("the storage conformance suite passes", arguments: StorageConformance.Area.allCases)
    func conformance(_ area: StorageConformance.Area) throws {
        try StorageConformance.check(area, make: { seam in try TemplateStorage(rootURL: try tempRoot(), seam: seam) },
                                     reopen: { try TemplateStorage(rootURL: $0.rootURL) })
    }

    @Test("the plugin reads only what it declares and opens a library at its path")
    func plugin() throws {
        let root = try tempRoot()
        let settings = try PluginSettings.resolving(TemplateStoragePlugin.storage.settings, overrides: ["path": root.path])
        let (logged, log) = PluginSettings.recordingReads(of: settings)
        let store = try TemplateStoragePlugin.storage.make(logged, PluginContext(logger: .init(label: "t"), defaultLibraryURL: root))
        #expect(log.read.isSubset(of: Set(TemplateStoragePlugin.storage.settings.map(\.key))))
        #expect(try store.createSession(named: nil).name == "Session 1")
        #expect(FileManager.default.fileExists(atPath: root.appendingPathComponent("catalog.json").path))
    }
}
