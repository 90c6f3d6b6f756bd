import Foundation
import Testing
import TapedeckCore
import TapedeckTesting
import TapedeckWAV
@testable import TapedeckFLAC

@Suite("FLAC decoder on files Tapedeck did not write")
struct FLACDecoderTests {
    static let cases: [(rate: Int, channels: Int, bits: Int)] = [(44_100, 2, 16), (96_000, 6, 24), (22_050, 1, 16)]

    @Test(arguments: 0..<3)
    func decodesFilesMadeByTheFlacTool(index: Int) throws {
        let (rate, channels, bits) = Self.cases[index]
        let dir = try FLACTestSupport.makeTempDirectory()
        defer { FLACTestSupport.cleanUp(dir) }
        let wav = dir.appendingPathComponent("in.wav"), flac = dir.appendingPathComponent("in.flac")
        let sox = try FLACTestSupport.run(["sox", "-n", "-r", "\(rate)", "-c", "\(channels)", "-b", "\(bits)", wav.path,
                                           "synth", "0.7", "sine", "440", "brownnoise", "gain", "-3"])
        #expect(sox.status == 0, "sox: \(sox.stderr)")
        #expect(try FLACTestSupport.run(["flac", "-s", "-6", "-o", flac.path, wav.path]).status == 0)

        let reference = try WAVDecoder().openReader(at: wav)
        var expected = [UInt8](repeating: 0, count: Int(reference.frameCount) * reference.format.bytesPerFrame)
        let n = try expected.withUnsafeMutableBytes { try reference.read(into: $0.baseAddress!, maxFrames: Int(reference.frameCount)) }
        reference.close()
        #expect(Int64(n) == reference.frameCount)

        let decoded = try FLACTestSupport.readAll(flac, chunkFrames: 1234)
        #expect(decoded.format == reference.format)
        #expect(decoded.frameCount == reference.frameCount)
        #expect(firstDifference(decoded.bytes, expected) == nil)
        #expect(try FLACEncoder.verifyFile(at: flac).frames == reference.frameCount)
    }

    /// Encode speed against the flac tool, 60 s of 48 kHz 24-bit stereo sine + noise at level 5.
    /// Run with TAPEDECK_FLAC_BENCH=1 (best in a release build).
    @Test(.enabled(if: ProcessInfo.processInfo.environment["TAPEDECK_FLAC_BENCH"] == "1"))
    func encodeSpeedAgainstFlacTool() throws {
        let dir = try FLACTestSupport.makeTempDirectory()
        defer { FLACTestSupport.cleanUp(dir) }
        let format = AudioFormat(sampleRate: 48_000, channels: 2, sampleFormat: .s24)
        let source = FLACTestSupport.render(format: format, frames: 60 * 48_000)
        let wav = dir.appendingPathComponent("bench.wav")
        let wavWriter = try WAVEncoder().makeWriter(at: wav, format: format, metadata: FLACTestSupport.metadata)
        try FLACTestSupport.write(source, to: wavWriter, format: format, chunkFrames: 4800)
        _ = try wavWriter.finish()

        let clock = ContinuousClock()
        let t0 = clock.now
        do {
            let reader = try WAVDecoder().openReader(at: wav)
            defer { reader.close() }
            let writer = try FLACEncoder(settings: FLACSettings(level: 5, verify: true)).makeWriter(at: dir.appendingPathComponent("ours.flac"), format: format,
                                                               metadata: FLACTestSupport.metadata)
            var buffer = [UInt8](repeating: 0, count: 4800 * format.bytesPerFrame)
            while true {
                let n = try buffer.withUnsafeMutableBytes { try reader.read(into: $0.baseAddress!, maxFrames: 4800) }
                if n == 0 { break }
                try buffer.withUnsafeBytes { try writer.write($0.baseAddress!, frames: n) }
            }
            _ = try writer.finish()
        }
        let ours = clock.now - t0
        let t1 = clock.now
        let status = try FLACTestSupport.run(["flac", "-5", "-f", "-s", "-o", dir.appendingPathComponent("tool.flac").path, wav.path]).status
        let tool = clock.now - t1
        #expect(status == 0)
        let oursSize = try FileManager.default.attributesOfItem(atPath: dir.appendingPathComponent("ours.flac").path)[.size] as? Int ?? 0
        let toolSize = try FileManager.default.attributesOfItem(atPath: dir.appendingPathComponent("tool.flac").path)[.size] as? Int ?? 0
        print("BENCH encode 60 s 48k/24/2 level 5: Tapedeck (verify on) \(ours), flac -5 -f \(tool); sizes \(oursSize) vs \(toolSize)")
    }
}
