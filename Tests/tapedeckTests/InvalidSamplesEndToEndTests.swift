import Foundation
import Testing

/// Float takes holding NaN, infinities and absurd values (issue 37, defect 1): one NaN made an
/// MP3 export abort in LAME (exit 134), `loudness` call the take silent, and an all-NaN take
/// exported with `--rate 44100` become full-scale DC. The files are written by Python (32-bit
/// float WAV, WAVE_FORMAT_IEEE_FLOAT) and the exports read by ffprobe, `flac -t`, `flac -d`
/// and a Python reader of the samples.
@Suite("invalid float samples end to end", .endToEnd, .serialized)
struct InvalidSamplesEndToEndTests {
    /// Writes a 48 kHz stereo float WAV: a 1 kHz sine at 0.25 (or NaN throughout with
    /// `allNaN`), with NaN at interleaved samples 1000, 50000 and 100001, +inf at 2000, -inf at
    /// 3001 and 1e30 at 4000: six invalid samples.
    static func floatWAV(_ path: String, seconds: Int, allNaN: Bool = false) async throws {
        let script = """
            import math, struct, sys
            path, seconds, all_nan = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
            rate, ch = 48000, 2
            n = rate * seconds
            s = [float("nan")] * (n * ch) if all_nan else [0.25 * math.sin(2 * math.pi * 1000 * (i // ch) / rate) for i in range(n * ch)]
            if not all_nan:
                for i in (1000, 50000, 100001): s[i] = float("nan")
                s[2000], s[3001], s[4000] = float("inf"), float("-inf"), 1e30
            data = struct.pack("<%df" % len(s), *s)
            fmt = struct.pack("<HHIIHHH", 3, ch, rate, rate * ch * 4, ch * 4, 32, 0)
            body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"fact" + struct.pack("<II", 4, n) \\
                + b"data" + struct.pack("<I", len(data)) + data
            open(path, "wb").write(b"RIFF" + struct.pack("<I", len(body)) + body)
            """
        let r = try await CLIHarness.tool("python3", ["-c", script, path, String(seconds), allNaN ? "1" : "0"])
        try #require(r.status == 0, "\(r.stderr)")
    }

    /// The samples of a WAV (PCM 16/24/32 or float, plain or extensible) as Python reads them:
    /// rate, count, whether all are finite, the largest magnitude (full scale 1), and the
    /// samples at the given interleaved indices.
    static func samples(_ path: String, at indices: [Int] = []) async throws -> [String: Any] {
        let script = """
            import json, struct, sys
            b = open(sys.argv[1], "rb").read()
            assert b[:4] == b"RIFF" and b[8:12] == b"WAVE"
            pos, fmt, data = 12, None, None
            while pos + 8 <= len(b):
                cid, size = b[pos:pos + 4], struct.unpack("<I", b[pos + 4:pos + 8])[0]
                if cid == b"fmt ": fmt = b[pos + 8:pos + 8 + size]
                if cid == b"data": data = b[pos + 8:pos + 8 + size]
                pos += 8 + size + (size & 1)
            tag, ch, rate = struct.unpack("<HHI", fmt[:8])
            bits = struct.unpack("<H", fmt[14:16])[0]
            if tag == 0xFFFE: tag = struct.unpack("<H", fmt[24:26])[0]
            if tag == 3:
                x = list(struct.unpack("<%df" % (len(data) // 4), data))
            else:
                w = bits // 8
                x = [int.from_bytes(data[i:i + w], "little", signed=True) / float(1 << (bits - 1)) for i in range(0, len(data) - w + 1, w)]
            finite = all(v == v and abs(v) != float("inf") for v in x)
            peak = max((abs(v) for v in x), default=0.0) if finite else None
            picks = [x[int(i)] if x[int(i)] == x[int(i)] else "nan" for i in sys.argv[2:]]
            print(json.dumps({"rate": rate, "count": len(x), "finite": finite, "peak": peak, "picks": picks}))
            """
        let r = try await CLIHarness.tool("python3", ["-c", script, path] + indices.map(String.init))
        try #require(r.status == 0, "\(r.stderr)")
        return try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
    }

    static func export(_ cli: CLIHarness, _ args: [String]) async throws -> (CLIHarness.Result, [String: Any]?) {
        let r = try await cli.run(["export"] + args + ["--json"])
        let reports = (try? JSONSerialization.jsonObject(with: Data(r.stdout.utf8))) as? [[String: Any]]
        return (r, reports?.first)
    }

