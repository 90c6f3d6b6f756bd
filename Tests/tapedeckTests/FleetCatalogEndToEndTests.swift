import Foundation
import TapedeckTesting
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The fleet catalog as a team sets it up: machines push to `rclone serve s3` with one
/// PostgreSQL catalog (each started by the test), and `fleet search` on another machine finds
/// their takes; a catalog that is down never stops a push, and catches up on the next.
@Suite("the fleet catalog end to end", .endToEnd, .serialized)
struct FleetCatalogEndToEndTests {
    /// Removes a take's manifest and audio from the rclone server's folder, behind its back.
    static func removeFromBucket(_ server: S3Server, take name: String) throws {
        for manifest in PushRecheckEndToEndTests.objects(server, suffix: ".json") {
            guard let data = try? Data(contentsOf: manifest), let m = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
                  (m["take"] as? [String: Any])?["name"] as? String == name else { continue }
            try FileManager.default.removeItem(at: manifest)
            for audio in PushRecheckEndToEndTests.objects(server, suffix: ".wav") where audio.deletingPathExtension().lastPathComponent == manifest.deletingPathExtension().lastPathComponent {
                try FileManager.default.removeItem(at: audio)
            }
        }
    }

    /// An rclone server, a PostgreSQL and a fleet file whose `sync.catalog` names it (with
    /// `catalog`'s further keys, e.g. `, heartbeat-seconds: 1`).
    static func fleet(catalog: String) async throws -> (S3Server, PostgresServer, URL, URL) {
        let server = try await S3Server.startAsync(.rclone)
        let database = try await PostgresServer.startAsync()
        let (folder, file) = try FleetEndToEndTests.workspace(server)
        let yaml = try String(contentsOf: file, encoding: .utf8).replacingOccurrences(
            of: "prefix: \"fleet\", path-style: true, part-size-mib: 5}",
            with: "prefix: \"fleet\", path-style: true, part-size-mib: 5}\n  catalog: {postgres: \"\(database.url)\"\(catalog)}")
        try yaml.write(to: file, atomically: true, encoding: .utf8)
        return (server, database, folder, file)
    }

    static func remove(_ server: S3Server, _ database: PostgresServer, _ folder: URL) {
        server.remove()
        database.remove()
        try? FileManager.default.removeItem(at: folder)
    }

    static func search(_ cli: CLIHarness, _ args: String...) async throws -> [[String: Any]] {
        let r = try await cli.run(["fleet", "search", "--json"] + args)
        #expect(r.status == 0, "\(args): \(r.stderr)")
        return FleetEndToEndTests.json(r.stdout)
    }

