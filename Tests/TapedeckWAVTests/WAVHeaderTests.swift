import Foundation
import TapedeckTesting
import Testing
import TapedeckCore
import TapedeckNull
@testable import TapedeckWAV

@Suite("WAV headers as other tools see them")
struct WAVHeaderTests {
    /// The format tag of the file's `fmt ` chunk and the chunk's size.
    static func fmtInfo(_ bytes: [UInt8]) throws -> (tag: UInt16, size: UInt32) {
        let fmt = try #require(WAVTestSupport.chunks(bytes).first { $0.id == "fmt " })
        return (WAVTestSupport.u16(bytes, fmt.offset + 8), fmt.size)
    }

    @Test("a 2 s 16-bit stereo take is plain PCM that python's wave module reads")
    func pythonReadsStereo16() throws {
        let dir = try WAVTestSupport.makeTempDirectory()
        defer { WAVTestSupport.cleanUp(dir) }
        let url = dir.appendingPathComponent("stereo16.wav")
        let format = AudioFormat.cdStereo
        let bytes = WAVTestSupport.render(.sine(frequency: 440, level: 0.5), format: format, frames: 88_200)
        try WAVTestSupport.writeTake(bytes, at: url, format: format)

        let file = try WAVTestSupport.bytes(of: url)
        #expect(String(decoding: file[0..<4], as: UTF8.self) == "RIFF")
        #expect(WAVTestSupport.u32(file, 4) == UInt32(file.count - 8))
        let fmt = try Self.fmtInfo(file)
        #expect(fmt.tag == 1)
        #expect(fmt.size == 16)
        let ids = WAVTestSupport.chunks(file).map(\.id)
        #expect(ids.first == "JUNK")
        #expect(ids.last == "data")

        let out = dir.appendingPathComponent("python.raw")
        let script = """
            import sys, wave
            w = wave.open(sys.argv[1], 'rb')
            print(w.getnchannels(), w.getsampwidth(), w.getframerate(), w.getnframes())
            open(sys.argv[2], 'wb').write(w.readframes(w.getnframes()))
            """
        let result = try WAVTestSupport.run("python3", ["-c", script, url.path, out.path])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "2 2 44100 88200")
        #expect(firstDifference(try WAVTestSupport.bytes(of: out), bytes) == nil)
    }

    @Test("24-bit stereo is plain PCM too, read by python's wave module")
    func pythonReadsStereo24() throws {
        let dir = try WAVTestSupport.makeTempDirectory()
        defer { WAVTestSupport.cleanUp(dir) }
        let url = dir.appendingPathComponent("stereo24.wav")
        let format = AudioFormat(sampleRate: 48_000, channels: 2, sampleFormat: .s24)
        let bytes = WAVTestSupport.render(.noise(seed: 3, level: 1), format: format, frames: 4_801)
        try WAVTestSupport.writeTake(bytes, at: url, format: format)
        #expect(try Self.fmtInfo(WAVTestSupport.bytes(of: url)).tag == 1)
        let script = "import sys, wave; w = wave.open(sys.argv[1], 'rb'); print(w.getsampwidth(), w.getnframes())"
        let result = try WAVTestSupport.run("python3", ["-c", script, url.path])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "3 4801")
    }

    @Test("float stereo uses the IEEE float tag with an 18-byte fmt chunk")
    func floatStereo() throws {
        let dir = try WAVTestSupport.makeTempDirectory()
        defer { WAVTestSupport.cleanUp(dir) }
        let url = dir.appendingPathComponent("float.wav")
        let format = AudioFormat(sampleRate: 48_000, channels: 2, sampleFormat: .f32)
        let bytes = WAVTestSupport.render(.sine(frequency: 1000, level: 0.25), format: format, frames: 48_000)
        try WAVTestSupport.writeTake(bytes, at: url, format: format)
        let file = try WAVTestSupport.bytes(of: url)
        let fmt = try Self.fmtInfo(file)
        #expect(fmt.tag == 3)
        #expect(fmt.size == 18)
        #expect(!WAVTestSupport.chunks(file).contains { $0.id == "PEAK" })
        let result = try WAVTestSupport.run("sox", ["--i", "-s", url.path])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "48000")
    }

    @Test("24-bit 8-channel keeps WAVE_FORMAT_EXTENSIBLE and sox counts its samples")
    func soxReads24Bit8Channel() throws {
        let dir = try WAVTestSupport.makeTempDirectory()
        defer { WAVTestSupport.cleanUp(dir) }
        let url = dir.appendingPathComponent("eight.wav")
        let format = AudioFormat(sampleRate: 96_000, channels: 8, sampleFormat: .s24)
        let bytes = WAVTestSupport.render(.frameCounter, format: format, frames: 9_600)
        try WAVTestSupport.writeTake(bytes, at: url, format: format)
        let fmt = try Self.fmtInfo(WAVTestSupport.bytes(of: url))
        #expect(fmt.tag == 0xFFFE)
        #expect(fmt.size == 40)

        for (option, expected) in [("-s", "9600"), ("-c", "8"), ("-r", "96000"), ("-b", "24")] {
            let result = try WAVTestSupport.run("sox", ["--i", option, url.path])
            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == expected, "sox --i \(option)")
        }
        // sox decodes every sample to the same bytes.
        let raw = dir.appendingPathComponent("sox.raw")
        let result = try WAVTestSupport.run("sox", [url.path, "-t", "raw", raw.path])
        #expect(result.status == 0)
        #expect(result.stderr.isEmpty, "\(result.stderr)")
        #expect(firstDifference(try WAVTestSupport.bytes(of: raw), bytes) == nil)
    }

    @Test("the decoder reads files other tools wrote, widening 8-bit to s16")
    func decoderReadsForeignFiles() throws {
        let dir = try WAVTestSupport.makeTempDirectory()
        defer { WAVTestSupport.cleanUp(dir) }
        let url = dir.appendingPathComponent("u8.wav")
        let made = try WAVTestSupport.run("sox", ["-n", "-r", "8000", "-c", "1", "-b", "8", "-e", "unsigned-integer",
                                                  url.path, "synth", "0.1", "sine", "440"])
        #expect(made.status == 0, "\(made.stderr)")
        let read = try WAVTestSupport.readAll(url)
        #expect(read.format == AudioFormat(sampleRate: 8_000, channels: 1, sampleFormat: .s16))
        #expect(read.frameCount == 800)
        #expect(read.bytes.count == 1_600)
        // 8-bit samples widen to multiples of 256.
        #expect(stride(from: 0, to: read.bytes.count, by: 2).allSatisfy { read.bytes[$0] == 0 })
    }
}