    @Test("NaN, ±inf and 1e30 in a float take: MP3 and FLAC exports and --rate 44100 succeed and say so; loudness measures it, not 'silent'")
    func hostileFloatTake() async throws {
        let cli = try CLIHarness()
        let folder = URL(fileURLWithPath: cli.library.path + "-files")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let source = folder.appendingPathComponent("hostile.wav").path
        try await Self.floatWAV(source, seconds: 2)
        let imported = try await cli.run("import", source, "--session", "S")
        try #require(imported.status == 0, "\(imported.stderr)")
        #expect(imported.stderr.contains("warning") && imported.stderr.contains("6 samples that are NaN, infinite or past +40 dBFS"), "\(imported.stderr)")

        let loudness = try await cli.run("loudness", "S/hostile")
        #expect(loudness.status == 0, "\(loudness.stderr)")
        #expect(!loudness.stdout.contains("silent") && loudness.stdout.contains(" LUFS,"), "\(loudness.stdout)")
        #expect(loudness.stderr.contains("warning") && loudness.stderr.contains("6 samples"), "\(loudness.stderr)")

        // MP3: LAME aborted the process on the first NaN (exit 134) and left a hidden .partial.
        let (mp3, mp3Report) = try await Self.export(cli, ["S/hostile", "--format", "mp3", "-o", folder.path])
        try #require(mp3.status == 0, "\(mp3.stderr)")
        #expect(mp3Report?["invalidSamples"] as? Int == 6, "\(mp3Report ?? [:])")
        #expect(mp3.stderr.contains("warning") && mp3.stderr.contains("exported with 6 samples"), "\(mp3.stderr)")
        let mp3Path = try #require(mp3Report?["output"] as? String)
        let probe = try await CLIHarness.tool("ffprobe", ["-v", "error", "-show_entries", "format=duration", "-of", "csv=p=0", mp3Path])
        #expect(probe.status == 0 && abs((Double(probe.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0) - 2) <= 0.06, "\(probe.stdout) \(probe.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).allSatisfy { !$0.hasPrefix(".") }, "no partial file left")

        // FLAC (s24, dithered): NaN is silence, the infinities and 1e30 full scale with their sign.
        let (flac, flacReport) = try await Self.export(cli, ["S/hostile", "--format", "flac", "-o", folder.path])
        try #require(flac.status == 0, "\(flac.stderr)")
        #expect(flacReport?["invalidSamples"] as? Int == 6, "\(flacReport ?? [:])")
        let flacPath = try #require(flacReport?["output"] as? String)
        #expect(try await CLIHarness.tool("flac", ["-t", "-s", flacPath]).status == 0)
        let decoded = folder.appendingPathComponent("decoded.wav").path
        #expect(try await CLIHarness.tool("flac", ["-d", "-s", "-o", decoded, flacPath]).status == 0)
        let pcm = try await Self.samples(decoded, at: [1000, 2000, 3001, 4000, 50000, 100001])
        let picks = (pcm["picks"] as? [Any])?.compactMap { $0 as? Double } ?? []
        try #require(picks.count == 6, "\(pcm)")
        let step = 1.0 / 8_388_608
        #expect(abs(picks[0]) <= 2 * step && abs(picks[4]) <= 2 * step && abs(picks[5]) <= 2 * step, "NaN is silence: \(picks)")
        #expect(picks[1] >= 1 - 3 * step && picks[3] >= 1 - 3 * step && picks[2] <= -1 + 3 * step, "full scale: \(picks)")

        // --rate 44100 into a float WAV: every sample a finite number near full scale at most.
        let (resampled, rateReport) = try await Self.export(cli, ["S/hostile", "--format", "wav", "--rate", "44100", "-o", folder.path])
        try #require(resampled.status == 0, "\(resampled.stderr)")
        #expect((rateReport?["format"] as? [String: Any])?["sampleRate"] as? Int == 44_100 && rateReport?["invalidSamples"] as? Int == 6, "\(rateReport ?? [:])")
        let converted = try await Self.samples(try #require(rateReport?["output"] as? String))
        #expect(converted["rate"] as? Int == 44_100 && converted["finite"] as? Bool == true, "\(converted)")
        #expect((converted["peak"] as? Double ?? 99) < 2, "\(converted)")
        #expect(abs((converted["count"] as? Int ?? 0) - 2 * 88_200) <= 4, "\(converted)")
    }

    @Test("an all-NaN float take exported with --rate 44100 is silence (it was full-scale DC, 'verified')")
    func allNaN() async throws {
        let cli = try CLIHarness()
        let folder = URL(fileURLWithPath: cli.library.path + "-files")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let source = folder.appendingPathComponent("nan.wav").path
        try await Self.floatWAV(source, seconds: 1, allNaN: true)
        let imported = try await cli.run("import", source, "--session", "S")
        try #require(imported.status == 0, "\(imported.stderr)")
        #expect(imported.stderr.contains("96000 samples"), "\(imported.stderr)")

        let (wav, wavReport) = try await Self.export(cli, ["S/nan", "--format", "wav", "--rate", "44100", "-o", folder.path])
        try #require(wav.status == 0, "\(wav.stderr)")
        #expect(wavReport?["invalidSamples"] as? Int == 96_000, "\(wavReport ?? [:])")
        let floats = try await Self.samples(try #require(wavReport?["output"] as? String))
        #expect(floats["finite"] as? Bool == true && floats["peak"] as? Double == 0, "digital silence: \(floats)")

        // The default format (FLAC, s24 with TPDF dither): at most the dither's step, no DC.
        let (flac, flacReport) = try await Self.export(cli, ["S/nan", "--rate", "44100", "-o", folder.path])
        try #require(flac.status == 0, "\(flac.stderr)")
        let flacPath = try #require(flacReport?["output"] as? String)
        #expect(try await CLIHarness.tool("flac", ["-t", "-s", flacPath]).status == 0)
        let decoded = folder.appendingPathComponent("decoded.wav").path
        #expect(try await CLIHarness.tool("flac", ["-d", "-s", "-o", decoded, flacPath]).status == 0)
        let pcm = try await Self.samples(decoded)
        #expect(pcm["rate"] as? Int == 44_100 && (pcm["peak"] as? Double ?? 1) <= 2.0 / 8_388_608, "\(pcm)")
    }
}