    @Test("three machines push into one catalog; a fourth finds their takes by machine, words and time; the catalog down during a push, then back")
    func catalog() async throws {
        let (server, database, folder, file) = try await Self.fleet(catalog: "")
        defer { Self.remove(server, database, folder) }
        let studio = FleetEndToEndTests.machine(file, server, folder: folder, name: "studio")
        let laptop = FleetEndToEndTests.machine(file, server, folder: folder, name: "laptop")
        let field = FleetEndToEndTests.machine(file, server, folder: folder, name: "field")
        let office = FleetEndToEndTests.machine(file, server, folder: folder, name: "office")
        #expect(try await studio.run("record", "--machine", "studio", "--session", "Dawn", "--name", "Blackbird", "-d", "1").status == 0)
        #expect(try await studio.run("note", "--machine", "studio", "Dawn/Blackbird", "a blackbird at the feeder").status == 0)
        #expect(try await laptop.run("record", "--machine", "laptop", "--session", "Council", "--name", "Budget", "-d", "1").status == 0)
        let first = try await studio.run("push", "--machine", "studio")
        #expect(first.status == 0 && first.stderr.contains("has 1 take more"), "\(first.stdout) \(first.stderr)")
        #expect(try await laptop.run("push", "--machine", "laptop").status == 0)
        #expect(try await field.run("record", "--machine", "field", "--session", "Night", "--name", "Owl", "-d", "0.5").status == 0)
        #expect(try await field.run("push", "--machine", "field").status == 0)

        // The fourth machine finds them all, and each by what it holds.
        let all = try await Self.search(office, "--machine", "office")
        #expect(Set(all.compactMap { $0["machine"] as? String }) == ["studio", "laptop", "field"], "\(all)")
        let bucket0 = FleetEndToEndTests.json(try await office.run("fleet", "list", "--machine", "office", "--remote", "--json").stdout)
        #expect(Set(all.compactMap { $0["takeID"] as? String }) == Set(bucket0.compactMap { $0["takeID"] as? String }), "the catalog holds exactly the bucket's takes")
        // fleet list reads the catalog when there is one: the same takes, the audio not claimed.
        let listed = FleetEndToEndTests.json(try await office.run("fleet", "list", "--machine", "office", "--json").stdout)
        #expect(listed.compactMap { $0["takeID"] as? String } == bucket0.compactMap { $0["takeID"] as? String }, "\(listed)")
        #expect(listed.allSatisfy { $0["audioPresent"] == nil } && bucket0.allSatisfy { $0["audioPresent"] as? Bool == true })
        #expect(try await Self.search(office, "--machine", "office", "BLACKBIRD", "feeder").compactMap { $0["take"] as? String } == ["Blackbird"])
        #expect(try await Self.search(office, "--machine", "office", "--from", "laptop").compactMap { $0["take"] as? String } == ["Budget"])
        #expect(try await Self.search(office, "--machine", "office", "--after", "2000-01-01", "--before", "2001-01-01").isEmpty)
        let text = try await office.run("fleet", "search", "--machine", "office", "--limit", "1")
        #expect(text.status == 0 && text.stdout.contains("1–1 of 3; the next page: --offset 1"), "\(text.stdout)")

        // The catalog is down: the push verifies the take all the same, says it waits, exits 0.
        await database.killAsync()
        #expect(try await studio.run("record", "--machine", "studio", "--session", "Dawn", "--name", "Robin", "-d", "1").status == 0)
        let down = try await studio.run("push", "--machine", "studio")
        #expect(down.status == 0, "\(down.stderr)")
        #expect(down.stderr.contains("1 verified take wait") && down.stderr.contains("the next push adds them"), "\(down.stderr)")
        let bucket = FleetEndToEndTests.json(try await office.run("fleet", "list", "--machine", "office", "--remote", "--json").stdout)
        #expect(bucket.contains { $0["take"] as? String == "Robin" }, "the bucket has it")
        let catalogDown = try await office.run("fleet", "list", "--machine", "office")
        #expect(catalogDown.status == 69 && catalogDown.stderr.contains("nothing listens there")
                && catalogDown.stderr.contains("fleet list --remote"), "\(catalogDown.stderr)")
        // push --watch says the outage once, not every round.
        #expect(try await studio.run("record", "--machine", "studio", "--session", "Dawn", "--name", "Wren", "-d", "1").status == 0)
        let (watching, _, watchErrors) = try studio.start(["push", "--machine", "studio", "--watch", "--interval", "1"])
        try await Task.sleep(for: .seconds(4))
        kill(watching.processIdentifier, SIGINT)
        try await CLIHarness.waitForExit(watching)
        let said = (try? String(contentsOf: watchErrors, encoding: .utf8)) ?? ""
        #expect(said.components(separatedBy: "wait to be added").count - 1 == 1, "\(said)")
        // Back: the next push adds both, nothing else to send.
        try await database.restartAsync()
        let back = try await studio.run("push", "--machine", "studio")
        #expect(back.status == 0 && back.stderr.contains("has 2 takes more") && back.stdout.contains("nothing to push"), "\(back.stdout) \(back.stderr)")
        #expect(try await Self.search(office, "--machine", "office", "robin").count == 1)

