import Foundation
import TapedeckScaffold
import Testing

@Suite("scaffold-backend templates")
struct ScaffoldTests {
    func packageDir() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-scaffold-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        try Data("// swift-tools-version: 6.2\n".utf8).write(to: url.appendingPathComponent("Package.swift"))
        return url
    }

    @Test("an encoder scaffold creates the module, its plugin and its conformance tests, named after --name")
    func encoder() throws {
        let root = try packageDir()
        let created = try Scaffold.write(kind: .encoder, name: try ScaffoldName("Opus"), into: root)
        #expect(created == ["Sources/TapedeckOpus/OpusEncoder.swift", "Sources/TapedeckOpus/OpusPlugin.swift",
                            "Tests/TapedeckOpusTests/OpusConformanceTests.swift"])
        let encoder = try String(contentsOf: root.appendingPathComponent(created[0]), encoding: .utf8)
        #expect(encoder.contains("public struct OpusEncoder: AudioEncoder, AudioDecoder"))
        #expect(encoder.contains("public var name: String { \"opus\" }"))
        let tests = try String(contentsOf: root.appendingPathComponent(created[2]), encoding: .utf8)
        #expect(tests.contains("import TapedeckOpus") && tests.contains("EncoderConformance.roundTrip"))
        let lines = Scaffold.registration(kind: .encoder, name: try ScaffoldName("Opus"))
        #expect(lines.package == [
            ".target(name: \"TapedeckOpus\", dependencies: [\"TapedeckCore\"], swiftSettings: swiftSettings),",
            ".testTarget(name: \"TapedeckOpusTests\", dependencies: [\"TapedeckOpus\", \"TapedeckTesting\"], swiftSettings: swiftSettings),",
        ])
        #expect(lines.catalog.first?.hasPrefix("encoders: OpusPlugin.encoder, decoders: OpusPlugin.decoder") == true)
    }

    @Test("existing files are never overwritten: the scaffold refuses before writing anything")
    func neverOverwrites() throws {
        let root = try packageDir()
        let mine = root.appendingPathComponent("Tests/TapedeckOpusTests/OpusConformanceTests.swift")
        try FileManager.default.createDirectory(at: mine.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data("my work".utf8).write(to: mine)
        #expect(throws: ScaffoldError.self) { try Scaffold.write(kind: .encoder, name: try ScaffoldName("Opus"), into: root) }
        #expect(try Data(contentsOf: mine) == Data("my work".utf8))
        #expect(!FileManager.default.fileExists(atPath: root.appendingPathComponent("Sources/TapedeckOpus").path), "nothing half-written")
    }

    @Test("names must be UpperCamelCase ASCII; a folder without Package.swift is refused")
    func validation() throws {
        for bad in ["opus", "O", "Opus Codec", "../Evil", "Ópus", "Opus-2", String(repeating: "A", count: 41)] {
            #expect(throws: ScaffoldError.self, "\(bad)") { try ScaffoldName(bad) }
        }
        #expect(try ScaffoldName("AacLc").config == "aaclc")
        let empty = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-nopkg-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: empty, withIntermediateDirectories: true)
        #expect(throws: ScaffoldError.self) { try Scaffold.write(kind: .encoder, name: try ScaffoldName("Opus"), into: empty) }
        #expect(throws: ScaffoldError.self, "storage needs the package's bundle store") {
            try Scaffold.files(kind: .storage, name: try ScaffoldName("Cloud"), templateRoot: empty)
        }
    }

    @Test("capture and playback scaffolds create a paced device, its plugin and the backend conformance tests")
    func devices() throws {
        let root = try packageDir()
        let capture = try Scaffold.write(kind: .capture, name: try ScaffoldName("Jack"), into: root)
        #expect(capture == ["Sources/TapedeckJack/JackCapture.swift", "Sources/TapedeckJack/JackPlugin.swift",
                            "Tests/TapedeckJackTests/JackConformanceTests.swift"])
        let tests = try String(contentsOf: root.appendingPathComponent(capture[2]), encoding: .utf8)
        #expect(tests.contains("BackendConformance.capture(JackCaptureBackend()"))
        let playback = try Scaffold.write(kind: .playback, name: try ScaffoldName("Sndio"), into: root)
        let plugin = try String(contentsOf: root.appendingPathComponent(playback[1]), encoding: .utf8)
        #expect(plugin.contains("public static let playback = PlaybackPlugin("))
        #expect(Scaffold.registration(kind: .capture, name: try ScaffoldName("Jack")).catalog == ["capture: JackPlugin.capture"])
    }

    @Test("a device scaffold is a callback backend over the ring stream: one backend for both roles, its device, one plugin with both, one test file with both suites")
    func captureAndPlayback() throws {
        let root = try packageDir()
        let files = try Scaffold.write(kind: .device, name: try ScaffoldName("Sndio"), into: root)
        #expect(files == ["Sources/TapedeckSndio/SndioBackend.swift", "Sources/TapedeckSndio/SndioDevice.swift",
                          "Sources/TapedeckSndio/SndioPlugin.swift", "Tests/TapedeckSndioTests/SndioConformanceTests.swift"])
        let backend = try String(contentsOf: root.appendingPathComponent(files[0]), encoding: .utf8)
        #expect(backend.contains("public struct SndioBackend: RingBackend"))
        let device = try String(contentsOf: root.appendingPathComponent(files[1]), encoding: .utf8)
        #expect(device.contains("public final class SndioDevice: RingDevice"))
        let plugin = try String(contentsOf: root.appendingPathComponent(files[2]), encoding: .utf8)
        #expect(plugin.contains("public typealias SndioPlugin = SndioBackend") && plugin.contains("public static let summaries"))
        let tests = try String(contentsOf: root.appendingPathComponent(files[3]), encoding: .utf8)
        #expect(tests.contains("SndioPlugin.capture.make(") && tests.contains("BackendConformance.playback(backend"))
        #expect(Scaffold.registration(kind: .device, name: try ScaffoldName("Sndio")).catalog == ["capture: SndioPlugin.capture", "playback: SndioPlugin.playback"])
    }

    @Test("a storage scaffold is the package's template store, renamed, at most 400 lines, with the storage conformance suite per area")
    func storage() throws {
        let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let files = try Scaffold.files(kind: .storage, name: try ScaffoldName("Cloud"), templateRoot: packageRoot)
        #expect(files.map(\.path).contains("Sources/TapedeckCloud/CloudStorage.swift"))
        #expect(files.map(\.path).contains("Sources/TapedeckCloud/CloudStoragePlugin.swift"))
        let plugin = try #require(files.first { $0.path.hasSuffix("CloudStoragePlugin.swift") })
        #expect(plugin.contents.contains("name: \"cloud\",") && !plugin.contents.contains("Template"))
        #expect(files.allSatisfy { !$0.contents.contains("TemplateStorage") && !$0.contents.contains("storage.template") })
        let sourceLines = files.filter { $0.path.hasPrefix("Sources/") }.reduce(0) { $0 + $1.contents.split(separator: "\n", omittingEmptySubsequences: false).count }
        #expect(sourceLines <= 400, "the generated store is \(sourceLines) lines")
        #expect(files.last?.contents.contains("StorageConformance.check(area") == true)
    }
}

