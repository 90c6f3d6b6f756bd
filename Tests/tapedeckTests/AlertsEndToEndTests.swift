import Foundation
import TapedeckTesting
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Alerts from a recording, as a person sets them up: a config with an `alerts:` list, a
/// receiver on loopback, `tapedeck record`, `tapedeck alerts test` and `send`.
@Suite("alerts from a recording", .endToEnd, .serialized)
struct AlertsEndToEndTests {
    /// A harness whose config is ci.yaml's with `alerts` appended, its outbox in a folder of its own.
    static func harness(alerts: String) throws -> (CLIHarness, URL) {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("alerts-e2e-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        chmod(folder.path, 0o700)
        let base = try String(contentsOf: CLIHarness.packageRoot.appendingPathComponent("Configuration/ci.yaml"), encoding: .utf8)
        let config = folder.appendingPathComponent("config.yaml")
        try (base + "\n" + alerts).write(to: config, atomically: true, encoding: .utf8)
        var cli = CLIHarness(configFile: config)
        cli.extraEnvironment = ["XDG_STATE_HOME": folder.appendingPathComponent("state").path]
        return (cli, folder)
    }

    static func outbox(_ folder: URL) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: folder.appendingPathComponent("state/tapedeck/alerts/outbox").path)) ?? [])
            .filter { $0.hasSuffix(".json") }
    }

    @Test("sine, 5 s of silence, sine: one began and one resolved, at the frames the run's report gives")
    func silence() async throws {
        let receiver = try AlertReceiver(.http)
        defer { receiver.close() }
        let (cli, folder) = try Self.harness(alerts: """
            alerts:
              - when: [silence]
                webhook: { url: "\(receiver.url)" }
            """)
        defer {
            try? FileManager.default.removeItem(at: folder)
            try? FileManager.default.removeItem(at: cli.library)
        }
        // On for 2 s, off for 5 s, on again.
        let r = try await cli.run("record", "--json", "--silence-alarm", "2s", "--set", "capture.null.gate=0,2,5,100", "9s")
        #expect(r.status == 6, "the silence alarm went off: \(r.stderr)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        let silences = try #require(report["silences"] as? [[String: Any]])
        #expect(silences.count == 1)
        let bodies = receiver.jsonBodies()
        #expect(bodies.map { $0["phase"] as? String } == ["began", "resolved"], "\(bodies)")
        guard bodies.count == 2 else { return }
        let (began, resolved) = (bodies[0], bodies[1])
        #expect(began["event"] as? String == "silence" && resolved["event"] as? String == "silence")
        #expect(began["offsetSeconds"] as? Double == silences[0]["offsetSeconds"] as? Double, "\(began) \(silences)")
        // Where the gate closed (2 s in), to the block the level is measured in.
        let frame = began["frame"] as? Int ?? -1
        #expect(began["sampleRate"] as? Int == 48_000)
        #expect(frame >= 96_000 && frame < 96_000 + 4_800, "\(began)")
        #expect(Double(frame) / 48_000 == began["offsetSeconds"] as? Double)
        #expect(abs((resolved["durationSeconds"] as? Double ?? 0) - (silences[0]["seconds"] as? Double ?? -1)) < 0.001, "\(resolved) \(silences)")
        #expect(resolved["resolves"] as? String == began["id"] as? String)
        // The resolved alert is at the frame where the silence ended.
        let silentFrames = Int(((silences[0]["seconds"] as? Double ?? 0) * 48_000).rounded())
        #expect(resolved["frame"] as? Int == frame + silentFrames, "\(resolved)")
        #expect((began["take"] as? String)?.hasPrefix("Session 1/") == true, "\(began)")
        #expect(Self.outbox(folder).isEmpty)
    }

    @Test("the receiver down during the events: they wait in the outbox, and the next run sends them once, in order")
    func outboxAcrossRuns() async throws {
        let receiver = try AlertReceiver(.http)
        defer { receiver.close() }
        receiver.stop()
        let token = "tok-\(UUID().uuidString)"
        var (cli, folder) = try Self.harness(alerts: """
            alerts:
              - when: [silence]
                name: hook
                webhook: { url: "\(receiver.url)", token-env: ALERT_TOKEN }
            """)
        cli.extraEnvironment["ALERT_TOKEN"] = token
        defer {
            try? FileManager.default.removeItem(at: folder)
            try? FileManager.default.removeItem(at: cli.library)
        }
        let first = try await cli.run("record", "--silence-alarm", "1s", "--set", "capture.null.gate=0,1,3,100", "6s")
        #expect(first.status == 6)
        #expect(first.stderr.contains("2 alerts for hook (webhook http://127.0.0.1:\(receiver.port)/…)"), "\(first.stderr)")
        #expect(first.stderr.contains("`tapedeck alerts send`"))
        #expect(Self.outbox(folder).count == 2)
        let listed = try await cli.run("alerts", "list")
        #expect(listed.stdout.contains("waiting in the outbox: 2 alerts"), "\(listed.stdout)")
        // Back up; the next run (a new process) sends them first.
        try receiver.start()
        let second = try await cli.run("record", "2s")
        #expect(second.status == 0, "\(second.stderr)")
        let bodies = receiver.jsonBodies()
        #expect(bodies.map { $0["phase"] as? String } == ["began", "resolved"], "\(bodies)")
        #expect(Set(bodies.compactMap { $0["id"] as? String }).count == 2)
        #expect(receiver.received().allSatisfy { ($0["headers"] as? [String: String])?["authorization"] == "Bearer \(token)" })
        let send = try await cli.run("alerts", "send")
        #expect(send.status == 0 && send.stdout.contains("nothing to send"), "\(send.stdout) \(send.stderr)")
        #expect(first.stderr.contains("Sending 2 alerts (up to 10 s; Ctrl-C leaves them in the outbox)"), "\(first.stderr)")
        #expect(receiver.received().count == 2)
        // The token is in no output and no file Tapedeck wrote.
        for text in [first.stdout, first.stderr, second.stdout, second.stderr, listed.stdout, listed.stderr, send.stdout, send.stderr] {
            #expect(!text.contains(token))
        }
        let written = FileManager.default.enumerator(atPath: folder.path)?.allObjects as? [String] ?? []
        for path in written {
            let text = (try? String(contentsOf: folder.appendingPathComponent(path), encoding: .utf8)) ?? ""
            #expect(!text.contains(token), "\(path)")
        }
    }

    @Test("alerts test says which route worked and which did not; config check names a wrong rule's line")
    func testAndCheck() async throws {
        let receiver = try AlertReceiver(.http)
        defer { receiver.close() }
        let closed = try AlertReceiver(.http)
        let closedPort = closed.port
        closed.close()
        let (cli, folder) = try Self.harness(alerts: """
            alerts:
              - when: [all]
                name: works
                webhook: { url: "\(receiver.url)", template: text }
              - when: [disk-low]
                name: down
                ntfy: { url: "http://127.0.0.1:\(closedPort)/topic" }
            """)
        defer {
            try? FileManager.default.removeItem(at: folder)
            try? FileManager.default.removeItem(at: cli.library)
        }
        let r = try await cli.run("alerts", "test")
        #expect(r.status == 74, "\(r.stdout) \(r.stderr)")
        #expect(r.stdout.contains("works: webhook http://127.0.0.1:\(receiver.port)/…: sent"), "\(r.stdout)")
        #expect(r.stdout.contains("down: ntfy http://127.0.0.1:\(closedPort)/…: FAILED: The ntfy"), "\(r.stdout)")
        #expect(r.stderr.contains("1 of 2 routes did not take the test alert"), "\(r.stderr)")
        let text = try #require(receiver.jsonBodies().first?["text"] as? String)
        #expect(text.hasPrefix("Test alert on "), "\(text)")

        let (bad, badFolder) = try Self.harness(alerts: """
            alerts:
              - when: [silence, disk-lo]
                webhook: { url: "https://hooks.example.org/x" }
            """)
        defer { try? FileManager.default.removeItem(at: badFolder) }
        let check = try await bad.run("config", "check", "--offline")
        #expect(check.status == 78, "\(check.stdout) \(check.stderr)")
        #expect((check.stdout + check.stderr).contains("alerts[1].when: \"disk-lo\" is not an event (did you mean \"disk-low\"?)"), "\(check.stdout) \(check.stderr)")
    }

    @Test("push --watch: a remote that cannot be reached is one upload-failed alert, resolved when it answers; serve's /metrics counts the backlog")
    func uploads() async throws {
        let receiver = try AlertReceiver(.http)
        defer { receiver.close() }
        let server = try await S3Server.startAsync(.rclone)
        defer { server.remove() }
        let (folder, file) = try FleetEndToEndTests.workspace(server)
        defer { try? FileManager.default.removeItem(at: folder) }
        try (try String(contentsOf: file, encoding: .utf8) + """

            alerts:
              - when: [upload-failed, upload-stale]
                webhook: { url: "\(receiver.url)" }
            """).write(to: file, atomically: true, encoding: .utf8)
        var studio = FleetEndToEndTests.machine(file, server, folder: folder, name: "studio")
        studio.extraEnvironment["XDG_STATE_HOME"] = folder.appendingPathComponent("state").path
        #expect(try await studio.run("record", "--machine", "studio", "-d", "1").status == 0)
        #expect(try await studio.run("record", "--machine", "studio", "-d", "1").status == 0)
        // The remote is down when push --watch starts.
        server.stop()
        let (push, _, pushErrors) = try studio.start(["push", "--machine", "studio", "--watch", "--interval", "1"])
        defer { kill(push.processIdentifier, SIGKILL) }
        _ = try await CLIHarness.wait(timeout: 60) { receiver.jsonBodies().count >= 1 }
        var bodies = receiver.jsonBodies()
        #expect(bodies.map { $0["event"] as? String } == ["upload-failed"], "\(bodies)")
        #expect(bodies.first?["phase"] as? String == "began", "\(bodies)")

        // A server on the library counts what waits.
        let (serve, served, _) = try studio.start(["serve", "--machine", "studio", "--listen", "127.0.0.1:0"])
        defer { kill(serve.processIdentifier, SIGTERM) }
        let base = try await RecorderControlEndToEndTests.servedAddress(served)
        let before = MetricsEndToEndTests.series(try await RecorderControlEndToEndTests.http("GET", base + "metrics").body)
        #expect(before["tapedeck_upload_backlog_takes"] == 2, "\(before)")
        #expect((before["tapedeck_upload_backlog_bytes"] ?? 0) > 2 * 48_000 * 4)

        // The remote answers again: the takes go, the alert is resolved, once.
        try server.restart()
        _ = try await CLIHarness.wait(timeout: 60) { receiver.jsonBodies().count >= 2 }
        try await Task.sleep(for: .seconds(2))
        bodies = receiver.jsonBodies()
        #expect(bodies.map { $0["phase"] as? String } == ["began", "resolved"], "\(bodies) \((try? String(contentsOf: pushErrors, encoding: .utf8)) ?? "")")
        #expect(bodies.last?["resolves"] as? String == bodies.first?["id"] as? String)
        var after: [String: Double] = [:]
        _ = try await CLIHarness.wait(timeout: 20) {
            after = MetricsEndToEndTests.series((try? await RecorderControlEndToEndTests.http("GET", base + "metrics"))?.body ?? "")
            return after["tapedeck_upload_backlog_takes"] == 0
        }
        #expect(after["tapedeck_upload_backlog_takes"] == 0 && after["tapedeck_upload_backlog_oldest_seconds"] == 0, "\(after)")
        kill(push.processIdentifier, SIGINT)
        push.waitUntilExit()
        #expect(push.terminationStatus == 0, "\((try? String(contentsOf: pushErrors, encoding: .utf8)) ?? "")")
    }
}
