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

    @Test("MP3 refuses what it cannot hold, saying what to do")
    func mp3Limits() {
        let codec = SndfileFormatEncoder(.mp3)
        #expect(throws: TapedeckError.self) { try codec.validate(AudioFormat(sampleRate: 96_000, channels: 2, sampleFormat: .s16)) }
        #expect(throws: TapedeckError.self) { try codec.validate(AudioFormat(sampleRate: 48_000, channels: 6, sampleFormat: .s16)) }
    }
}
