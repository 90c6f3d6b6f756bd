import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// One view of every running recorder (issue 38, point 1): a `tapedeck record` is seen by
/// `tapedeck status` and by the page of a `tapedeck serve` on the same library, which marks,
/// splits and stops it as it does its own recordings.
@Suite("recorders seen and controlled from every place", .endToEnd, .serialized)
struct RecorderControlEndToEndTests {
    /// A harness whose runtime folder is the test's own, and that folder.
    static func harness() throws -> (CLIHarness, String) {
        var cli = try CLIHarness()
        let runtime = cli.library.path + "-run"
        cli.extraEnvironment["XDG_RUNTIME_DIR"] = runtime
        return (cli, runtime)
    }

    /// `status --json`, parsed.
    static func statuses(_ cli: CLIHarness) async throws -> [[String: Any]] {
        let r = try await cli.run("status", "--json")
        #expect(r.status == 0, "\(r.stderr)")
        return try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [[String: Any]])
    }

    /// An HTTP request with python's urllib: the status and the body.
    static func http(_ method: String, _ url: String, _ body: String? = nil) async throws -> (status: Int, body: String) {
        let script = """
            import sys, urllib.request, urllib.error
            method, url, body = sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None
            req = urllib.request.Request(url, method=method, data=body.encode() if body is not None else None,
                                         headers={"X-Tapedeck-Request": "1", "Content-Type": "application/json"})
            try:
                r = urllib.request.urlopen(req, timeout=20); print(r.status); sys.stdout.write(r.read().decode())
            except urllib.error.HTTPError as e:
                print(e.code); sys.stdout.write(e.read().decode())
            """
        let r = try await CLIHarness.tool("python3", ["-c", script, method, url] + (body.map { [$0] } ?? []))
        let lines = r.stdout.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false)
        return (Int(lines.first ?? "") ?? 0, lines.count > 1 ? String(lines[1]) : "")
    }

    /// The page's `api/state`, parsed; `nil` when it does not answer.
    static func pageState(_ base: String) async -> [String: Any]? {
        guard let body = try? await http("GET", base + "api/state").body else { return nil }
        return try? JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any]
    }

    /// Polls the page's state until `ready` holds (60 s at most): whether it did, and the last state.
    static func pageState(_ base: String, until ready: @escaping ([String: Any]) -> Bool) async throws -> (Bool, [String: Any]) {
        var state: [String: Any] = [:]
        let held = try await CLIHarness.wait(timeout: 60) {
            guard let parsed = await pageState(base) else { return false }
            state = parsed
            return ready(parsed)
        }
        return (held, state)
    }

    /// The first channel's level on the page (-90 when there is none).
    static func firstLevel(_ state: [String: Any]) -> Double {
        (state["channels"] as? [[String: Any]])?.first?["level"] as? Double ?? -90
    }

    /// The address a `tapedeck serve` started by `cli.start` prints (`http://127.0.0.1:PORT/`).
    static func servedAddress(_ output: URL) async throws -> String {
        var base = ""
        _ = try await CLIHarness.wait(timeout: 30) {
            let text = (try? String(contentsOf: output, encoding: .utf8)) ?? ""
            guard let range = text.range(of: #"http://127\.0\.0\.1:[0-9]+/"#, options: .regularExpression) else { return false }
            base = String(text[range])
            return true
        }
        try #require(!base.isEmpty, "the server did not say where it listens")
        return base
    }

    @Test("`tapedeck status` shows a running record (target, rate, levels, markers, when it stops; --json), and nothing once it ends")
    func status() async throws {
        let (cli, _) = try Self.harness()
        let idle = try await cli.run("status")
        #expect(idle.status == 0 && idle.stdout.contains("Nothing is recording"), "\(idle.stdout)")
        #expect(try await Self.statuses(cli).isEmpty)
        let (p, _, recordErr) = try cli.start(["record", "--session", "Watched", "--name", "One", "-d", "120s"])
        var found: [String: Any]?
        var last = ""
        _ = try await CLIHarness.wait(timeout: 60) {
            let r = try? await cli.run("status", "--json")
            last = (r?.stdout ?? "") + (r?.stderr ?? "")
            let all = (try? JSONSerialization.jsonObject(with: Data((r?.stdout ?? "").utf8)) as? [[String: Any]]) ?? []
            found = all.first { $0["phase"] as? String == "recording" && ($0["frames"] as? Int ?? 0) >= 48_000 }
            return found != nil
        }
        let s = try #require(found, "status said: \(last); the recorder said: \((try? String(contentsOf: recordErr, encoding: .utf8)) ?? "")")
        #expect(s["pid"] as? Int == Int(p.processIdentifier) && s["startedBy"] as? String == "record")
        #expect(s["target"] as? String == "Watched/One" && s["sampleRate"] as? Int == 48_000)
        #expect(s["library"] as? String == cli.library.path)
        #expect((s["peaks"] as? [Double])?.count == 2)
        // The null source's sine at half scale: about -6 dBFS, measured over the audio that arrived last.
        #expect((s["peaks"] as? [Double])?.allSatisfy { (0.4...0.6).contains($0) } == true, "\(s)")
        #expect(s["stopsAt"] is String && s["splits"] as? Bool == false)
        #expect(try await cli.run("mark", "seen").status == 0)
        let text = try await cli.run("status")
        #expect(text.stdout.contains("PID \(p.processIdentifier) recording Watched/One"), "\(text.stdout)")
        #expect(text.stdout.contains("48 kHz") && text.stdout.contains("L -6.0 R -6.0 dBFS") && text.stdout.contains("stops "), "\(text.stdout)")
        #expect(text.stdout.split(separator: "\n").allSatisfy { $0.count <= 80 })
        kill(p.processIdentifier, SIGTERM)
        try await CLIHarness.waitForExit(p)
        #expect(p.terminationStatus == 0)
        #expect(try await Self.statuses(cli).isEmpty)
    }

    @Test("the page of a serve on the same library shows a tapedeck record's recording, and marks, splits and stops it")
    func pageControlsRecord() async throws {
        let (cli, _) = try Self.harness()
        let (recorder, out, _) = try cli.start(["record", "--session", "CLIrec", "--split", "1h", "--json"])
        let (server, served, _) = try cli.start(["serve", "--listen", "127.0.0.1:0"])
        defer {
            kill(recorder.processIdentifier, SIGKILL)
            kill(server.processIdentifier, SIGTERM)
        }
        let base = try await Self.servedAddress(served)
        // The page's state: recording, with levels, started by `tapedeck record`.
        let (_, state) = try await Self.pageState(base) { $0["recording"] as? Bool == true && Self.firstLevel($0) > -20 }
        let shown = try #require(state["recorder"] as? [String: Any], "\(state)")
        #expect(shown["startedBy"] as? String == "record" && shown["own"] as? Bool == false && shown["splits"] as? Bool == true)
        #expect(shown["pid"] as? Int == Int(recorder.processIdentifier))
        #expect((state["target"] as? String)?.hasPrefix("CLIrec/") == true)
        // A marker, a split, then stop: all from the page, all reaching the recorder.
        #expect(try await Self.http("POST", base + "api/markers", #"{"label": "from the page"}"#).status == 202)
        try await Task.sleep(for: .milliseconds(500))
        #expect(try await Self.http("POST", base + "api/split").status == 202)
        _ = try await CLIHarness.wait(timeout: 30) {
            await Self.pageState(base)?["takeIndex"] as? Int == 2
        }
        try await Task.sleep(for: .milliseconds(500))
        #expect(try await Self.http("POST", base + "api/stop").status == 202)
        try await CLIHarness.waitForExit(recorder, limit: 30)
        #expect(recorder.terminationStatus == 0)
        let report = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: out)) as? [String: Any])
        let takes = try #require(report["takes"] as? [[String: Any]])
        #expect(takes.count == 2)
        #expect((takes.first?["markers"] as? [[String: Any]])?.first?["label"] as? String == "from the page")
        #expect(takes.map { ($0["run"] as? [String: Any])?["ended"] as? String } == ["requested", "stopped"])
        // Nothing records now: the page says so, and the list has the two takes.
        _ = try await CLIHarness.wait(timeout: 30) {
            await Self.pageState(base)?["recording"] as? Bool == false
        }
        let sessions = try await Self.http("GET", base + "api/sessions")
        #expect(sessions.body.contains("CLIrec") && sessions.body.contains(#""takeCount":2"#), "\(sessions.body)")
        #expect(try await Self.http("POST", base + "api/stop").status == 409)
    }
}

