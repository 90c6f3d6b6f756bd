import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Programme takes (`record --program`, `programs:`): a take of its own for each programme,
/// cut from the same capture while the hourly log goes on, checked against the null backend's
/// counter and against the log's own frames.
@Suite("programme takes end to end", .endToEnd)
struct ProgramTakesEndToEndTests {
    /// `HH:MM:SS` on this machine's clock, `seconds` from now.
    static func clock(_ seconds: Double) -> String {
        var t = time_t(Date().addingTimeInterval(seconds).timeIntervalSince1970)
        var parts = tm()
        localtime_r(&t, &parts)
        return String(format: "%02d:%02d:%02d", parts.tm_hour, parts.tm_min, parts.tm_sec)
    }

    /// A take's bext TimeReference (frames since local midnight).
    static func timeReference(_ take: [String: Any]) throws -> Int {
        try #require((take["broadcast"] as? [String: Any])?["timeReference"] as? Int, "\(take)")
    }

    /// Frames from `a`'s TimeReference to `b`'s (over midnight too).
    static func frames(from a: [String: Any], to b: [String: Any]) throws -> Int {
        let day = 86_400 * 48_000
        return ((try timeReference(b) - timeReference(a)) % day + day) % day
    }

    static func showJSON(_ cli: CLIHarness, _ take: String) async throws -> [String: Any] {
        let r = try await cli.run("show", take, "--json")
        try #require(r.status == 0, "\(r.stderr)")
        return try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
    }

    @Test("beside a log split every minute: the programme's take is its padded window, sample for sample the log's frames; the timeline reads the log")
    func programmeBesideTheLog() async throws {
        let cli = try CLIHarness()
        // Ten unpaced minutes from now on the recording's clock; the programme 3:20 to 5:20 into them, padded 30 s.
        let (start, end) = (Self.clock(200), Self.clock(320))
        let r = try await cli.run("record", "-d", "10m", "--split", "1m", "--split-align", "--session", "Logger", "--json",
                                  "--program", "News \(start)-\(end) pad 30s", "--set", "encoder.name=flac",
                                  "--set", "capture.null.signal=counter", "--set", "capture.null.paced=false")
        try #require(r.status == 0, "\(r.stderr)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        let run = try #require(report["takes"] as? [[String: Any]])
        #expect(run.reduce(0) { $0 + ($1["frames"] as? Int ?? 0) } == 600 * 48_000, "the log goes on unchanged: every frame in its takes")
        let programmes = try #require(report["programTakes"] as? [[String: Any]])
        try #require(programmes.count == 1, "\(report)")
        let programme = programmes[0]
        // Both ends are placed on the run's frames from the same clock anchor: 180 s, give or take the rounding of each.
        #expect(abs((programme["frames"] as? Int ?? 0) - 180 * 48_000) <= 1, "two minutes and 30 s either side: \(programme["frames"] ?? "")")
        #expect((programme["name"] as? String)?.hasPrefix("News ") == true && (programme["tags"] as? [String: String])?["PROGRAM"] == "News", "\(programme)")
        let path = try #require(programme["path"] as? String)
        #expect(try await CLIHarness.tool("flac", ["-t", "-s", path]).status == 0)
        // Where it begins in the run, from the catalog's first-frame times (to the microsecond); the counter says the rest.
        let offset = Int(((try await TimelineExportEndToEndTests.seconds(programme) - TimelineExportEndToEndTests.seconds(run[0])) * 48_000).rounded())
        // About 2:50 into the run: the times are whole seconds, and the recorder starts a moment after
        // they were read (longer on a busy machine).
        #expect(abs(offset - 170 * 48_000) <= 15 * 48_000, "the padded start is about 2:50 into the run: \(offset)")
        let got = try await TimelineExportEndToEndTests.samples(path, counterFrom: offset, checking: programme["frames"] as? Int ?? 0)
        #expect(got["wrong"] is NSNull, "the programme's take is the run's counter from its first frame: \(got)")
        // The same stretch exported from the log (the timeline does not count the programme's copy).
        let began = try await TimelineExportEndToEndTests.seconds(programme)
        let clip = cli.library.deletingLastPathComponent().appendingPathComponent("log-\(UUID().uuidString.prefix(6)).wav").path
        let e = try await cli.run("export", "--session", "Logger", "--from", try await TimelineExportEndToEndTests.iso(began),
                                  "--duration", "\(Double(programme["frames"] as? Int ?? 0) / 48_000)s", "-o", clip, "--json")
        try #require(e.status == 0, "\(e.stderr)")
        let exported = try #require((try JSONSerialization.jsonObject(with: Data(e.stdout.utf8)) as? [[String: Any]])?.first)
        let from = try #require((exported["clip"] as? [String: Any])?["takes"] as? [String])
        #expect(!from.contains { $0.hasPrefix("News") } && from.count >= 3, "the clip is cut from the log's takes: \(from)")
        let same = try await CLIHarness.tool("python3", ["-c", """
            import subprocess, sys
            raw = lambda p: subprocess.run(["sox", p, "-t", "raw", "-e", "signed", "-b", "16", "-L", "-"], check=True, capture_output=True).stdout
            a, b = raw(sys.argv[1]), raw(sys.argv[2])
            print("same" if a == b else "differ %d %d" % (len(a), len(b)))
            """, path, clip])
        #expect(same.stdout.hasPrefix("same"), "the programme's take holds the log's samples over the same frames: \(same.stdout)")
    }

