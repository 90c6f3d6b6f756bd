import Foundation
import SunAU
import TapedeckCore
import TapedeckTesting
import Testing

/// Tapedeck's encoder conformance suite on the `au` codec: the contract every encoder keeps
/// (bit-exact round trip, an empty take, never overwriting, repairing what a killed writer left).
@Suite("Sun/NeXT audio codec")
struct SunAUConformanceTests {
    static let formats: [AudioFormat] = [
        AudioFormat(sampleRate: 44_100, channels: 2, sampleFormat: .s16),
        AudioFormat(sampleRate: 48_000, channels: 1, sampleFormat: .s24),
        AudioFormat(sampleRate: 96_000, channels: 6, sampleFormat: .s32),
        AudioFormat(sampleRate: 48_000, channels: 2, sampleFormat: .f32),
    ]

    @Test("the shared encoder suite passes", arguments: formats)
    func suite(format: AudioFormat) throws {
        let dir = try Self.folder()
        defer { try? FileManager.default.removeItem(at: dir) }
        let codec = SunAUCodec()
        try EncoderConformance.roundTrip(encoder: codec, decoder: codec, format: format, frames: 30_000, in: dir)
        try EncoderConformance.zeroFrames(encoder: codec, decoder: codec, format: format, in: dir)
        try EncoderConformance.refusesOverwrite(encoder: codec, format: format, in: dir)
        try EncoderConformance.repairsAbandonedFile(encoder: codec, decoder: codec, format: format, in: dir)
    }

    @Test("files that are not AU, or are damaged, are refused with the file's name")
    func refusesDamage() throws {
        let dir = try Self.folder()
        defer { try? FileManager.default.removeItem(at: dir) }
        let codec = SunAUCodec()
        let cases: [String: [UInt8]] = [
            "short.au": Array(".snd".utf8),
            "wav.au": Array("RIFF\0\0\0\0WAVEfmt \0\0\0\0\0\0\0\0\0\0\0\0".utf8),
            "offset.au": Array(".snd".utf8) + [0xFF, 0xFF, 0xFF, 0xFF] + [UInt8](repeating: 0, count: 16),
            "mulaw.au": Array(".snd".utf8) + [0, 0, 0, 24, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0x1F, 0x40, 0, 0, 0, 1],
            "rate.au": Array(".snd".utf8) + [0, 0, 0, 24, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 1],
        ]
        for (name, bytes) in cases {
            let url = dir.appendingPathComponent(name)
            try Data(bytes).write(to: url)
            let error = #expect(throws: TapedeckError.self) { _ = try codec.openReader(at: url) }
            #expect(error?.message.contains(url.path) == true, "\(name): \(String(describing: error))")
            #expect(!codec.canRead(url))
        }
    }
}

extension SunAUConformanceTests {
    static func folder() throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("sunau-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir
    }
}
