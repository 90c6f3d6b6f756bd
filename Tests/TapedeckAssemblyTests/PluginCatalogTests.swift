import Foundation
import TapedeckAssembly
import TapedeckCore
import Testing

/// `PluginCatalog.adding(...)`: how a package outside Tapedeck builds its own catalog.
@Suite("a catalog with plugins from outside")
struct PluginCatalogTests {
    /// A plugin of a package of its own: an encoder that writes nothing, with one setting.
    struct OutsideSettings: SettingsGroup, Hashable {
        static let quality = Setting<Int>("quality", range: 0...9, default: 4, help: "How good.")
        static let declarations = [quality.declaration]
        var quality: Int
        init(_ settings: PluginSettings) { quality = settings[Self.quality] }
    }

    static func encoder(named name: String) -> EncoderPlugin {
        EncoderPlugin(name: name, summary: "An outside encoder.", settings: OutsideSettings.self) { _, _ in RawPCMStandIn() }
    }

    @Test("added plugins come after the built-in ones of their role, and are what added(to:) lists")
    func adds() {
        let catalog = PluginCatalog.builtIn.adding(encoders: [Self.encoder(named: "outside")])
        #expect(catalog.encoders.map(\.name) == PluginCatalog.builtIn.encoders.map(\.name) + ["outside"])
        #expect(catalog.decoders.map(\.name) == PluginCatalog.builtIn.decoders.map(\.name))
        let added = catalog.added(to: .builtIn)
        #expect(added.map(\.name) == ["outside"] && added.map(\.role) == [.encoder])
        #expect(added.first?.settings.map(\.key) == ["quality"])
        #expect(PluginCatalog.builtIn.added(to: .builtIn).isEmpty)
    }

    @Test("added decoders are tried first: a package's reader of its own format before a general one")
    func decodersFirst() {
        let decoder = DecoderPlugin(name: "outside", summary: "An outside decoder.") { _ in RawPCMStandIn() }
        let catalog = PluginCatalog.builtIn.adding(decoders: [decoder])
        #expect(catalog.decoders.map(\.name) == ["outside"] + PluginCatalog.builtIn.decoders.map(\.name))
    }

    @Test("a plugin named as a built-in one takes its place, so names stay unique in a role")
    func replaces() throws {
        let first = try #require(PluginCatalog.builtIn.encoders.first)
        let catalog = PluginCatalog.builtIn.adding(encoders: [Self.encoder(named: first.name)])
        #expect(catalog.encoders.map(\.name) == PluginCatalog.builtIn.encoders.map(\.name))
        #expect(catalog.encoders.first?.summary == "An outside encoder.")
        #expect(catalog.added(to: .builtIn).isEmpty)
    }

    @Test("the configuration loader validates an added plugin's settings from its declarations")
    func validates() throws {
        let catalog = PluginCatalog.builtIn.adding(encoders: [Self.encoder(named: "outside")])
        let loader = ConfigurationLoader(catalog: catalog, environment: [:])
        let good = try loader.load(explicitPath: nil, flags: ["encoder.name": "outside", "encoder.outside.quality": "7"])
        #expect(good.encoder.plugin == "outside")
        #expect(throws: (any Error).self) {
            _ = try loader.load(explicitPath: nil, flags: ["encoder.name": "outside", "encoder.outside.quality": "12"])
        }
        // Tapedeck's own catalog does not know it.
        #expect(throws: (any Error).self) {
            _ = try ConfigurationLoader(catalog: .builtIn, environment: [:]).load(explicitPath: nil, flags: ["encoder.name": "outside"])
        }
    }
}

/// An encoder and decoder for the catalog tests: never asked to write or read.
struct RawPCMStandIn: AudioEncoder, AudioDecoder {
    var encodings: Set<String> { ["outside"] }
    func openReader(at url: URL) throws -> any TakeReader {
        throw TapedeckError(.unsupportedFormat, "not for reading")
    }
    var name: String { "outside" }
    var fileExtension: String { "raw" }
    func validate(_ format: AudioFormat) throws {}
    func makeWriter(at url: URL, format: AudioFormat, metadata: TakeMetadata) throws -> any TakeWriter {
        throw TapedeckError(.unsupportedFormat, "not for writing")
    }
    func repair(fileAt url: URL) throws -> RepairResult {
        throw TapedeckError(.unsupportedFormat, "not for repairing")
    }
}
