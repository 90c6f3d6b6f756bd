import Foundation
import Testing
import TapedeckCore
@testable import TapedeckWAV

@Suite("WAV errors")
struct WAVErrorTests {
    static let garbage: [(name: String, bytes: [UInt8])] = [
        ("too short", Array("RIFF".utf8)),
        ("not RIFF", [UInt8](repeating: 0x42, count: 200)),
        ("no fmt chunk", Array("RIFF".utf8) + [100, 0, 0, 0] + Array("WAVEdata".utf8) + [4, 0, 0, 0, 1, 2, 3, 4]),
        ("no data chunk", Array("RIFF".utf8) + [28, 0, 0, 0] + Array("WAVEfmt ".utf8)
            + [16, 0, 0, 0, 1, 0, 2, 0, 0x44, 0xAC, 0, 0, 0x10, 0xB1, 2, 0, 4, 0, 16, 0]),
        ("fmt past the end", Array("RIFF".utf8) + [28, 0, 0, 0] + Array("WAVEfmt ".utf8) + [0xFF, 0xFF, 0, 0, 1, 0]),
    ]

    @Test("damaged files are reported as corrupt, naming the file", arguments: garbage.map(\.name))
    func corrupt(name: String) throws {
        let dir = try WAVTestSupport.makeTempDirectory()
        defer { WAVTestSupport.cleanUp(dir) }
        let url = dir.appendingPathComponent("bad.wav")
        let bytes = try #require(Self.garbage.first { $0.name == name }).bytes
        try Data(bytes).write(to: url)

        let repairError = WAVTestSupport.error { _ = try WAVEncoder().repair(fileAt: url) }
        #expect(repairError?.code == TapedeckError.Code.corruptFile, "\(String(describing: repairError))")
        #expect(repairError?.message.contains(url.path) == true)
        let readError = WAVTestSupport.error { _ = try WAVDecoder().openReader(at: url) }
        // Bytes that do not even begin as a sound file are not a format Tapedeck reads (65);
        // a sound file that cannot be opened is damaged (74).
        let expected: TapedeckError.Code = name == "not RIFF" ? .unsupportedFormat : .corruptFile
        #expect(readError?.code == expected, "\(String(describing: readError))")
        #expect(readError?.message.contains(url.path) == true)
    }

    @Test("missing files are not found")
    func missing() throws {
        let dir = try WAVTestSupport.makeTempDirectory()
        defer { WAVTestSupport.cleanUp(dir) }
        let url = dir.appendingPathComponent("nothing.wav")
        #expect(WAVTestSupport.error { _ = try WAVDecoder().openReader(at: url) }?.code == TapedeckError.Code.notFound)
        #expect(WAVTestSupport.error { _ = try WAVEncoder().repair(fileAt: url) }?.code == TapedeckError.Code.notFound)
    }

    @Test("makeWriter never overwrites an existing file")
    func refusesToOverwrite() throws {
        let dir = try WAVTestSupport.makeTempDirectory()
        defer { WAVTestSupport.cleanUp(dir) }
        let url = dir.appendingPathComponent("exists.wav")
        try Data("precious".utf8).write(to: url)
        let error = WAVTestSupport.error {
            _ = try WAVEncoder().makeWriter(at: url, format: .cdStereo, metadata: WAVTestSupport.metadata)
        }
        #expect(error?.code == TapedeckError.Code.alreadyExists)
        #expect(try Data(contentsOf: url) == Data("precious".utf8))
    }

    @Test("formats out of range are refused before a file is created")
    func refusesBadFormats() throws {
        let dir = try WAVTestSupport.makeTempDirectory()
        defer { WAVTestSupport.cleanUp(dir) }
        let url = dir.appendingPathComponent("never.wav")
        for format in [AudioFormat(sampleRate: 4_000, channels: 2, sampleFormat: .s16),
                       AudioFormat(sampleRate: 48_000, channels: 33, sampleFormat: .s16)] {
            let error = WAVTestSupport.error {
                _ = try WAVEncoder().makeWriter(at: url, format: format, metadata: WAVTestSupport.metadata)
            }
            #expect(error?.code == TapedeckError.Code.invalidArgument)
        }
        #expect(!FileManager.default.fileExists(atPath: url.path))
        #expect(throws: Never.self) { try WAVEncoder().validate(AudioFormat(sampleRate: 192_000, channels: 32, sampleFormat: .f32)) }
    }
}