extension RecorderControlEndToEndTests {
    /// The logger of the README, time-compressed: hourly becomes every 2 s.
    @Test("a logger started from a shell (--split-align, a strftime --name) is seen on the page with levels, marked and stopped from it; its names, show, bext and ffprobe agree with the boundaries")
    func loggerFromShellOnPage() async throws {
        let (cli, _) = try Self.harness()
        let (recorder, out, recorderErr) = try cli.start(["record", "--session", "Logger", "--split", "2s", "--split-align",
                                                           "--name", "%Y-%m-%d %H.%M.%S", "--json"])
        let (server, served, _) = try cli.start(["serve", "--listen", "127.0.0.1:0"])
        defer {
            kill(recorder.processIdentifier, SIGKILL)
            kill(server.processIdentifier, SIGTERM)
        }
        let base = try await Self.servedAddress(served)
        let (seen, state) = try await Self.pageState(base) {
            $0["recording"] as? Bool == true && ($0["takeIndex"] as? Int ?? 0) >= 2 && Self.firstLevel($0) > -20
        }
        #expect(seen, "\(state); the recorder said: \((try? String(contentsOf: recorderErr, encoding: .utf8)) ?? "")")
        #expect((state["recorder"] as? [String: Any])?["startedBy"] as? String == "record")
        #expect(try await Self.http("POST", base + "api/markers", #"{"label": "news"}"#).status == 202)
        try await Task.sleep(for: .milliseconds(300))
        #expect(try await Self.http("POST", base + "api/stop").status == 202)
        try await CLIHarness.waitForExit(recorder, limit: 30)
        #expect(recorder.terminationStatus == 0)
        let report = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: out)) as? [String: Any])
        let takes = try #require(report["takes"] as? [[String: Any]])
        #expect(takes.count >= 2)
        #expect(takes.contains { (($0["markers"] as? [[String: Any]]) ?? []).contains { $0["label"] as? String == "news" } }, "\(takes)")
        for (i, take) in takes.enumerated() where i > 0 {
            let name = try #require(take["name"] as? String)
            let stamp = String(name.prefix(19))
            let time = stamp.suffix(8).replacingOccurrences(of: ".", with: ":")
            #expect(Int(time.suffix(2))! % 2 == 0, "\(name) is not on a 2-second boundary")
            let detail = try #require(try JSONSerialization.jsonObject(with: Data(try await cli.run("show", take["id"] as? String ?? "", "--json").stdout.utf8)) as? [String: Any])
            #expect((detail["broadcast"] as? [String: Any])?["originationTime"] as? String == time, "\(name): \(detail)")
            let probed = try await CLIHarness.tool("ffprobe", ["-v", "quiet", "-show_entries", "format_tags=creation_time", "-of", "default=nw=1:nk=1",
                                                              take["path"] as? String ?? ""])
            #expect(probed.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == time, "ffprobe: \(probed.stdout) for \(name)")
            let shown = try await cli.run("show", take["id"] as? String ?? "")
            #expect(shown.stdout.contains("Began:     \(String(stamp.prefix(10))) \(time)."), "\(shown.stdout)")
        }
    }
}
