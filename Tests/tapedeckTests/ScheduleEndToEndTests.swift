import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `tapedeck schedule` as a person reads it, from a config file.
@Suite("the schedule command", .endToEnd, .serialized)
struct ScheduleEndToEndTests {
    static func harness(_ yaml: String) throws -> (CLIHarness, URL) {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("schedule-e2e-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        chmod(folder.path, 0o700)
        let config = folder.appendingPathComponent("config.yaml")
        try yaml.write(to: config, atomically: true, encoding: .utf8)
        return (CLIHarness(configFile: config), folder)
    }

    @Test("the next stretches across the change to summer time, in local time and UTC; a polar window skipped and said; a wrong window named with its line")
    func schedule() async throws {
        let (cli, folder) = try Self.harness("""
            schedule:
              timezone: Europe/Amsterdam
              windows:
                - { from: "02:30", to: "04:00" }
            """)
        defer { try? FileManager.default.removeItem(at: folder) }
        let r = try await cli.run("schedule", "--from", "2027-03-28T00:00", "--next", "2")
        #expect(r.status == 0, "\(r.stderr)")
        let lines = r.stdout.split(separator: "\n").map(String.init)
        #expect(lines.contains("  1. 02:30 to 04:00"), "\(r.stdout)")
        // 2027-03-28: 02:00 CET becomes 03:00 CEST; the window begins when the clock passes 02:30.
        #expect(lines.contains { $0.hasPrefix("  Sun 2027-03-28 03:00:00 → 04:00:00") && $0.contains("(01:00:00 → 02:00:00 UTC) window 1") }, "\(r.stdout)")
        #expect(lines.contains { $0.hasPrefix("  Mon 2027-03-29 02:30:00 → 04:00:00") && $0.contains("(00:30:00 → 02:00:00 UTC)") }, "\(r.stdout)")
        #expect(r.stdout.split(separator: "\n").allSatisfy { $0.count <= 80 }, "80 columns: \(r.stdout)")
        let json = try await cli.run("schedule", "--from", "2027-03-28T00:00", "--next", "1", "--json")
        let parsed = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        #expect((parsed["stretches"] as? [[String: Any]])?.first?["start"] as? String == "2027-03-28T03:00:00+02:00", "\(json.stdout)")

        let (polar, polarFolder) = try Self.harness("""
            schedule:
              timezone: Arctic/Longyearbyen
              location: { latitude: 78.22, longitude: 15.65 }
              windows:
                - { from: sunset, to: sunset+1h }
            """)
        defer { try? FileManager.default.removeItem(at: polarFolder) }
        let p = try await polar.run("schedule", "--from", "2027-06-20T00:00", "--next", "1")
        #expect(p.status == 0 && p.stdout.contains("the sun does not reach sunset that day at 78.22° north"), "\(p.stdout)")

        let (bad, badFolder) = try Self.harness("""
            schedule:
              timezone: Europe/Amsterdam
              windows:
                - { from: "06:00", to: "sunset" }
            """)
        defer { try? FileManager.default.removeItem(at: badFolder) }
        let check = try await bad.run("config", "check", "--offline")
        #expect(check.status == 78, "\(check.stdout) \(check.stderr)")
        #expect((check.stdout + check.stderr).contains("config.yaml:4: schedule.windows[1]: sunset needs schedule.location"), "\(check.stdout) \(check.stderr)")
    }
}

extension ScheduleEndToEndTests {
    /// `HH:MM:SS` in UTC, `seconds` from `base`.
    static func clock(_ base: Date, _ seconds: Double) -> String {
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.timeZone = TimeZone(identifier: "UTC")
        f.dateFormat = "HH:mm:ss"
        return f.string(from: base.addingTimeInterval(seconds))
    }

