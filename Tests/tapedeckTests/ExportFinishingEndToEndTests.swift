import Foundation
import TapedeckTesting
import Testing

/// `export --loudness`, `--normalize-peak`, `--rate` and `--dither`, checked by ffmpeg's EBU R128
/// filter, sox, ffprobe and a Goertzel filter in python over the decoded samples.
@Suite("export finishing end to end", .endToEnd, .serialized)
struct ExportFinishingEndToEndTests {
    /// A library with one take imported from what sox makes of `effect` (`-R`: the same every run).
    static func library(_ effect: [String], rate: Int = 48_000, channels: Int = 2, bits: [String] = ["-b", "24"],
                        name: String = "src") async throws -> (CLIHarness, String, URL) {
        let cli = try CLIHarness()
        let folder = URL(fileURLWithPath: cli.library.path + "-files")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let source = folder.appendingPathComponent("\(name).wav").path
        let made = try await CLIHarness.tool("sox", ["-R", "-n", "-r", String(rate), "-c", String(channels)] + bits + [source] + effect)
        try #require(made.status == 0, "\(made.stderr)")
        let imported = try await cli.run("import", source, "--session", "S")
        try #require(imported.status == 0, "\(imported.stderr)")
        return (cli, "S/\(name)", folder)
    }

    static func export(_ cli: CLIHarness, _ args: [String]) async throws -> (CLIHarness.Result, [String: Any]?) {
        let r = try await cli.run(["export"] + args + ["--json"])
        let reports = (try? JSONSerialization.jsonObject(with: Data(r.stdout.utf8))) as? [[String: Any]]
        return (r, reports?.first)
    }

