import Foundation
import TapedeckTesting
import Testing

/// A take's channel layout (which speaker each channel feeds) is read on import, stored, shown,
/// and written on every export, in both stores. Checked with independent readers: a Python
/// parser of the WAVE header, and the `flac` and `metaflac` tools.
@Suite("channel layouts end to end", .endToEnd, .serialized)
struct ChannelLayoutEndToEndTests {
    static let helper = CLIHarness.packageRoot.appendingPathComponent("Tests/tapedeckTests/channel_mask.py").path

    static func folder() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-layout-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    /// The WAVE mask of `path` as the helper prints it (`0x3F`, or `plain`), after checking that
    /// no channel moved.
    static func wavMask(_ path: String, ordered: Bool = true, sourceLocation: SourceLocation = #_sourceLocation) async throws -> String {
        let r = try await CLIHarness.tool("python3", [helper, "mask", path] + (ordered ? [] : ["--any-content"]))
        #expect(r.status == 0, "\(r.stdout) \(r.stderr)", sourceLocation: sourceLocation)
        return r.stdout.split(separator: "\n").first.map(String.init) ?? ""
    }

    static func flacTags(_ path: String) async throws -> String {
        try await CLIHarness.tool("metaflac", ["--export-tags-to=-", path]).stdout
    }

    @Test("5.1 with back surrounds, 2.1 and 5.1 with side surrounds survive import and export to FLAC and WAV",
          arguments: ["directory", "bundle"])
    func layoutsRoundTrip(storage: String) async throws {
        let cli = try CLIHarness(storage: storage)
        let dir = try Self.folder()
        defer { try? FileManager.default.removeItem(at: dir) }
        let cases: [(name: String, channels: Int, mask: String, label: String)] = [
            ("back51", 6, "0x3F", "5.1"), ("two1", 3, "0xB", "2.1"), ("side51", 6, "0x60F", "5.1(side)"),
        ]
        for c in cases {
            let source = dir.appendingPathComponent("\(c.name).wav").path
            #expect(try await CLIHarness.tool("python3", [Self.helper, "make", source, "\(c.channels)", c.mask]).status == 0)
            let imported = try await cli.run("import", source, "--session", "Layouts")
            #expect(imported.status == 0, "\(imported.stderr)")
            let show = try await cli.run("show", "last", "--json")
            let json = try #require(try JSONSerialization.jsonObject(with: Data(show.stdout.utf8)) as? [String: Any])
            let format = try #require(json["format"] as? [String: Any])
            #expect(format["channelMask"] as? Int == Int(c.mask.dropFirst(2), radix: 16), "\(c.name): \(format)")
            #expect(format["channelLayout"] as? String == c.label)
            #expect(try await cli.run("show", "last").stdout.contains("Channels:  \(c.label):"))

            let out = dir.appendingPathComponent("out-\(c.name)")
            try FileManager.default.createDirectory(at: out, withIntermediateDirectories: true)
            for fmt in ["flac", "wav"] {
                let r = try await cli.run("export", "last", "--format", fmt, "-o", out.path)
                #expect(r.status == 0, "\(c.name) \(fmt): \(r.stderr)")
            }
            let files = try FileManager.default.contentsOfDirectory(atPath: out.path).sorted()
            let flac = out.appendingPathComponent(try #require(files.first { $0.hasSuffix(".flac") })).path
            let wav = out.appendingPathComponent(try #require(files.first { $0.hasSuffix(".wav") })).path
            let hex = String(Int(c.mask.dropFirst(2), radix: 16)!, radix: 16, uppercase: true)
            let tag = "WAVEFORMATEXTENSIBLE_CHANNEL_MASK=0x" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
            let tags = try await Self.flacTags(flac)
            #expect(tags.contains(tag), "\(c.name): \(tags)")
            #expect(try await Self.wavMask(wav) == c.mask, "\(c.name): WAV export")
            // The flac tool decodes the tag back into the WAV header.
            let decoded = dir.appendingPathComponent("\(c.name)-decoded.wav").path
            #expect(try await CLIHarness.tool("flac", ["-d", "-s", "-f", flac, "-o", decoded]).status == 0)
            #expect(try await Self.wavMask(decoded) == c.mask, "\(c.name): flac -d of the export")

            // A FLAC from the flac tool (tag from the WAV's mask) is read with its layout too.
            let fromTool = dir.appendingPathComponent("\(c.name)-tool.flac").path
            if try await CLIHarness.tool("flac", ["-s", "-f", source, "-o", fromTool]).status != 0 {
                // The flac tool refuses masks outside its own list (2.1): tag the file by hand.
                #expect(try await CLIHarness.tool("flac", ["-s", "-f", "--channel-map=none", "-T", tag, source, "-o", fromTool]).status == 0)
            }
            #expect(try await cli.run("import", fromTool, "--session", "Layouts").status == 0)
            let again = try await cli.run("show", "last", "--json").stdout
            #expect(again.contains("\"channelMask\" : \(Int(c.mask.dropFirst(2), radix: 16)!)"), "\(c.name): \(again)")
        }
        #expect(try await cli.run("doctor").status == 0)
    }

    @Test("conventional layouts stay plain: stereo is a 16-byte fmt, mono too, and 6 recorded channels say 5.1 in FLAC")
    func conventional() async throws {
        let cli = try CLIHarness()
        let dir = try Self.folder()
        defer { try? FileManager.default.removeItem(at: dir) }
        #expect(try await cli.run("record", "0.2", "--set", "format.channels=2", "-o", dir.appendingPathComponent("st.wav").path).status == 0)
        #expect(try await Self.wavMask(dir.appendingPathComponent("st.wav").path, ordered: false) == "plain")
        #expect(try await cli.run("record", "0.2", "--set", "format.channels=6", "--set", "encoder.name=flac").status == 0)
        let show = try await cli.run("show", "last").stdout
        #expect(show.contains("Channels:  5.1: FL FR FC LFE BL BR"), "\(show)")
        let out = dir.appendingPathComponent("out")
        try FileManager.default.createDirectory(at: out, withIntermediateDirectories: true)
        #expect(try await cli.run("export", "last", "-o", out.path).status == 0)
        let flac = try #require(try FileManager.default.contentsOfDirectory(atPath: out.path).first)
        #expect(try await Self.flacTags(out.appendingPathComponent(flac).path).contains("WAVEFORMATEXTENSIBLE_CHANNEL_MASK=0x003F"))
        // A mono WAVEX saying "front centre" is the conventional mono: stored and exported plain.
        let mono = dir.appendingPathComponent("mono.wav").path
        #expect(try await CLIHarness.tool("python3", [Self.helper, "make", mono, "1", "0x4"]).status == 0)
        #expect(try await cli.run("import", mono).status == 0)
        #expect(try await cli.run("export", "last", "--format", "wav", "-o", out.path).status == 0)
        let wav = try #require(try FileManager.default.contentsOfDirectory(atPath: out.path).first { $0.hasSuffix(".wav") })
        #expect(try await Self.wavMask(out.appendingPathComponent(wav).path) == "plain")
    }
}
