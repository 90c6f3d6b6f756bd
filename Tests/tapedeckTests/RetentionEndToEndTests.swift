import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `tapedeck retention` on a real library: the oldest unprotected takes go below the floor, a
/// noted take never does, --dry-run deletes nothing, and a missing or wrong section is refused.
@Suite("retention of a library", .endToEnd, .serialized)
struct RetentionEndToEndTests {
    @Test("below the floor the oldest unprotected takes go, through the library; a noted take stays; --dry-run deletes nothing")
    func floor() async throws {
        var cli = try CLIHarness()
        cli.extraEnvironment["XDG_STATE_HOME"] = cli.library.path + "-state"
        defer {
            try? FileManager.default.removeItem(at: cli.library)
            try? FileManager.default.removeItem(atPath: cli.library.path + "-state")
        }
        for name in ["One", "Two", "Three"] {
            #expect(try await cli.run("record", "--session", "Logger", "--name", name, "1s").status == 0)
        }
        #expect(try await cli.run("note", "Logger/Two", "the owl").status == 0)
        // No free-space floor a disk can meet: every take that may go, goes, oldest first.
        let floor = ["--set", "retention.free-space-floor=99%"]
        let dry = try await cli.run(["retention", "--dry-run", "--json"] + floor)
        #expect(dry.status == 0, "\(dry.stderr)")
        let plan = try #require(try JSONSerialization.jsonObject(with: Data(dry.stdout.utf8)) as? [String: Any])
        let listed = (plan["deleted"] as? [[String: Any]] ?? []).map { $0["take"] as? String }
        #expect(listed == ["One", "Three"], "\(dry.stdout)")
        #expect((plan["protected"] as? [String: Int])?["marked"] == 1)
        #expect((plan["deleted"] as? [[String: Any]])?.allSatisfy { $0["reason"] as? String == "free-space" } == true)
        #expect(try await cli.run("list", "Logger").stdout.contains("Three"), "--dry-run deletes nothing")

        let real = try await cli.run(["retention"] + floor)
        #expect(real.status == 0, "\(real.stderr)")
        #expect(real.stdout.contains("Deleted 2 takes"), "\(real.stdout)")
        #expect(real.stdout.contains("Kept whatever their age: 1 with markers, notes or tags."), "\(real.stdout)")
        let after = try await cli.run("list", "--json")
        let sessions = try #require(try JSONSerialization.jsonObject(with: Data(after.stdout.utf8)) as? [[String: Any]])
        #expect(sessions.flatMap { $0["takes"] as? [[String: Any]] ?? [] }.map { $0["name"] as? String } == ["Two"])
        let audio = try FileManager.default.subpathsOfDirectory(atPath: cli.library.path).filter { $0.hasSuffix(".wav") }
        #expect(audio.count == 1, "the deleted takes' files are gone: \(audio)")
        #expect(try await cli.run("doctor").status == 0)
        // The deletions are counted at /metrics of a serve on the library.
        let (server, served, _) = try cli.start(["serve", "--listen", "127.0.0.1:0"])
        defer { kill(server.processIdentifier, SIGTERM) }
        let base = try await RecorderControlEndToEndTests.servedAddress(served)
        let metrics = try await RecorderControlEndToEndTests.http("GET", base + "metrics").body
        #expect(MetricsEndToEndTests.series(metrics)["tapedeck_retention_deleted_takes_total"] == 2, "\(metrics)")
    }

    @Test("without a retention section, and with a wrong value, retention says what to write; without a config file, where it goes")
    func refused() async throws {
        let cli = try CLIHarness()
        defer { try? FileManager.default.removeItem(at: cli.library) }
        let none = try await cli.run("retention")
        #expect(none.status == 78 && none.stderr.contains("No retention is configured in "), "\(none.stderr)")
        // Without a config file, the alerts, the schedule and retention say where one goes.
        var bare = cli
        bare.withoutConfig = true
        for command in [["retention"], ["schedule"], ["alerts", "test"]] {
            let r = try await bare.run(command)
            #expect(r.status == 78 && r.stderr.contains("there is no config file: `tapedeck config init` writes one at"), "\(command): \(r.stderr)")
        }
        let wrong = try await cli.run("retention", "--set", "retention.keep=soon")
        #expect(wrong.status == 78 && wrong.stderr.contains("retention.keep: \"soon\" is not an age"), "\(wrong.stderr)")
    }

    @Test("a record run applies the config's retention as it starts: unprotected takes go, a noted one and the take it records stay")
    func whileRecording() async throws {
        var cli = try CLIHarness()
        cli.extraEnvironment["XDG_STATE_HOME"] = cli.library.path + "-state"
        defer {
            try? FileManager.default.removeItem(at: cli.library)
            try? FileManager.default.removeItem(atPath: cli.library.path + "-state")
        }
        for name in ["Old", "Kept"] {
            #expect(try await cli.run("record", "--session", "Station", "--name", name, "1s").status == 0)
        }
        #expect(try await cli.run("note", "Station/Kept", "the first cuckoo").status == 0)
        // No free-space floor a disk can meet: every take that may go, goes.
        let run = try await cli.run("record", "--session", "Station", "--name", "New", "--set", "retention.free-space-floor=99%", "3s")
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stderr.contains("Retention deleted 1 take"), "\(run.stderr)")
        let after = try await cli.run("list", "--json")
        let sessions = try #require(try JSONSerialization.jsonObject(with: Data(after.stdout.utf8)) as? [[String: Any]])
        #expect(sessions.flatMap { $0["takes"] as? [[String: Any]] ?? [] }.map { $0["name"] as? String } == ["Kept", "New"], "\(after.stdout)")
        #expect(try await cli.run("doctor").status == 0)
    }
}