@Suite("scaffold-backend in a package outside Tapedeck")
struct ScaffoldOutsideTests {
    @Test("the target lines name Tapedeck's products by the package's identity, and a tapedeck of its own is offered")
    func outsideLines() throws {
        let lines = Scaffold.registration(kind: .encoder, name: try ScaffoldName("WavPack"), tapedeckPackage: "tapedeck")
        #expect(lines.package.count == 2)
        #expect(lines.package[0].contains(".product(name: \"TapedeckCore\", package: \"tapedeck\")"))
        #expect(lines.package[1].contains(".product(name: \"TapedeckTesting\", package: \"tapedeck\")"))
        #expect(!lines.package.joined().contains("swiftSettings: swiftSettings"), "an outside package has no swiftSettings constant")
        #expect(lines.catalog.last == "await TapedeckCLI.main(catalog: .builtIn.adding(encoders: [WavPackPlugin.encoder], decoders: [WavPackPlugin.decoder]))")
        let target = Scaffold.executableTarget(named: "tapedeck-wavpack", modules: ["TapedeckWavPack"], tapedeckPackage: "tapedeck")
        #expect(target.hasPrefix(".executableTarget(name: \"tapedeck-wavpack\", dependencies: [\"TapedeckWavPack\", .product(name: \"TapedeckCommandLine\", package: \"tapedeck\")"))
        let store = Scaffold.registration(kind: .storage, name: try ScaffoldName("LabStore"), tapedeckPackage: "tapedeck")
        #expect(store.catalog.last == "await TapedeckCLI.main(catalog: .builtIn.adding(storage: [LabStoreStoragePlugin.storage]))")
    }
}
