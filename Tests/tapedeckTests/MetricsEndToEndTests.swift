import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `tapedeck serve`'s `/metrics` and `/api/health` while a `tapedeck record` records into its
/// library, read as Prometheus and a load balancer would.
@Suite("metrics and health of a served library", .endToEnd, .serialized)
struct MetricsEndToEndTests {
    /// `name{labels} value` lines of an exposition, by series.
    static func series(_ text: String) -> [String: Double] {
        var values: [String: Double] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " ") else { continue }
            values[String(line[..<space])] = Double(line[line.index(after: space)...]) ?? .nan
        }
        return values
    }

    @Test("promtool accepts a scrape; takes by state are list --json's, the recorder's rate and channels are the run's; a device that hangs makes health 503")
    func scrape() async throws {
        let (cli, _) = try RecorderControlEndToEndTests.harness()
        defer { try? FileManager.default.removeItem(at: cli.library) }
        // Two finished takes and one cut short by a lost device.
        #expect(try await cli.run("record", "--session", "Done", "1s").status == 0)
        #expect(try await cli.run("record", "--session", "Done", "1s").status == 0)
        #expect(try await cli.run("record", "--session", "Done", "--set", "capture.null.device-loss-at-frame=24000", "2s").status == 4)
        // A recording whose device hangs after 3 s, and a server on the same library.
        let (recorder, _, _) = try cli.start(["record", "--session", "Live", "--set", "capture.null.freeze-at-frame=144000"])
        let (server, served, _) = try cli.start(["serve", "--listen", "127.0.0.1:0"])
        defer {
            kill(recorder.processIdentifier, SIGKILL)
            kill(server.processIdentifier, SIGTERM)
        }
        let base = try await RecorderControlEndToEndTests.servedAddress(served)
        _ = try await RecorderControlEndToEndTests.pageState(base) { $0["recording"] as? Bool == true }
        let healthy = try await RecorderControlEndToEndTests.http("GET", base + "api/health")
        #expect(healthy.status == 200, "\(healthy.body)")
        #expect(healthy.body.contains(#""problems":[]"#), "\(healthy.body)")

        let scraped = try await RecorderControlEndToEndTests.http("GET", base + "metrics")
        #expect(scraped.status == 200)
        let file = cli.library.appendingPathExtension("metrics.txt")
        try scraped.body.write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        let lint = try await CLIHarness.tool("sh", ["-c", "promtool check metrics < '\(file.path)'"])
        #expect(lint.status == 0, "promtool: \(lint.stdout) \(lint.stderr)")
        let values = Self.series(scraped.body)
        #expect(values["tapedeck_recording"] == 1 && values["tapedeck_healthy"] == 1, "\(scraped.body)")
        #expect(values["tapedeck_recorder_sample_rate_hertz"] == 48_000)
        #expect(values[#"tapedeck_channel_level_dbfs{channel="2"}"#] != nil && values[#"tapedeck_channel_level_dbfs{channel="3"}"#] == nil)
        #expect(values[#"tapedeck_recorder_phase{phase="recording"}"#] == 1)
        // Takes by state, as `list --json` counts them.
        let listed = try await cli.run("list", "--json")
        let sessions = try #require(try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [[String: Any]])
        var states: [String: Double] = [:]
        for session in sessions { for take in session["takes"] as? [[String: Any]] ?? [] { states[take["state"] as? String ?? "", default: 0] += 1 } }
        #expect(states == ["complete": 2, "interrupted": 1, "recording": 1], "\(listed.stdout)")
        for (state, count) in states {
            #expect(values["tapedeck_takes{state=\"\(state)\"}"] == count, "\(state): \(scraped.body)")
        }
        #expect(values[#"tapedeck_takes{state="truncated"}"#] == 0)
        #expect(values["tapedeck_sessions"] == Double(sessions.count))

        // The device hangs: no frames for 10 s makes the server unhealthy, and says why.
        var sick = (status: 0, body: "")
        _ = try await CLIHarness.wait(timeout: 40) {
            sick = (try? await RecorderControlEndToEndTests.http("GET", base + "api/health")) ?? (0, "")
            return sick.status == 503
        }
        #expect(sick.status == 503, "\(sick.body)")
        #expect(sick.body.contains("delivered no audio for"), "\(sick.body)")
        let after = Self.series(try await RecorderControlEndToEndTests.http("GET", base + "metrics").body)
        #expect(after["tapedeck_healthy"] == 0)
        #expect((after["tapedeck_recorder_seconds_since_last_frame"] ?? 0) >= 10)
    }

    @Test("record --metrics: the run's own scrape, which promtool accepts, without the library's counts; an address in use or not one is refused before recording")
    func recordMetrics() async throws {
        let (cli, _) = try RecorderControlEndToEndTests.harness()
        defer { try? FileManager.default.removeItem(at: cli.library) }
        let (recorder, _, said) = try cli.start(["record", "--session", "Watched", "-c", "3", "--metrics", "127.0.0.1:0", "30s"])
        defer { kill(recorder.processIdentifier, SIGKILL) }
        let base = try await RecorderControlEndToEndTests.servedAddress(said)
        var values: [String: Double] = [:]
        var body = ""
        _ = try await CLIHarness.wait(timeout: 20) {
            body = (try? await RecorderControlEndToEndTests.http("GET", base + "metrics"))?.body ?? ""
            values = Self.series(body)
            return values["tapedeck_recording"] == 1 && (values["tapedeck_recorder_frames"] ?? 0) > 0
        }
        #expect(values["tapedeck_recording"] == 1 && values["tapedeck_healthy"] == 1, "\(body)")
        #expect(values[#"tapedeck_channel_level_dbfs{channel="3"}"#] != nil && values[#"tapedeck_channel_level_dbfs{channel="4"}"#] == nil)
        // The null device's sine at half scale: its RMS is 3.01 dB below its peak, -9.03 dBFS.
        for channel in 1...3 {
            let rms = values["tapedeck_channel_rms_dbfs{channel=\"\(channel)\"}"] ?? 0
            #expect(abs(rms - -9.03) < 0.2, "channel \(channel): \(rms) dBFS: \(body)")
        }
        #expect(values["tapedeck_recorder_sample_rate_hertz"] == 48_000)
        #expect((values["tapedeck_recorder_take_bytes"] ?? 0) > 44 && values["tapedeck_recorder_silent"] == 0 && values["tapedeck_recorder_silence_alarms"] == 0, "\(body)")
        #expect(!body.contains("tapedeck_takes") && !body.contains("tapedeck_sessions"), "the run does not count the library")
        let file = cli.library.appendingPathExtension("record-metrics.txt")
        try body.write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        let lint = try await CLIHarness.tool("sh", ["-c", "promtool check metrics < '\(file.path)'"])
        #expect(lint.status == 0, "promtool: \(lint.stdout) \(lint.stderr)")
        #expect(try await RecorderControlEndToEndTests.http("GET", base + "api/state").status == 404)
        // The port it listens on is taken: a second recorder asking for it is refused, and records nothing.
        let port = try #require(base.split(separator: ":").last.map { $0.filter(\.isNumber) })
        let clash = try await cli.run("record", "--session", "Second", "--metrics", "127.0.0.1:\(port)", "2s")
        #expect(clash.status == 75, "\(clash.stderr)")
        #expect(clash.stderr.contains("in use") && clash.stderr.contains("--metrics"), "\(clash.stderr)")
        let bad = try await cli.run("record", "--metrics", "here:there", "1s")
        #expect(bad.status == 64 && bad.stderr.contains("--metrics here:there") && bad.stderr.contains("no token") && !bad.stderr.contains("8470"), "\(bad.stderr)")
        kill(recorder.processIdentifier, SIGINT)
        recorder.waitUntilExit()
        let listed = try await cli.run("list", "--json")
        #expect(!listed.stdout.contains("Second"), "the refused recorder made a take: \(listed.stdout)")
    }
}
