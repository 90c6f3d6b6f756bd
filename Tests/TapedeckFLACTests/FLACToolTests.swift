import Foundation
import Testing
import TapedeckCore
import TapedeckTesting
@testable import TapedeckFLAC

/// Checks files Tapedeck writes with tools that are not Tapedeck: flac, metaflac and sox.
@Suite("FLAC files checked by flac, metaflac and sox")
struct FLACToolTests {
    let format = AudioFormat(sampleRate: 48_000, channels: 2, sampleFormat: .s24)

    @Test func flacTestMetaflacAndSoxAgree() throws {
        let dir = try FLACTestSupport.makeTempDirectory()
        defer { FLACTestSupport.cleanUp(dir) }
        let url = dir.appendingPathComponent("take.flac")
        let source = FLACTestSupport.render(format: format, frames: 48_000)
        #expect(try FLACTestSupport.writeTake(source, at: url, format: format) == 48_000)

        let test = try FLACTestSupport.run(["flac", "-t", "-s", url.path])
        #expect(test.status == 0, "flac -t: \(test.stderr)")

        let tags = try FLACTestSupport.run(["metaflac", "--export-tags-to=-", url.path]).text
            .split(separator: "\n").map(String.init)
        #expect(tags == ["TITLE=Take 1", "ALBUM=Tests", "TRACKNUMBER=3", "DATE=2023-11-14T22:13:20Z",
                         "DESCRIPTION=from the FLAC tests", "ENCODER=\(FLACTags.encoderTag)"])
        #expect(FLACTags.encoderTag.hasPrefix("Tapedeck \(TapedeckVersion.string) (libFLAC 1."))

        let total = try FLACTestSupport.run(["metaflac", "--show-total-samples", url.path]).text
        #expect(total.trimmingCharacters(in: .whitespacesAndNewlines) == "48000")
        let md5 = try FLACTestSupport.run(["metaflac", "--show-md5sum", url.path]).text.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(md5 != String(repeating: "0", count: 32))
        #expect(md5 == FLACTestSupport.md5Hex(source))
        let list = try FLACTestSupport.run(["metaflac", "--list", "--block-type=PADDING", url.path]).text
        #expect(list.contains("type: 1 (PADDING)") && list.contains("length: 8192"))

        let sox = try FLACTestSupport.run(["sox", url.path, "-t", "raw", "-"])
        #expect(sox.status == 0, "sox: \(sox.stderr)")
        #expect(firstDifference([UInt8](sox.stdout), source) == nil)
        // The same signature, computed by md5sum over sox's raw output.
        let raw = dir.appendingPathComponent("take.raw")
        try sox.stdout.write(to: raw)
        let md5sum = try FLACTestSupport.run(["md5sum", raw.path]).text.prefix(32)
        #expect(String(md5sum) == md5)

        let summary = try FLACEncoder.verifyFile(at: url)
        #expect(summary.frames == 48_000 && summary.format == format && summary.md5 == md5)
        #expect(summary.tags["TITLE"] == "Take 1" && summary.tags.count == 6)
    }

    @Test("verification while writing: off by default, on by the setting (libFLAC's verify mode) or by the caller (on every encoding thread)")
    func verificationWhileWriting() throws {
        let dir = try FLACTestSupport.makeTempDirectory()
        defer { FLACTestSupport.cleanUp(dir) }
        let source = FLACTestSupport.render(format: format, frames: 30_000)
        let cases: [(FLACEncoder, WriterOptions, String?)] = [
            (FLACEncoder(), WriterOptions(), nil),
            (FLACEncoder(settings: FLACSettings(verify: true)), WriterOptions(), "libFLAC's verify mode"),
            (FLACEncoder(), WriterOptions(threads: 2, verifyWhileWriting: true), "verify mode on 2 threads"),
            (FLACEncoder(), WriterOptions(threads: 1, verifyWhileWriting: true), "libFLAC's verify mode"),
        ]
        for (n, (encoder, options, how)) in cases.enumerated() {
            let url = dir.appendingPathComponent("v\(n).flac")
            let writer = try encoder.makeWriter(at: url, format: format, metadata: FLACTestSupport.metadata, options: options)
            #expect(writer.verifiesOutput == (how != nil))
            try FLACTestSupport.write(source, to: writer, format: format)
            #expect(try writer.finish() == 30_000)
            if let how {
                #expect(writer.verification?.contains(how) == true, "\(writer.verification ?? "nil")")
            } else {
                #expect(writer.verification == nil)
            }
            // Verified or not, the file carries the MD5 of the input, which flac -t checks.
            #expect(try FLACTestSupport.run(["flac", "-t", "-s", url.path]).status == 0)
            #expect(try FLACEncoder.verifyFile(at: url).md5 == FLACTestSupport.md5Hex(source))
        }
    }

    @Test func fiveTagsWithoutNotesAndNoPaddingWhenZero() throws {
        let dir = try FLACTestSupport.makeTempDirectory()
        defer { FLACTestSupport.cleanUp(dir) }
        let url = dir.appendingPathComponent("plain.flac")
        var metadata = FLACTestSupport.metadata
        metadata.notes = ""
        let f16 = AudioFormat.cdStereo
        try FLACTestSupport.writeTake(FLACTestSupport.render(format: f16, frames: 5_000), at: url, format: f16,
                                      metadata: metadata, encoder: FLACEncoder(settings: FLACSettings(level: 8, verify: false, padding: 0)))
        let tags = try FLACTestSupport.run(["metaflac", "--export-tags-to=-", url.path]).text.split(separator: "\n")
        #expect(tags.map { String($0.split(separator: "=")[0]) } == ["TITLE", "ALBUM", "TRACKNUMBER", "DATE", "ENCODER"])
        let list = try FLACTestSupport.run(["metaflac", "--list", url.path]).text
        #expect(!list.contains("PADDING"))
        #expect(try FLACTestSupport.run(["flac", "-t", "-s", url.path]).status == 0)
    }

    @Test func refusesFloatAndTooManyChannels() {
        let encoder = FLACEncoder()
        do {
            try encoder.validate(AudioFormat(sampleRate: 48_000, channels: 2, sampleFormat: .f32))
            Issue.record("f32 accepted")
        } catch let error as TapedeckError {
            #expect(error.code == .unsupportedFormat)
            #expect(error.message.contains("s16") && error.message.contains("s24"))
        } catch { Issue.record("\(error)") }
        #expect(throws: TapedeckError.self) {
            try encoder.validate(AudioFormat(sampleRate: 48_000, channels: 9, sampleFormat: .s16))
        }
        #expect(throws: Never.self) { try encoder.validate(AudioFormat(sampleRate: 192_000, channels: 8, sampleFormat: .s32)) }
    }

    @Test func pluginDeclaresSettings() throws {
        let plugin = FLACPlugin.encoder
        #expect(plugin.name == "flac" && plugin.settings.map(\.key) == ["level", "verify", "padding"])
        let settings = try PluginSettings.resolving(plugin.settings, overrides: ["level": "8", "padding": "0"])
        let made = try plugin.make(settings, PluginContext(logger: .init(label: "t"), defaultLibraryURL: URL(fileURLWithPath: "/tmp")))
        let encoder = try #require(made as? FLACEncoder)
        #expect(encoder.level == 8 && encoder.paddingBytes == 0 && !encoder.verify)
        #expect(FLACPlugin.decoder.name == "flac")
    }

    @Test func md5KnownVectorsAndMd5sum() throws {
        #expect(FLACTestSupport.md5Hex([]) == "d41d8cd98f00b204e9800998ecf8427e")
        #expect(FLACTestSupport.md5Hex(Array("abc".utf8)) == "900150983cd24fb0d6963f7d28e17f72")
        #expect(FLACTestSupport.md5Hex(Array("The quick brown fox jumps over the lazy dog".utf8)) == "9e107d9d372bb6826bd81d3542a419d6")
        let dir = try FLACTestSupport.makeTempDirectory()
        defer { FLACTestSupport.cleanUp(dir) }
        let bytes = (0..<100_003).map { UInt8(truncatingIfNeeded: $0 &* 7919 &+ $0 >> 8) }
        let url = dir.appendingPathComponent("bytes")
        try Data(bytes).write(to: url)
        // Fed in uneven pieces, the streaming digest must equal md5sum's.
        var md5 = MD5()
        var i = 0, step = 1
        while i < bytes.count {
            let n = min(step, bytes.count - i)
            bytes.withUnsafeBytes { md5.update($0.baseAddress! + i, count: n) }
            i += n
            step = step * 2 + 1
        }
        let expected = try FLACTestSupport.run(["md5sum", url.path]).text.prefix(32)
        #expect(MD5.hex(md5.finalize()) == String(expected))
    }
}
