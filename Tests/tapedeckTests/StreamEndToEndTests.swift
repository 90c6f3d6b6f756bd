#if Streams
import Foundation
import TapedeckTesting
import Testing

/// `tapedeck record -D http://…`: network streams from a private Icecast server fed by ffmpeg
/// (test side), and from hostile test servers (one that stalls, one that sends garbage).
@Suite("network streams end to end", .endToEnd)
struct StreamEndToEndTests {
    static let rate = 48_000

    /// A tonal stereo signal whose frequencies wander (so one alignment fits), which lossy codecs keep well.
    static func tonal(seconds: Int) -> [Int16] {
        var out = [Int16](repeating: 0, count: seconds * rate * 2)
        var p = (0.0, 0.0, 0.0, 0.0)
        for i in 0..<(seconds * rate) {
            let t = Double(i) / Double(rate)
            p.0 += (500 + 300 * sin(2 * .pi * 0.23 * t)) / Double(rate)
            p.1 += (1200 + 500 * sin(2 * .pi * 0.11 * t + 1)) / Double(rate)
            p.2 += (700 + 250 * sin(2 * .pi * 0.31 * t + 2)) / Double(rate)
            p.3 += (300 + 100 * sin(2 * .pi * 0.17 * t + 3)) / Double(rate)
            out[2 * i] = Int16(12_000 * sin(2 * .pi * p.0) + 6_000 * sin(2 * .pi * p.1))
            out[2 * i + 1] = Int16(10_000 * sin(2 * .pi * p.2) + 7_000 * sin(2 * .pi * p.3))
        }
        return out
    }

    /// Writes interleaved s16 stereo samples as a WAV file.
    static func wav(_ samples: [Int16], _ url: URL) throws {
        var d = Data()
        func u32(_ v: Int) { withUnsafeBytes(of: UInt32(v).littleEndian) { d.append(contentsOf: $0) } }
        func u16(_ v: Int) { withUnsafeBytes(of: UInt16(v).littleEndian) { d.append(contentsOf: $0) } }
        d.append(contentsOf: Array("RIFF".utf8)); u32(36 + samples.count * 2); d.append(contentsOf: Array("WAVEfmt ".utf8))
        u32(16); u16(1); u16(2); u32(rate); u32(rate * 4); u16(4); u16(16)
        d.append(contentsOf: Array("data".utf8)); u32(samples.count * 2)
        samples.withUnsafeBytes { d.append(contentsOf: $0) }
        try d.write(to: url)
    }

    /// The take's samples as interleaved s16 stereo (decoded by sox).
    static func samples(_ path: String) async throws -> [Int16] {
        let raw = FileManager.default.temporaryDirectory.appendingPathComponent("stream-\(UUID().uuidString).raw")
        defer { try? FileManager.default.removeItem(at: raw) }
        let r = try await CLIHarness.tool("sox", [path, "-t", "raw", "-e", "signed", "-b", "16", "-L", "-c", "2", raw.path])
        #expect(r.status == 0, "\(r.stderr)")
        let data = try Data(contentsOf: raw)
        return data.withUnsafeBytes { Array($0.bindMemory(to: Int16.self)) }
    }

    /// The best correlation of `take`'s left channel with `source`'s at any offset (found on a
    /// decimated envelope, then refined), and that offset in frames.
    static func alignment(_ take: [Int16], _ source: [Int16]) -> (offset: Int, correlation: Double) {
        let takeFrames = take.count / 2, sourceFrames = source.count / 2
        let step = 8, window = min(takeFrames, rate) / step
        let t = (0..<window).map { Double(take[2 * ($0 * step + rate / 2)]) }
        var best = (0, -2.0)
        for lag in stride(from: 0, to: sourceFrames - takeFrames - rate, by: 1) where lag % step == 0 {
            var dot = 0.0, ss = 0.0
            for k in 0..<window {
                let s = Double(source[2 * (lag + rate / 2 + k * step)])
                dot += s * t[k]; ss += s * s
            }
            let c = dot / max(1, ss.squareRoot())
            if c > best.1 { best = (lag, c) }
        }
        var refined = (best.0, -2.0)
        for lag in max(0, best.0 - 2 * step)...min(sourceFrames - takeFrames, best.0 + 2 * step) {
            let c = correlation(take, source, offset: lag)
            if c > refined.1 { refined = (lag, c) }
        }
        return refined
    }

    /// Pearson correlation of both channels of `take` with `source` from frame `offset` on.
    static func correlation(_ take: [Int16], _ source: [Int16], offset: Int) -> Double {
        var sxy = 0.0, sxx = 0.0, syy = 0.0
        for i in 0..<min(take.count, source.count - 2 * offset) {
            let x = Double(take[i]), y = Double(source[2 * offset + i])
            sxy += x * y; sxx += x * x; syy += y * y
        }
        return sxy / max(1, (sxx * syy).squareRoot())
    }

    @Test("each codec from Icecast: the take is the source (lossless: sample-exact; lossy: correlation ≥ 0.99), the stream's format, no gaps",
          arguments: ["flac", "opus", "vorbis", "mp3"])
    func codecs(_ codec: String) async throws {
        let cli = try CLIHarness()
        let folder = cli.library.deletingLastPathComponent().appendingPathComponent("stream-src-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let lossless = codec == "flac"
        let seconds = 30
        let source: [Int16] = lossless
            ? StereoSignal.noise(seconds: Double(seconds)).withUnsafeBytes { Array($0.bindMemory(to: Int16.self)) }
            : Self.tonal(seconds: seconds)
        let wav = folder.appendingPathComponent("source.wav")
        try Self.wav(source, wav)
        let server = try await IcecastServer.startAsync()
        try await OwnThread.run { try server.feed(wav, codec: codec, mount: "live") }
        let r = try await cli.run("record", "-D", server.url("live"), "-d", "8", "--json")
        #expect(r.status == 0, "\(r.stderr)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        let take = try #require(report["take"] as? [String: Any])
        #expect(take["frames"] as? Int == 8 * Self.rate, "\(take)")
        let format = try #require(take["format"] as? [String: Any])
        #expect(format["sampleRate"] as? Int == Self.rate && format["channels"] as? Int == 2)
        #expect(format["sampleFormat"] as? String == "s16", "the stream's depth (FLAC), or the default for a lossy codec")
        #expect(take["overrunFrames"] as? Int == 0, "\(r.stdout)")
        let path = try #require(take["path"] as? String)
        let got = try await Self.samples(path)
        if lossless {
            let (matched, stray) = StereoSignal.copiedRuns(StereoSignal.frames(got.withUnsafeBytes { Array($0) }),
                                                          of: StereoSignal.frames(source.withUnsafeBytes { Array($0) }))
            #expect(stray == 0 && matched == got.count / 2, "\(matched) of \(got.count / 2) frames are the source's, \(stray) stray")
        } else {
            let (offset, c) = Self.alignment(got, source)
            #expect(c >= 0.99, "\(codec): correlation \(c) at frame \(offset)")
        }
    }
}
#endif