    @Test("record --schedule: started inside a stretch it records at once (schedule-catch-up) to the stretch's end, waits, and records the next (schedule)")
    func recordOnSchedule() async throws {
        // Whole seconds, so the windows' clock times are exact.
        let base = Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.up) + 1)
        let (cli, folder) = try Self.harness("""
            capture: { backend: null, null: { paced: true } }
            format: { sample-rate: 48000, channels: 1, sample-format: s16 }
            schedule:
              timezone: UTC
              windows:
                - { from: "\(Self.clock(base, -5))", to: "\(Self.clock(base, 3))" }
                - { from: "\(Self.clock(base, 6))", to: "\(Self.clock(base, 8))" }
            """)
        defer {
            try? FileManager.default.removeItem(at: folder)
            try? FileManager.default.removeItem(at: cli.library)
        }
        while Date() < base { try await Task.sleep(for: .milliseconds(20)) }
        let (p, out, err) = try cli.start(["record", "--schedule", "--session", "Dawn", "--json"])
        try await Task.sleep(for: .seconds(10))
        kill(p.processIdentifier, SIGINT)
        try await CLIHarness.waitForExit(p, limit: 30)
        let said = (try? String(contentsOf: err, encoding: .utf8)) ?? ""
        #expect(p.terminationStatus == 0, "\(said)")
        #expect(said.contains("Inside a stretch of the schedule since"), "\(said)")
        #expect(said.contains("Waiting for the schedule: the next stretch is"), "\(said)")
        let listed = try await cli.run("list", "--json")
        let sessions = try #require(try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [[String: Any]])
        let takes = sessions.flatMap { $0["takes"] as? [[String: Any]] ?? [] }
        #expect(takes.count == 2, "\(listed.stdout)")
        guard takes.count == 2 else { return }
        let began = takes.map { ($0["run"] as? [String: Any])?["began"] as? String }
        #expect(began == ["schedule-catch-up", "schedule"], "\(takes)")
        // The first ends with its stretch, 3 s after the start; the second lasts its 2 s.
        let seconds = takes.map { $0["seconds"] as? Double ?? 0 }
        #expect(abs(seconds[0] - 3) < 0.5 && abs(seconds[1] - 2) < 0.1, "\(seconds)")
        try? FileManager.default.removeItem(at: out)
        try? FileManager.default.removeItem(at: err)
    }

    @Test("the page of tapedeck serve shows the next stretches in the schedule's zone, the one under way marked, as tapedeck schedule lists them")
    func page() async throws {
        let base = try String(contentsOf: CLIHarness.packageRoot.appendingPathComponent("Configuration/ci.yaml"), encoding: .utf8)
        let (cli, folder) = try Self.harness(base + """

            schedule:
              timezone: America/New_York
              windows:
                - { from: "00:00", to: "23:59" }
            """)
        defer {
            try? FileManager.default.removeItem(at: folder)
            try? FileManager.default.removeItem(at: cli.library)
        }
        let listed = try await cli.run("schedule", "--next", "5", "--json")
        let stretches = try #require((try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [String: Any])?["stretches"] as? [[String: Any]])
        let (server, served, _) = try cli.start(["serve", "--listen", "127.0.0.1:0"])
        defer { kill(server.processIdentifier, SIGTERM) }
        let address = try await RecorderControlEndToEndTests.servedAddress(served)
        let page = try await RecorderControlEndToEndTests.http("GET", address)
        #expect(page.status == 200)
        let section = try #require(page.body.range(of: #"<section id="schedule"[\s\S]*?</section>"#, options: .regularExpression).map { String(page.body[$0]) },
                                   "\(page.body)")
        #expect(section.contains("America/New_York"), "\(section)")
        #expect(section.components(separatedBy: "<tr").count - 2 == stretches.count, "\(section)")
        // The day's stretch is under way (unless this runs in the minute between two of them).
        let first = try #require(ISO8601DateFormatter().date(from: stretches.first?["start"] as? String ?? ""))
        if first < Date() {
            #expect(section.contains("<tr class=\"now\">") && section.contains("recording now"), "\(section)")
        }
        // Each row's start, as `schedule --json` gives it in local time (`…T00:00:00-05:00`: 00:00).
        for stretch in stretches {
            let start = try #require(stretch["start"] as? String)
            let time = String(start.dropFirst(11).prefix(5))
            #expect(section.contains(" \(time)</td>"), "\(start) not on the page: \(section)")
        }
    }
}
