import Foundation
import Testing

/// `export --format F` sets the encoder up as the configuration says for F, whatever encoder the
/// library records with (`encoder.name`).
@Suite("export with the configured settings of its format", .endToEnd)
struct ExportSettingsEndToEndTests {
    @Test("encoder.flac.padding from --set and from a config file reaches a FLAC export of a WAV library")
    func otherEncodersSettings() async throws {
        let cli = try CLIHarness()
        defer { try? FileManager.default.removeItem(at: cli.library) }
        #expect(try await cli.run("record", "--set", "capture.null.paced=false", "1s").status == 0)
        let folder = cli.library.appendingPathComponent("out")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        func size(_ name: String, _ settings: [String]) async throws -> Int {
            let path = folder.appendingPathComponent(name).path
            let r = try await cli.run(["export", "last", "--format", "flac", "-o", path] + settings)
            #expect(r.status == 0, "\(r.stderr)")
            return try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int ?? 0
        }
        let plain = try await size("plain.flac", [])
        let none = try await size("none.flac", ["--set", "encoder.flac.padding=0"])
        let more = try await size("more.flac", ["--set", "encoder.flac.padding=100000"])
        // The default keeps 8192 bytes of PADDING (the tags written at the end take some of it).
        #expect(plain - none > 7_000, "padding 0: \(none) bytes, default: \(plain)")
        #expect(more - plain == 100_000 - 8192, "padding 100000: \(more) bytes, default: \(plain)")
        // The configuration shows the setting with where it came from.
        let show = try await cli.run("config", "show", "--set", "encoder.flac.padding=0")
        #expect(show.stdout.contains("encoder.flac.padding") && show.stdout.contains("[--set]"), "\(show.stdout)")
    }
}
