import Foundation
import TapedeckCore
import TapedeckTesting
import TapedeckOpus
import Testing

@Suite("Opus encoder conformance")
struct OpusConformanceTests {
    static let formats: [AudioFormat] = [
        AudioFormat(sampleRate: 48_000, channels: 2, sampleFormat: .s16),
        AudioFormat(sampleRate: 44_100, channels: 1, sampleFormat: .s24),
        AudioFormat(sampleRate: 96_000, channels: 2, sampleFormat: .f32),
    ]

    func dir() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("opus-conf-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    @Test("the shared suite for lossy encoders passes: length, frequency and level survive; no overwrite; a killed file is repaired",
          arguments: formats)
    func suite(format: AudioFormat) throws {
        let dir = try dir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let codec = OpusEncoder()
        try EncoderConformance.lossyRoundTrip(encoder: codec, decoder: codec, format: format, seconds: 2, in: dir)
        try EncoderConformance.refusesOverwrite(encoder: codec, format: format, in: dir)
        try EncoderConformance.zeroFrames(encoder: codec, decoder: codec, format: format, in: dir)
        try EncoderConformance.lossyRepair(encoder: codec, decoder: codec, format: format, maxLossSeconds: 0.5, in: dir)
    }

    @Test("opusdec, an independent decoder, reads what the encoder writes, with its tags")
    func independentDecoder() throws {
        let dir = try dir()
        let url = dir.appendingPathComponent("take.opus")
        let format = AudioFormat(sampleRate: 48_000, channels: 2, sampleFormat: .s16)
        let writer = try OpusEncoder().makeWriter(at: url, format: format,
            metadata: TakeMetadata(takeName: "Opening", sessionName: "Rehearsal", takeNumber: 3, startDate: Date()))
        let silence = [UInt8](repeating: 0, count: 48_000 * 4)
        try silence.withUnsafeBytes { try writer.write($0.baseAddress!, frames: 48_000) }
        _ = try writer.finish()
        let out = dir.appendingPathComponent("decoded.wav")
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["opusdec", "--quiet", url.path, out.path]
        let err = Pipe()
        p.standardError = err
        try p.run()
        let message = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        #expect(p.terminationStatus == 0, "\(message)")
        let size = (try FileManager.default.attributesOfItem(atPath: out.path)[.size] as? Int) ?? 0
        #expect(size >= 44 + 48_000 * 4 && size <= 44 + 48_000 * 4 + 1000, "opusdec wrote \(size) bytes for 1 s of stereo")
        let info = Process()
        info.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        info.arguments = ["opusinfo", url.path]
        let o = Pipe()
        info.standardOutput = o
        try info.run()
        let text = String(decoding: o.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        info.waitUntilExit()
        #expect(text.contains("TITLE=Opening") && text.contains("ALBUM=Rehearsal"), "\(text)")
    }

    @Test("more than two channels is refused with what to do")
    func channels() {
        #expect(throws: TapedeckError.self) { try OpusEncoder().validate(AudioFormat(sampleRate: 48_000, channels: 6, sampleFormat: .s16)) }
    }
}
