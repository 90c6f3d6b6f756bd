import Foundation
import TapedeckTesting
import Testing
import TapedeckCore
import TapedeckNull
@testable import TapedeckWAV

@Suite("WAV round trips")
struct WAVRoundTripTests {
    /// Every sample format at 1, 2 and 8 channels and 44.1, 48 and 96 kHz.
    static let formats: [AudioFormat] = SampleFormat.allCases.flatMap { sampleFormat in
        [1, 2, 8].flatMap { channels in
            [44_100, 48_000, 96_000].map { AudioFormat(sampleRate: $0, channels: channels, sampleFormat: sampleFormat) }
        }
    }

    @Test("write then read is bit-exact", arguments: formats)
    func roundTrip(format: AudioFormat) throws {
        let dir = try WAVTestSupport.makeTempDirectory()
        defer { WAVTestSupport.cleanUp(dir) }
        let url = dir.appendingPathComponent("take.wav")
        let frames = 12_345  // odd, so 24-bit mono needs a pad byte
        let bytes = WAVTestSupport.render(.noise(seed: 7, level: 1), format: format, frames: frames)

        let written = try WAVTestSupport.writeTake(bytes, at: url, format: format)
        #expect(written == Int64(frames))

        let read = try WAVTestSupport.readAll(url)
        #expect(read.format == format)
        #expect(read.frameCount == Int64(frames))
        #expect(read.bytes.count == bytes.count)
        #expect(firstDifference(read.bytes, bytes) == nil)
    }

    @Test("the frame counter survives a round trip in every format", arguments: SampleFormat.allCases)
    func frameCounter(sampleFormat: SampleFormat) throws {
        let dir = try WAVTestSupport.makeTempDirectory()
        defer { WAVTestSupport.cleanUp(dir) }
        let url = dir.appendingPathComponent("counter.wav")
        let format = AudioFormat(sampleRate: 48_000, channels: 2, sampleFormat: sampleFormat)
        let bytes = WAVTestSupport.render(.frameCounter, format: format, frames: 40_000)
        try WAVTestSupport.writeTake(bytes, at: url, format: format)
        #expect(firstDifference(try WAVTestSupport.readAll(url, chunkFrames: 4096).bytes, bytes) == nil)
    }

    @Test("checkpoints do not disturb the audio")
    func checkpoints() throws {
        let dir = try WAVTestSupport.makeTempDirectory()
        defer { WAVTestSupport.cleanUp(dir) }
        let url = dir.appendingPathComponent("checkpointed.wav")
        let format = AudioFormat(sampleRate: 48_000, channels: 2, sampleFormat: .s24)
        let bytes = WAVTestSupport.render(.sine(frequency: 997, level: 0.9), format: format, frames: 30_000)
        let writer = try WAVEncoder().makeWriter(at: url, format: format, metadata: WAVTestSupport.metadata)
        let half = 15_000 * format.bytesPerFrame
        try WAVTestSupport.write(Array(bytes[..<half]), to: writer, format: format)
        try writer.checkpoint()
        try WAVTestSupport.write(Array(bytes[half...]), to: writer, format: format)
        try writer.checkpoint()
        #expect(try writer.finish() == 30_000)
        #expect(firstDifference(try WAVTestSupport.readAll(url).bytes, bytes) == nil)
    }

    /// A take that ends before its first frame (a device lost at once, a stop right after the
    /// start): libsndfile leaves the RIFF size of its first header, which ends before `data`.
    @Test("an empty take is a valid file, for libsndfile, python's wave and sox")
    func emptyTake() throws {
        let dir = try WAVTestSupport.makeTempDirectory()
        defer { WAVTestSupport.cleanUp(dir) }
        let url = dir.appendingPathComponent("empty.wav")
        #expect(try WAVTestSupport.writeTake([], at: url, format: .cdStereo) == 0)
        let read = try WAVTestSupport.readAll(url)
        #expect(read.frameCount == 0)
        #expect(read.bytes.isEmpty)
        let bytes = try WAVTestSupport.bytes(of: url)
        #expect(Int(WAVTestSupport.u32(bytes, 4)) == bytes.count - 8, "the RIFF size must cover the whole file")
        let python = try WAVTestSupport.run("python3", ["-c", "import sys, wave; print(wave.open(sys.argv[1]).getnframes())", url.path])
        #expect(python.status == 0 && python.stdout == "0\n", "python's wave: \(python.stderr)")
        let sox = try WAVTestSupport.run("sox", [url.path, "-n"])
        #expect(sox.status == 0 && sox.stderr.isEmpty, "sox: \(sox.stderr)")
    }

    @Test("the plugins describe the encoder and decoder")
    func plugins() {
        #expect(WAVPlugin.encoder.name == "wav")
        #expect(WAVPlugin.decoder.name == "wav")
        #expect(WAVPlugin.encoder.settings.isEmpty)
        #expect(WAVPlugin.decoder.settings.isEmpty)
        #expect(WAVEncoder().name == "wav")
        #expect(WAVEncoder().fileExtension == "wav")
        #expect(WAVDecoder().encodings == ["wav"])
    }
}