        // Without a catalog, search says what to set.
        let bare = try CLIHarness()
        let none = try await bare.run("fleet", "search", "owl")
        #expect(none.status == 78 && none.stderr.contains("sync.catalog.postgres"), "\(none.stderr)")
    }

    @Test("fleet reindex makes the catalog the bucket's again; fleet status shows a running record, and marks it stale once it is killed")
    func reindexAndStatus() async throws {
        let (server, database, folder, file) = try await Self.fleet(catalog: ", heartbeat-seconds: 1")
        defer { Self.remove(server, database, folder) }
        let studio = FleetEndToEndTests.machine(file, server, folder: folder, name: "studio")
        for name in ["One", "Two", "Three"] {
            #expect(try await studio.run("record", "--machine", "studio", "--name", name, "-d", "0.5").status == 0)
        }
        #expect(try await studio.run("push", "--machine", "studio").status == 0)
        // The catalog loses its rows, and the bucket loses one take: reindex follows the bucket.
        #expect(try database.psql("DELETE FROM tapedeck_takes").status == 0)
        #expect(try await Self.search(studio, "--machine", "studio").isEmpty)
        try Self.removeFromBucket(server, take: "Two")
        try await Task.sleep(for: .seconds(1.5))  // rclone's folder cache
        let reindex = try await studio.run("fleet", "reindex", "--machine", "studio")
        #expect(reindex.status == 0 && reindex.stdout.contains("holds the 2 takes"), "\(reindex.stdout) \(reindex.stderr)")
        #expect(Set(try await Self.search(studio, "--machine", "studio").compactMap { $0["take"] as? String }) == ["One", "Three"])
        // An entry whose take the bucket lost is removed by the next reindex.
        try Self.removeFromBucket(server, take: "Three")
        try await Task.sleep(for: .seconds(1.5))
        let again = try await studio.run("fleet", "reindex", "--machine", "studio")
        #expect(again.status == 0 && again.stdout.contains("holds the 1 take") && again.stdout.contains("1 entry without a take there were removed"), "\(again.stdout)")
        #expect(try await Self.search(studio, "--machine", "studio").compactMap { $0["take"] as? String } == ["One"])
        // fleet doctor compares the catalog with the bucket: a take it lacks, an entry without a take.
        #expect(try await studio.run("record", "--machine", "studio", "--name", "Four", "-d", "0.5").status == 0)
        #expect(try await studio.run("push", "--machine", "studio").status == 0)
        #expect(try database.psql("DELETE FROM tapedeck_takes WHERE manifest->'take'->>'name' = 'Four'").status == 0)
        try Self.removeFromBucket(server, take: "One")
        try await Task.sleep(for: .seconds(1.5))
        let doctor = try await studio.run("fleet", "doctor", "--machine", "studio")
        #expect(doctor.status == 1 && doctor.stdout.contains("a take the fleet catalog does not list")
                && doctor.stdout.contains("catalog:") && doctor.stdout.contains("lists this take of studio, and the remote has no manifest"), "\(doctor.stdout) \(doctor.stderr)")
        let repaired = try await studio.run("fleet", "doctor", "--machine", "studio", "--repair")
        #expect(repaired.status == 0 && repaired.stdout.contains("(removed from the catalog)") && repaired.stdout.contains("(added to the catalog)"), "\(repaired.stdout) \(repaired.stderr)")
        #expect(try await studio.run("fleet", "doctor", "--machine", "studio").status == 0)
        #expect(try await Self.search(studio, "--machine", "studio").compactMap { $0["take"] as? String } == ["Four"])

        // A running record beats every second; killed, it is stale within two beats.
        let (recorder, _, recorderErrors) = try studio.start(["record", "--machine", "studio", "--session", "Live", "--set", "capture.null.paced=true", "-d", "60"])
        defer { kill(recorder.processIdentifier, SIGKILL) }
        var status: [[String: Any]] = []
        _ = try await CLIHarness.wait(timeout: 20) {
            status = FleetEndToEndTests.json((try? await studio.run("fleet", "status", "--machine", "studio", "--json"))?.stdout ?? "")
            return status.contains { ($0["heartbeat"] as? [String: Any])?["take"] != nil }
        }
        let live = try #require(status.compactMap { $0["heartbeat"] as? [String: Any] }.first { $0["role"] as? String == "record" }, "\(status)")
        #expect(live["machine"] as? String == "studio" && (live["take"] as? String)?.hasPrefix("Live/") == true && live["levelDBFS"] != nil, "\(live)")
        let fresh = try await studio.run("fleet", "status", "--machine", "studio")
        #expect(fresh.status == 0 && fresh.stdout.contains("studio record  recording  Live/"), "\(fresh.stdout) \((try? String(contentsOf: recorderErrors, encoding: .utf8)) ?? "")")
        kill(recorder.processIdentifier, SIGKILL)
        recorder.waitUntilExit()
        var stale = CLIHarness.Result(status: 0, stdout: "", stderr: "")
        let started = Date()
        _ = try await CLIHarness.wait(timeout: 10) {
            stale = (try? await studio.run("fleet", "status", "--machine", "studio")) ?? stale
            return stale.stdout.contains("STALE")
        }
        #expect(stale.status == 1 && stale.stdout.contains("studio record  STALE"), "\(stale.stdout)")
        #expect(Date().timeIntervalSince(started) < 4, "stale within two intervals (1 s each) of the kill, give or take a status run")
    }

    @Test("serve beats as serve and shows the fleet (/api/fleet and its page); staleness and clocks by the catalog's clock")
    func serveShowsTheFleet() async throws {
        let (server, database, folder, file) = try await Self.fleet(catalog: ", heartbeat-seconds: 1")
        defer { Self.remove(server, database, folder) }
        let studio = FleetEndToEndTests.machine(file, server, folder: folder, name: "studio")
        let laptop = FleetEndToEndTests.machine(file, server, folder: folder, name: "laptop")
        let (serve, served, serveErrors) = try studio.start(["serve", "--machine", "studio", "--listen", "127.0.0.1:0"])
        defer { kill(serve.processIdentifier, SIGTERM) }
        let base = try await RecorderControlEndToEndTests.servedAddress(served)
        let (recorder, _, _) = try laptop.start(["record", "--machine", "laptop", "--session", "Field", "--set", "capture.null.paced=true", "-d", "60"])
        defer { kill(recorder.processIdentifier, SIGKILL) }
        func fleet() async -> [String: [String: Any]] {
            let body = (try? await RecorderControlEndToEndTests.http("GET", base + "api/fleet"))?.body ?? ""
            let state = (try? JSONSerialization.jsonObject(with: Data(body.utf8))) as? [String: Any]
            var byName: [String: [String: Any]] = [:]
            for r in state?["recorders"] as? [[String: Any]] ?? [] {
                let beat = r["heartbeat"] as? [String: Any] ?? [:]
                byName["\(beat["machine"] ?? "") \(beat["role"] ?? "")"] = r
            }
            return byName
        }
        var seen: [String: [String: Any]] = [:]
        _ = try await CLIHarness.wait(timeout: 30) {
            seen = await fleet()
            return (seen["laptop record"]?["heartbeat"] as? [String: Any])?["state"] as? String == "recording" && seen["studio serve"] != nil
        }
        #expect((seen["studio serve"]?["heartbeat"] as? [String: Any])?["state"] as? String == "idle", "\(seen) \((try? String(contentsOf: serveErrors, encoding: .utf8)) ?? "")")
        #expect(seen["laptop record"]?["stale"] as? Bool == false, "\(seen)")
        let page = try await RecorderControlEndToEndTests.http("GET", base)
        #expect(page.status == 200 && page.body.contains("<section id=\"fleet\"") && page.body.contains("laptop"), "\(page.body.prefix(300))")
        // Killed, the recorder is stale within two beats (and the page's read of the catalog).
        kill(recorder.processIdentifier, SIGKILL)
        recorder.waitUntilExit()
        let killed = Date()
        _ = try await CLIHarness.wait(timeout: 15) { await fleet()["laptop record"]?["stale"] as? Bool == true }
        #expect(Date().timeIntervalSince(killed) < 5, "stale within two 1 s intervals, and one more for serve's reading")
        // A recorder whose clock is a month behind is heard now by the catalog's clock: not stale,
        // and its clock is said to be behind.
        let sent = "2026-01-01T00:00:00Z"
        let beat = #"{"machine":"field","role":"record","version":"0","state":"recording","sentAt":"\#(sent)","intervalSeconds":60}"#
        #expect(try database.psql("INSERT INTO tapedeck_heartbeats (machine, role, sent_at, beat) VALUES ('field', 'record', '\(sent)', '\(beat)')").status == 0)
        let status = try await studio.run("fleet", "status", "--machine", "studio")
        #expect(status.stdout.contains("field record  recording") && status.stdout.contains("behind"), "\(status.stdout)")
        #expect(!status.stdout.contains("field record  STALE"), "\(status.stdout)")
    }
}