    /// Power (dB, relative to full scale) of the first channel at each frequency, by a Goertzel
    /// filter over the decoded samples (sox decodes to 32-bit raw).
    static func tones(_ path: String, _ frequencies: [Double]) async throws -> [Double] {
        let script = """
            import subprocess, struct, sys, math
            path, rate = sys.argv[1], int(subprocess.run(['sox', '--i', '-r', sys.argv[1]], capture_output=True, text=True).stdout)
            ch = int(subprocess.run(['sox', '--i', '-c', path], capture_output=True, text=True).stdout)
            raw = subprocess.run(['sox', path, '-t', 'raw', '-e', 'signed-integer', '-b', '32', '-'], capture_output=True).stdout
            x = [s / 2147483648.0 for s in struct.unpack('<%di' % (len(raw) // 4), raw)[::ch]]
            n = len(x)
            w = [0.5 - 0.5 * math.cos(2 * math.pi * i / (n - 1)) for i in range(n)]  # Hann window
            out = []
            for f in map(float, sys.argv[2:]):
                k = 2 * math.cos(2 * math.pi * f / rate); s1 = s2 = 0.0
                for i in range(n):
                    s0 = x[i] * w[i] + k * s1 - s2; s2 = s1; s1 = s0
                p = s1 * s1 + s2 * s2 - k * s1 * s2
                out.append(10 * math.log10(max(p, 1e-30) / (n * n / 16)))
            print(' '.join('%.2f' % v for v in out))
            """
        let r = try await CLIHarness.tool("python3", ["-c", script, path] + frequencies.map { String($0) })
        try #require(r.status == 0, "\(r.stderr)")
        return r.stdout.split(separator: " ").compactMap { Double($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
    }

    @Test("--loudness -23 gives -23 ± 0.1 LUFS by ffmpeg, in FLAC and WAV; the report says the gain and the file's loudness", arguments: ["flac", "wav"])
    func loudnessTarget(_ format: String) async throws {
        let (cli, take, folder) = try await Self.library(["synth", "8", "sine", "150-3000", "tremolo", "3", "80", "vol", "-30dB"])
        defer { try? FileManager.default.removeItem(at: folder) }
        let out = folder.appendingPathComponent("out.\(format)").path
        let (r, report) = try await Self.export(cli, [take, "--loudness", "-23", "-o", out])
        try #require(r.status == 0, "\(r.stderr)")
        let measured = try await CLIHarness.ffmpegLoudness(out)
        #expect(abs(measured.integrated + 23) <= 0.1, "ffmpeg: \(measured)")
        #expect(abs((report?["integratedLoudness"] as? Double ?? 0) + 23) <= 0.1, "\(report ?? [:])")
        #expect((report?["gain"] as? Double ?? 0) > 0)
        #expect(report?["dither"] as? String == "tpdf")
        #expect(report?["note"] == nil)
        // The file carries its own loudness, not the take's.
        if format == "flac" {
            let tags = try await CLIHarness.tool("metaflac", ["--export-tags-to=-", out]).stdout
            #expect(tags.contains("REPLAYGAIN_TRACK_GAIN=5."), "-18 - (-23) = +5 dB: \(tags)")
        }
    }

    @Test("--loudness with --rate meets the target on the converted audio (full-band noise loses loudness to a lower rate)")
    func loudnessWithRate() async throws {
        let (cli, take, folder) = try await Self.library(["synth", "6", "whitenoise", "vol", "0.2"])
        defer { try? FileManager.default.removeItem(at: folder) }
        let out = folder.appendingPathComponent("noise.flac").path
        let (r, report) = try await Self.export(cli, [take, "--loudness", "-23", "--rate", "44100", "--true-peak", "0", "-o", out])
        try #require(r.status == 0, "\(r.stderr)")
        let measured = try await CLIHarness.ffmpegLoudness(out)
        #expect(abs(measured.integrated + 23) <= 0.1, "ffmpeg: \(measured)")
        #expect(abs((report?["integratedLoudness"] as? Double ?? 0) + 23) <= 0.1, "\(report ?? [:])")
    }

    @Test("--loudness stops at the --true-peak ceiling, says so, and the file's true peak stays under it")
    func ceiling() async throws {
        let (cli, take, folder) = try await Self.library(["synth", "4", "sine", "1000", "vol", "-6dB"])
        defer { try? FileManager.default.removeItem(at: folder) }
        let out = folder.appendingPathComponent("loud.flac").path
        // About -6 LUFS, peaks at -6 dBTP: -1 LUFS would need +5 dB, the ceiling allows +3.
        let r = try await cli.run("export", take, "--loudness", "-1", "--true-peak", "-3", "-o", out)
        try #require(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("warning:") && r.stderr.contains("ceiling") && r.stderr.contains("no limiter"), "\(r.stderr)")
        let measured = try await CLIHarness.ffmpegLoudness(out)
        #expect(measured.truePeak <= -3 + 0.1, "\(measured)")
        #expect(measured.integrated < -2.5, "the target was not reached: \(measured)")
    }

    @Test("--normalize-peak -1 puts the highest sample at -1 dBFS")
    func normalizePeak() async throws {
        let (cli, take, folder) = try await Self.library(["synth", "3", "sine", "440", "vol", "-20dB"])
        defer { try? FileManager.default.removeItem(at: folder) }
        let out = folder.appendingPathComponent("peak.wav").path
        let (r, report) = try await Self.export(cli, [take, "--normalize-peak", "-1", "-o", out])
        try #require(r.status == 0, "\(r.stderr)")
        #expect(abs((report?["gain"] as? Double ?? 0) - 19) <= 0.05, "\(report ?? [:])")
        let stat = try await CLIHarness.tool("sox", [out, "-n", "stat"]).stderr
        let line = try #require(stat.split(separator: "\n").first { $0.hasPrefix("Maximum amplitude") })
        let amplitude = try #require(line.split(separator: " ").compactMap { Double($0) }.last)
        #expect(abs(20 * log10(amplitude) + 1) <= 0.02, "\(line)")
    }

    @Test("a float take exported to s16: TPDF dither leaves a noise floor and no harmonics; --dither none shows the truncation harmonics")
    func dither() async throws {
        // 1 kHz at 1.5 steps of 16 bits: rounding it makes a square-ish wave, rich in odd harmonics.
        let (cli, take, folder) = try await Self.library(["synth", "2", "sine", "1000", "vol", "0.0000457"], channels: 1, bits: ["-e", "floating-point", "-b", "32"])
        defer { try? FileManager.default.removeItem(at: folder) }
        var results: [String: [Double]] = [:]
        for dither in ["tpdf", "none", "shaped"] {
            let out = folder.appendingPathComponent("\(dither).wav").path
            let (r, report) = try await Self.export(cli, [take, "--sample-format", "s16", "--dither", dither, "-o", out])
            try #require(r.status == 0, "\(r.stderr)")
            #expect(report?["dither"] as? String == dither)
            // The fundamental, its 3rd and 5th harmonics, and places between them for the noise floor.
            results[dither] = try await Self.tones(out, [1000, 3000, 5000, 2150, 4150, 6150, 15_150])
        }
        let plain = try #require(results["none"]), tpdf = try #require(results["tpdf"]), shaped = try #require(results["shaped"])
        for r in [plain, tpdf, shaped] { #expect(abs(r[0] + 86.8) <= 3, "the tone is there: \(r)") }
        let floor = { (r: [Double]) in max(r[3], r[4], r[5]) }
        // Rounding without dither: harmonics far above what lies between them.
        #expect(plain[1] > floor(plain) + 20 && plain[2] > floor(plain) + 15, "truncation harmonics: \(plain)")
        // TPDF: the harmonics sink into the floor.
        #expect(tpdf[1] < floor(tpdf) + 6 && tpdf[2] < floor(tpdf) + 6, "no harmonics with dither: \(tpdf)")
        // Shaped: the same, with the noise moved up (more at 15 kHz than at 2 kHz).
        #expect(shaped[1] < floor(shaped) + 6, "\(shaped)")
        #expect(shaped[6] > shaped[3] + 10, "the noise is shaped towards high frequencies: \(shaped)")
    }

    @Test("--rate 44100 converts the rate (libsoxr): same length, same pitch; a 24-bit take is dithered")
    func rate() async throws {
        let (cli, take, folder) = try await Self.library(["synth", "3", "sine", "1000", "vol", "-6dB"])
        defer { try? FileManager.default.removeItem(at: folder) }
        let out = folder.appendingPathComponent("cd.flac").path
        let (r, report) = try await Self.export(cli, [take, "--rate", "44.1k", "--sample-format", "s16", "-o", out])
        try #require(r.status == 0, "\(r.stderr)")
        #expect((report?["format"] as? [String: Any])?["sampleRate"] as? Int == 44_100)
        #expect((report?["resampler"] as? String)?.contains("libsoxr") == true)
        #expect(try await CLIHarness.tool("flac", ["-t", "-s", out]).status == 0)
        let probe = try await CLIHarness.tool("ffprobe", ["-v", "error", "-show_entries", "stream=sample_rate,duration_ts", "-of", "csv=p=0", out]).stdout
        let fields = probe.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: ",")
        #expect(fields.first == "44100", "\(probe)")
        #expect(abs((Int(fields.last ?? "") ?? 0) - 132_300) <= 2, "3 s at 44.1 kHz: \(probe)")
        let tones = try await Self.tones(out, [1000, 1088.4])
        #expect(tones[0] > tones[1] + 40, "still 1 kHz, not 48/44.1 of it: \(tones)")
    }

    @Test("MP3, Ogg Vorbis and AIFF exports decode in ffmpeg to the right length and pitch, with the take's tags", arguments: [
        ("mp3", ["--bitrate", "192k"]), ("vorbis", ["--quality", "5"]), ("aiff", []),
    ])
    func formats(_ format: String, _ options: [String]) async throws {
        let (cli, take, folder) = try await Self.library(["synth", "3", "sine", "1000", "vol", "-6dB"], rate: 44_100)
        defer { try? FileManager.default.removeItem(at: folder) }
        #expect(try await cli.run("note", take, "street recording").status == 0)
        let (r, report) = try await Self.export(cli, [take, "--format", format, "-o", folder.path] + options)
        try #require(r.status == 0, "\(r.stderr)")
        let out = try #require(report?["output"] as? String)
        #expect((report?["verification"] as? String)?.hasPrefix("decoded again") == true, "\(report ?? [:])")
        let probe = try await CLIHarness.tool("ffprobe", ["-v", "error", "-show_entries", "format=duration:format_tags:stream=sample_rate,channels,bit_rate:stream_tags",
                                                          "-of", "json", out])
        let json = try #require(try JSONSerialization.jsonObject(with: Data(probe.stdout.utf8)) as? [String: Any])
        let container = try #require(json["format"] as? [String: Any])
        let stream = try #require((json["streams"] as? [[String: Any]])?.first)
        // Ogg keeps its comments on the stream; MP3 and AIFF on the file.
        let all = ((container["tags"] as? [String: String]) ?? [:]).merging((stream["tags"] as? [String: String]) ?? [:]) { a, _ in a }
        let tags = Dictionary(all.map { ($0.key.lowercased(), $0.value) }) { a, _ in a }
        let duration = Double(container["duration"] as? String ?? "") ?? 0
        #expect(abs(duration - 3) <= 0.06, "\(format): \(duration) s")
        #expect(tags["title"] == "src", "\(format): \(tags)")
        if format != "aiff" {
            #expect(tags["album"] == "S" && tags["track"] == "1", "\(format): \(tags)")
            #expect(tags["date"]?.hasPrefix("20") == true, "\(format): \(tags)")
        }
        #expect(tags["comment"] == "street recording", "\(format): \(tags)")
        if format == "mp3" { #expect(stream["bit_rate"] as? String == "192000", "\(stream)") }
        // Decoded by ffmpeg, the pitch is the take's.
        let decoded = folder.appendingPathComponent("decoded-\(format).wav").path
        #expect(try await CLIHarness.tool("ffmpeg", ["-v", "error", "-i", out, "-c:a", "pcm_s16le", decoded]).status == 0)
        let tones = try await Self.tones(decoded, [1000, 1250])
        #expect(tones[0] > -10 && tones[0] > tones[1] + 40, "\(format): \(tones)")
    }

    @Test("finishing options that cannot go together, or out of range, are refused before anything is written")
    func refused() async throws {
        let (cli, take, folder) = try await Self.library(["synth", "1", "sine", "440"])
        defer { try? FileManager.default.removeItem(at: folder) }
        for (args, says) in [(["--loudness", "-23", "--normalize-peak", "-1"], "choose one"), (["--true-peak", "-1"], "--loudness"),
                             (["--loudness", "-99"], "-70 to 0"), (["--rate", "5"], "--rate 44100"), (["--loudness", "loud"], "LUFS")] {
            let r = try await cli.run(["export", take, "-o", folder.path] + args)
            #expect(r.status == 64 && r.stderr.contains(says), "\(args): \(r.stderr)")
        }
        let silent = try await Self.library(["trim", "0", "1"], name: "quiet")
        defer { try? FileManager.default.removeItem(at: silent.2) }
        let r = try await silent.0.run("export", silent.1, "--loudness", "-23", "-o", silent.2.path)
        #expect(r.status == 65 && r.stderr.contains("silent") && r.stderr.contains("without --loudness"), "\(r.stderr)")
        #expect(!r.stderr.contains("--sample-format") && !r.stderr.contains("another --format"), "no advice that cannot help: \(r.stderr)")
        #expect((try? FileManager.default.contentsOfDirectory(atPath: silent.2.path))?.filter { $0.hasSuffix(".flac") }.isEmpty == true)
    }

    @Test("MP3 at 11.025, 12 and 24 kHz (frames too small for LAME's gapless tag) is verified: the full length, and no more than the codec's delay and padding beyond", arguments: [11_025, 12_000, 24_000])
    func mp3AtLowRates(_ rate: Int) async throws {
        let (cli, take, folder) = try await Self.library(["synth", "2", "sine", "440", "vol", "-6dB"])
        defer { try? FileManager.default.removeItem(at: folder) }
        let out = folder.appendingPathComponent("low.mp3").path
        let (r, report) = try await Self.export(cli, [take, "--format", "mp3", "--rate", String(rate), "-o", out])
        try #require(r.status == 0, "\(r.stderr)")
        #expect((report?["format"] as? [String: Any])?["sampleRate"] as? Int == rate)
        let written = try #require(report?["frames"] as? Int)
        #expect(abs(written - 2 * rate) <= 2, "\(written) frames written")
        let verification = try #require(report?["verification"] as? String)
        #expect(verification.hasPrefix("decoded again") && verification.contains("at \(rate) Hz"), "\(verification)")
        // Another decoder (ffmpeg) finds all of it, and at most 1152 frames of delay and padding
        // and one MPEG-2 frame (576) more.
        let decoded = folder.appendingPathComponent("low.wav").path
        #expect(try await CLIHarness.tool("ffmpeg", ["-v", "error", "-i", out, "-c:a", "pcm_s16le", decoded]).status == 0)
        let samples = Int(try await CLIHarness.tool("sox", ["--i", "-s", decoded]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
        #expect(samples >= written && samples <= written + 1152 + 576, "ffmpeg decodes \(samples) frames of \(written)")
        let tones = try await Self.tones(decoded, [440, 550])
        #expect(tones[0] > tones[1] + 30, "still 440 Hz: \(tones)")
    }

    @Test("a refusal says only what helps: 8 channels to MP3 or Opus another --format, never --sample-format; a take too short for --loudness neither")
    func refusalAdvice() async throws {
        let (cli, take, folder) = try await Self.library(["synth", "1", "sine", "440"], channels: 8)
        defer { try? FileManager.default.removeItem(at: folder) }
        for format in ["mp3", "opus"] {
            let r = try await cli.run("export", take, "--format", format, "-o", folder.path)
            #expect(r.status == 65 && r.stderr.contains("Choose another --format") && !r.stderr.contains("--sample-format"), "\(format): \(r.stderr)")
        }
        let short = try await Self.library(["synth", "0.2", "sine", "440"], name: "short")
        defer { try? FileManager.default.removeItem(at: short.2) }
        let r = try await short.0.run("export", short.1, "--loudness", "-23", "-o", short.2.path)
        #expect(r.status == 65 && r.stderr.contains("--normalize-peak"), "\(r.stderr)")
        #expect(!r.stderr.contains("--sample-format") && !r.stderr.contains("another --format"), "no advice that cannot help: \(r.stderr)")
    }
}