    @Test("killed mid-programme: the log's take and the programme's take are both recovered, each the counter where it began")
    func killedMidProgramme() async throws {
        let cli = try CLIHarness()
        let (start, end) = (Self.clock(3), Self.clock(120))
        let (p, out, _) = try cli.start(["record", "--split", "2s", "--session", "Killed", "--program", "Live \(start)-\(end)",
                                         "--set", "capture.null.signal=counter"])
        // Past the programme's start (3 s on the clock, rounded down to the second) by a few seconds.
        try await Task.sleep(for: .seconds(7))
        kill(p.processIdentifier, SIGKILL)
        p.waitUntilExit()
        _ = out
        let l = try await cli.run("list", "--json")
        try #require(l.status == 0, "\(l.stderr)")
        #expect(l.stderr.contains("Recovered take \"Live "), "\(l.stderr)")
        let sessions = try #require(try JSONSerialization.jsonObject(with: Data(l.stdout.utf8)) as? [[String: Any]])
        let takes = try #require(sessions.first?["takes"] as? [[String: Any]])
        let live = try #require(takes.first { ($0["name"] as? String)?.hasPrefix("Live ") == true }, "\(takes)")
        let log = takes.filter { ($0["name"] as? String)?.hasPrefix("Take ") == true }
        #expect(live["state"] as? String == "recovered" && (live["frames"] as? Int ?? 0) > 48_000, "\(live)")
        #expect(log.contains { $0["state"] as? String == "recovered" }, "the log's take being written is recovered too: \(log)")
        // Both hold the run's counter from where they began.
        let zero = try await Self.showJSON(cli, "Killed/Take 1")
        let liveShown = try await Self.showJSON(cli, "Killed/\(try #require(live["name"] as? String))")
        let offset = try Self.frames(from: zero, to: liveShown)
        // The programme began 2 to 3 s after this test read the clock: into the run, or at its start
        // when the recorder was slower than that to start.
        #expect(offset >= 0 && offset < 6 * 48_000, "\(offset)")
        let livePath = try #require(liveShown["path"] as? String)
        let got = try await TimelineExportEndToEndTests.samples(livePath, counterFrom: offset, checking: live["frames"] as? Int ?? 0)
        #expect(got["wrong"] is NSNull, "the recovered programme take is the run's counter from its first frame: \(got)")
        for t in log {
            let shown = try await Self.showJSON(cli, "Killed/\(try #require(t["name"] as? String))")
            let at = try Self.frames(from: zero, to: shown)
            let check = try await TimelineExportEndToEndTests.samples(try #require(shown["path"] as? String), counterFrom: at, checking: t["frames"] as? Int ?? 0)
            #expect(check["wrong"] is NSNull, "\(t["name"] ?? "") holds the counter from \(at): \(check)")
        }
    }

    @Test("programs: in the config, with days: refused with its line when wrong; kept when right; -o refuses --program")
    func programmesFromTheConfig() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-programs-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let config = folder.appendingPathComponent("tapedeck.yaml")
        let base = "capture:\n  backend: null\n  null:\n    signal: counter\n    paced: false\n"
        try (base + "programs:\n  - name: Bad\n    time: \"09:00-10:00\"\n    padding: 1m\n").write(to: config, atomically: true, encoding: .utf8)
        let cli = CLIHarness(configFile: config)
        let bad = try await cli.run("record", "-d", "1s", "--session", "P")
        #expect(bad.status == 78, "\(bad.stderr)")
        #expect(bad.stderr.contains("tapedeck.yaml:9") && bad.stderr.contains("padding: unknown setting"), "\(bad.stderr)")
        // Every day of the week, so today is one: a programme 1 s into the run, for 2 s.
        let (start, end) = (Self.clock(60), Self.clock(62))
        try (base + "programs:\n  - name: Short\n    time: \"\(start)-\(end)\"\n    days: mon-sun\n").write(to: config, atomically: true, encoding: .utf8)
        let r = try await cli.run("record", "-d", "3m", "--session", "P", "--json")
        try #require(r.status == 0, "\(r.stderr)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        let kept = try #require(report["programTakes"] as? [[String: Any]])
        #expect(kept.count == 1 && abs((kept.first?["frames"] as? Int ?? 0) - 2 * 48_000) <= 1, "\(kept)")
        let o = try await CLIHarness().run("record", "-d", "1s", "-o", folder.appendingPathComponent("x.wav").path, "--program", "A 09:00-10:00")
        #expect(o.status == 64 && o.stderr.contains("--program"), "\(o.stderr)")
        let typo = try await CLIHarness().run("record", "-d", "1s", "--program", "News 09:00-09:10 pad")
        #expect(typo.status == 64 && typo.stderr.contains("pad needs a duration"), "\(typo.stderr)")
    }
}
