import Foundation
import TapedeckCore
import TapedeckTesting
import TapedeckSndfileFormats
import Testing

@Suite("MP3, Vorbis and AIFF encoder conformance")
struct SndfileFormatsConformanceTests {
    static let formats: [AudioFormat] = [
        AudioFormat(sampleRate: 44_100, channels: 2, sampleFormat: .s16),
        AudioFormat(sampleRate: 48_000, channels: 1, sampleFormat: .s24),
        AudioFormat(sampleRate: 48_000, channels: 2, sampleFormat: .f32),
    ]

    func dir() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("sndfile-formats-conf-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    @Test("AIFF passes the shared encoder suite: bit-exact, no overwrite, an empty take, a killed file repaired", arguments: formats + [
        AudioFormat(sampleRate: 96_000, channels: 6, sampleFormat: .s32),
    ])
    func aiff(format: AudioFormat) throws {
        let dir = try dir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let codec = SndfileFormatEncoder(.aiff)
        try EncoderConformance.roundTrip(encoder: codec, decoder: codec, format: format, frames: 30_000, in: dir)
        try EncoderConformance.refusesOverwrite(encoder: codec, format: format, in: dir)
        try EncoderConformance.zeroFrames(encoder: codec, decoder: codec, format: format, in: dir)
        try EncoderConformance.repairsAbandonedFile(encoder: codec, decoder: codec, format: format, in: dir)
    }

    @Test("MP3 and Vorbis pass the shared suite for lossy encoders: length, frequency and level survive; no overwrite; a killed file is kept",
          arguments: [SndfileContainer.mp3, .vorbis], formats)
    func lossy(container: SndfileContainer, format: AudioFormat) throws {
        let dir = try dir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let codec = SndfileFormatEncoder(container, level: container == .mp3 ? 0.3 : 0.5)
        try EncoderConformance.lossyRoundTrip(encoder: codec, decoder: codec, format: format, seconds: 2, in: dir)
        try EncoderConformance.refusesOverwrite(encoder: codec, format: format, in: dir)
        try EncoderConformance.zeroFrames(encoder: codec, decoder: codec, format: format, in: dir)
        try EncoderConformance.lossyRepair(encoder: codec, decoder: codec, format: format, maxLossSeconds: 0.5, in: dir)
    }

    @Test("a hostile AIFF (a sample rate that is infinity, audio said to start past the end) is refused by repair, never a trap or a grown file")
    func hostileAIFF() throws {
        let dir = try dir()
        defer { try? FileManager.default.removeItem(at: dir) }
        func be32(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
        for (name, rate, offset) in [("inf", [UInt8](arrayLiteral: 0x7F, 0xFF) + [UInt8](repeating: 0, count: 8), UInt32(0)),
                                     ("offset", [0x40, 0x0E, 0xBB, 0x80, 0, 0, 0, 0, 0, 0], UInt32(0xFFFF_0000))] {
            let comm: [UInt8] = Array("COMM".utf8) + be32(18) + [0, 2] + be32(10) + [0, 16] + rate
            let ssnd: [UInt8] = Array("SSND".utf8) + be32(8 + 40) + be32(offset) + be32(0) + [UInt8](repeating: 1, count: 40)
            let body = Array("AIFF".utf8) + comm + ssnd
            let url = dir.appendingPathComponent("\(name).aiff")
            try Data(Array("FORM".utf8) + be32(UInt32(body.count)) + body).write(to: url)
            let size = try FileManager.default.attributesOfItem(atPath: url.path)[.size] as? Int
            #expect(throws: TapedeckError.self) { _ = try SndfileFormatEncoder(.aiff).repair(fileAt: url) }
            #expect(try FileManager.default.attributesOfItem(atPath: url.path)[.size] as? Int == size, "\(name): the file is as it was")
        }
    }

    @Test("MP3 refuses what it cannot hold, saying what to do")
    func mp3Limits() {
        let codec = SndfileFormatEncoder(.mp3)
        #expect(throws: TapedeckError.self) { try codec.validate(AudioFormat(sampleRate: 96_000, channels: 2, sampleFormat: .s16)) }
        #expect(throws: TapedeckError.self) { try codec.validate(AudioFormat(sampleRate: 48_000, channels: 6, sampleFormat: .s16)) }
    }
}
