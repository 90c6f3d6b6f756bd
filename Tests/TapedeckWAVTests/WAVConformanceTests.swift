import Foundation
import TapedeckCore
import TapedeckTesting
import TapedeckWAV
import Testing

@Suite("WAV encoder conformance")
struct WAVConformanceTests {
    static let formats: [AudioFormat] = [
        AudioFormat(sampleRate: 44_100, channels: 2, sampleFormat: .s16),
        AudioFormat(sampleRate: 48_000, channels: 1, sampleFormat: .s24),
        AudioFormat(sampleRate: 96_000, channels: 8, sampleFormat: .s32),
        AudioFormat(sampleRate: 48_000, channels: 2, sampleFormat: .f32),
    ]

    @Test("the shared encoder suite passes", arguments: formats)
    func suite(format: AudioFormat) throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("wav-conf-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        try EncoderConformance.roundTrip(encoder: WAVEncoder(), decoder: WAVDecoder(), format: format, frames: 30_000, in: dir)
        try EncoderConformance.refusesOverwrite(encoder: WAVEncoder(), format: format, in: dir)
        try EncoderConformance.zeroFrames(encoder: WAVEncoder(), decoder: WAVDecoder(), format: format, in: dir)
        try EncoderConformance.repairsAbandonedFile(encoder: WAVEncoder(), decoder: WAVDecoder(), format: format, in: dir)
    }
}
