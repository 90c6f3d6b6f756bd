import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `export --from … --to …` and `tapedeck timeline`: a stretch of wall-clock time cut from a
/// logger's split takes, checked frame by frame against the null backend's counter by python.
@Suite("timeline and time-range exports end to end", .endToEnd)
struct TimelineExportEndToEndTests {
    /// Reads a file's interleaved 16-bit samples (sox to raw) and checks them with python: the
    /// counter from sample `first` where audio is, zero frames where silence is. Prints JSON:
    /// frames, the first wrong sample (or null), the runs of silent frames [start, length].
    static let check = """
    import array, json, re, subprocess, sys
    raw = subprocess.run(["sox", sys.argv[1], "-t", "raw", "-e", "signed", "-b", "16", "-L", "-"], check=True, capture_output=True).stdout
    frames = len(raw) // 4
    # Frames where both samples are 0 (the counter never gives one): runs of four zero bytes, on frame boundaries.
    silent = []
    for m in re.finditer(rb"(?:\\x00)+", raw):
        a, b = (m.start() + 3) // 4, m.end() // 4
        if b > a:
            if silent and silent[-1][0] + silent[-1][1] == a: silent[-1][1] += b - a
            else: silent.append([a, b - a])
    # The counter from sample `first` for `count` samples, built from one period of it (C speed).
    first, count = int(sys.argv[2]), min(len(raw) // 2, int(sys.argv[3]) * 2)
    period = array.array("h", range(-32768, 32768)).tobytes()
    k = (first + 32768) % 65536
    expected = (period[2 * k:] + period * (count // 65536 + 2))[:2 * count]
    wrong = None
    if raw[:2 * count] != expected:
        wrong = next(i for i in range(count) if raw[2 * i:2 * i + 2] != expected[2 * i:2 * i + 2])
    print(json.dumps({"frames": frames, "wrong": wrong, "silent": silent}))
    """

    static func samples(_ path: String, counterFrom first: Int, checking frames: Int) async throws -> [String: Any] {
        let r = try await CLIHarness.tool("python3", ["-c", check, path, String(first * 2), String(frames)])
        try #require(r.status == 0, "\(r.stderr)")
        return try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
    }

    /// `firstFrameAt` (UTC, to the microsecond) as seconds since 1970, and back.
    static func seconds(_ take: [String: Any]) async throws -> Double { try await BroadcastWaveEndToEndTests.began(take) }
    static func iso(_ seconds: Double) async throws -> String {
        let r = try await CLIHarness.tool("python3", ["-c", "import sys, datetime; print(datetime.datetime.fromtimestamp(float(sys.argv[1]), datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%S.%fZ'))", String(seconds)])
        return r.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test("ten unpaced minutes split every minute, aligned: 02:30 to 07:10 into the run is exactly that slice of the counter, across the takes it spans",
          arguments: [("flac", "wav"), ("wav", "flac")])
    func sliceOfALoggerRun(_ takes: String, _ export: String) async throws {
        let cli = try CLIHarness()
        let r = try await cli.run("record", "-d", "10m", "--split", "1m", "--split-align", "--session", "Logger", "--json", "--set", "encoder.name=\(takes)",
                                  "--set", "capture.null.signal=counter", "--set", "capture.null.paced=false")
        try #require(r.status == 0, "\(r.stderr)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        let run = try #require(report["takes"] as? [[String: Any]])
        #expect(run.count == 11, "aligned: a short first and last take, nine whole minutes")
        let start = try await Self.seconds(run[0])
        let (from, to) = (try await Self.iso(start + 150), try await Self.iso(start + 430))
        let out = cli.library.deletingLastPathComponent().appendingPathComponent("clip-\(UUID().uuidString.prefix(6)).\(export)").path
        let e = try await cli.run("export", "--session", "Logger", "--from", from, "--to", to, "-o", out, "--json")
        try #require(e.status == 0, "\(e.stderr)")
        let exported = try #require((try JSONSerialization.jsonObject(with: Data(e.stdout.utf8)) as? [[String: Any]])?.first)
        #expect(exported["frames"] as? Int == 280 * 48_000)
        let clip = try #require(exported["clip"] as? [String: Any])
        #expect((clip["takes"] as? [String])?.count ?? 0 >= 5, "\(clip)")
        #expect(clip["filledGaps"] as? [Any] != nil && (clip["filledGaps"] as? [Any])?.isEmpty == true)
        let got = try await Self.samples(out, counterFrom: 150 * 48_000, checking: 280 * 48_000)
        #expect(got["frames"] as? Int == 280 * 48_000)
        #expect(got["wrong"] is NSNull, "the clip is the counter from 02:30 into the run, sample for sample: \(got["wrong"] ?? "")")
        if export == "flac" { #expect(try await CLIHarness.tool("flac", ["-t", "-s", out]).status == 0) }
        // Its time of day is its first frame's: 02:30 after the run's.
        let probe = try await CLIHarness.tool("ffprobe", ["-v", "error", "-show_entries", "format_tags", "-of", "json", out])
        let tags = try #require(((try JSONSerialization.jsonObject(with: Data(probe.stdout.utf8)) as? [String: Any])?["format"] as? [String: Any])?["tags"] as? [String: String])
        let reference = try #require(tags.first { $0.key.lowercased() == "time_reference" }.flatMap { Int($0.value) }, "\(tags)")
        let midnight = try await CLIHarness.tool("python3", ["-c", "import sys, datetime; d = datetime.datetime.fromtimestamp(float(sys.argv[1])); print((d - d.replace(hour=0, minute=0, second=0, microsecond=0)).total_seconds())", String(start + 150)])
        let local = try #require(Double(midnight.stdout.trimmingCharacters(in: .whitespacesAndNewlines)))
        #expect(abs(Double(reference) - local * 48_000) <= BroadcastWaveEndToEndTests.timeReferenceTolerance, "TimeReference \(reference): 02:30 into the run is \(local) s since midnight")
    }

    @Test("a gap made by stopping and starting the recorder: refused with the gap listed, filled with exactly its length, or split in two")
    func gapsBetweenRuns() async throws {
        let cli = try CLIHarness()
        let signal = ["--set", "capture.null.signal=counter", "--session", "Gappy", "--json"]
        let a = try await cli.run(["record", "-d", "2s"] + signal)
        try await Task.sleep(for: .milliseconds(1500))
        let b = try await cli.run(["record", "-d", "2s"] + signal)
        try #require(a.status == 0 && b.status == 0, "\(a.stderr)\(b.stderr)")
        let first = try #require((try JSONSerialization.jsonObject(with: Data(a.stdout.utf8)) as? [String: Any])?["take"] as? [String: Any])
        let second = try #require((try JSONSerialization.jsonObject(with: Data(b.stdout.utf8)) as? [String: Any])?["take"] as? [String: Any])
        let (startA, startB) = (try await Self.seconds(first), try await Self.seconds(second))
        let gapFrames = Int(((startB - (startA + 2)) * 48_000).rounded())
        #expect(gapFrames > 48_000)
        let (from, to) = (try await Self.iso(startA + 0.5), try await Self.iso(startB + 1.5))
        let folder = cli.library.deletingLastPathComponent().appendingPathComponent("gaps-\(UUID().uuidString.prefix(6))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)

        let refused = try await cli.run("export", "--session", "Gappy", "--from", from, "--to", to, "-o", folder.appendingPathComponent("r.flac").path)
        #expect(refused.status == 65, "\(refused.stderr)")
        #expect(refused.stderr.contains("Nothing was recorded") && refused.stderr.contains("--gaps silence") && refused.stderr.contains("--gaps split"), "\(refused.stderr)")
        #expect(!FileManager.default.fileExists(atPath: folder.appendingPathComponent("r.flac").path))

        let filled = folder.appendingPathComponent("filled.wav").path
        let f = try await cli.run("export", "--session", "Gappy", "--from", from, "--to", to, "-o", filled, "--gaps", "silence")
        #expect(f.status == 0, "\(f.stderr)")
        #expect(f.stderr.contains("1 gap filled with silence"), "\(f.stderr)")
        let got = try await Self.samples(filled, counterFrom: 24_000, checking: 72_000)
        #expect(got["wrong"] is NSNull, "the first take's counter from 0.5 s")
        let silent = try #require(got["silent"] as? [[Int]])
        #expect(silent.count == 1 && silent.first?[0] == 72_000, "\(silent)")
        #expect(abs((silent.first?[1] ?? 0) - gapFrames) <= 1, "the gap is its own length: \(silent) vs \(gapFrames)")
        #expect(abs((got["frames"] as? Int ?? 0) - (72_000 + gapFrames + 72_000)) <= 1)
        let description = try await CLIHarness.tool("ffprobe", ["-v", "error", "-show_entries", "format_tags", "-of", "json", filled])
        #expect(description.stdout.contains("Silence where nothing was recorded"), "\(description.stdout)")

        let split = folder.appendingPathComponent("split")
        try FileManager.default.createDirectory(at: split, withIntermediateDirectories: true)
        let s = try await cli.run("export", "--session", "Gappy", "--from", from, "--to", to, "-o", split.path, "--gaps", "split", "--json")
        #expect(s.status == 0, "\(s.stderr)")
        let files = try #require(try JSONSerialization.jsonObject(with: Data(s.stdout.utf8)) as? [[String: Any]])
        #expect(files.compactMap { $0["frames"] as? Int } == [72_000, 72_000], "the audio of each run in the range, and nothing else")
        let second0 = try await Self.samples(try #require(files.last?["output"] as? String), counterFrom: 0, checking: 72_000)
        #expect(second0["wrong"] is NSNull, "the second file is the second run's counter from its start")

        let timeline = try await cli.run("timeline", "--session", "Gappy", "--json")
        #expect(timeline.status == 0, "\(timeline.stderr)")
        let sessions = try #require(try JSONSerialization.jsonObject(with: Data(timeline.stdout.utf8)) as? [[String: Any]])
        let gaps = try #require(sessions.first?["gaps"] as? [[String: Any]])
        #expect(gaps.count == 1 && abs((gaps.first?["seconds"] as? Double ?? 0) * 48_000 - Double(gapFrames)) <= 1, "\(gaps)")
        let text = try await cli.run("timeline", "--session", "Gappy")
        #expect(text.stdout.contains("gap ") && text.stdout.split(separator: "\n").allSatisfy { $0.count <= 80 }, "\(text.stdout)")
    }

    @Test("--from marker:LABEL --duration: the clip begins at the marker's frame")
    func fromAMarker() async throws {
        var cli = try CLIHarness()
        let runtime = cli.library.path + "-run"
        cli.extraEnvironment["XDG_RUNTIME_DIR"] = runtime
        let (p, out, _) = try cli.start(["record", "-d", "3s", "--session", "Marked", "--json", "--set", "capture.null.signal=counter"])
        #expect(try await CLIHarness.wait(timeout: 10) { FileManager.default.fileExists(atPath: runtime + "/tapedeck/recorder-\(p.processIdentifier).json") })
        try await Task.sleep(for: .seconds(1))
        #expect(try await cli.run("mark", "news").status == 0)
        try await CLIHarness.waitForExit(p)
        let take = try #require((try JSONSerialization.jsonObject(with: Data(contentsOf: out)) as? [String: Any])?["take"] as? [String: Any])
        let marker = try #require((take["markers"] as? [[String: Any]])?.first?["frame"] as? Int)
        let clip = cli.library.deletingLastPathComponent().appendingPathComponent("news-\(UUID().uuidString.prefix(6)).wav").path
        let e = try await cli.run("export", "--from", "marker:news", "--duration", "0.5s", "-o", clip)
        #expect(e.status == 0, "\(e.stderr)")
        let got = try await Self.samples(clip, counterFrom: marker, checking: 24_000)
        #expect(got["frames"] as? Int == 24_000 && got["wrong"] is NSNull, "\(got)")
        let missing = try await cli.run("export", "--from", "marker:weather", "--duration", "1s", "-o", clip + ".flac")
        #expect(missing.status == 66 && missing.stderr.contains("weather"), "\(missing.stderr)")
    }
}
