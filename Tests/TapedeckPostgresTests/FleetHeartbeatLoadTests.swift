import Foundation
import Logging
import Synchronization
import TapedeckCore
import TapedeckPostgres
import TapedeckTesting
import Testing

/// Many recorders beating into one catalog, each with its own connection as a machine would:
/// the catalog's work is one upsert per heartbeat (its table one row per recorder, however
/// long they run), and a recorder that stops is stale within two of its intervals.
/// It runs only when `TAPEDECK_HEARTBEAT_SECONDS` says how long they beat: `scripts/test` runs
/// it for 6 s in a phase of its own, with nothing else loading the machine (its bounds are
/// about time); docs/PERFORMANCE.md has a minute of it.
@Suite("heartbeats of many recorders", .serialized,
       .enabled(if: ProcessInfo.processInfo.environment["TAPEDECK_HEARTBEAT_SECONDS"] != nil, "set TAPEDECK_HEARTBEAT_SECONDS (scripts/test does)"))
struct FleetHeartbeatLoadTests {
    /// What the recorders' tasks count together.
    final class Tally: Sendable {
        let sent = Counter()
        let failed = Counter()
        let slowest = Mutex<Double>(0)
        let stopped = Mutex<ContinuousClock.Instant?>(nil)
    }

    final class Counter: Sendable {
        private let value = Atomic<Int>(0)
        func add(_ n: Int) { value.add(n, ordering: .relaxed) }
        var count: Int { value.load(ordering: .relaxed) }
    }

    let logger = Logger(label: "heartbeat-load-test")

    @Test("50 recorders beating every second: one upsert per beat, one row each, a stopped one stale within two intervals")
    func manyRecorders() async throws {
        let server = try await PostgresServer.startAsync()
        defer { server.remove() }
        let settings = try PostgresSettings(url: server.url, password: nil)
        let reader = try PostgresFleetIndex(settings, logger: logger)
        try await reader.prepare()
        // Every write to the heartbeats' table counted by the server itself.
        #expect(try server.psql("""
            CREATE TABLE beat_writes (n bigint NOT NULL);
            INSERT INTO beat_writes VALUES (0);
            CREATE FUNCTION count_beat() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN UPDATE beat_writes SET n = n + 1; RETURN NEW; END $$;
            CREATE TRIGGER counted AFTER INSERT OR UPDATE ON tapedeck_heartbeats FOR EACH ROW EXECUTE FUNCTION count_beat();
            """).status == 0)
        let seconds = Double(ProcessInfo.processInfo.environment["TAPEDECK_HEARTBEAT_SECONDS"] ?? "") ?? 6
        let recorders = 50
        let tally = Tally()
        let (sent, failed) = (tally.sent, tally.failed)
        let start = ContinuousClock.now
        let logger = logger
        try await withThrowingTaskGroup(of: Void.self) { group in
            for n in 0..<recorders {
                group.addTask {
                    let index = try PostgresFleetIndex(settings, logger: logger)
                    // The first recorder stops halfway: the one fleet status must mark.
                    let end = start + .seconds(n == 0 ? seconds / 2 : seconds)
                    var next = start + .milliseconds(n * 20)
                    while next < end {
                        try await Task.sleep(until: next)
                        var beat = RecorderHeartbeat(machine: "rec-\(n)", role: "record", version: "test", state: .recording,
                                                     sentAt: Date(), intervalSeconds: 1)
                        beat.levelDBFS = -20
                        let began = ContinuousClock.now
                        do {
                            try await index.beat(beat)
                            sent.add(1)
                        } catch {
                            failed.add(1)
                        }
                        let took = began.duration(to: .now)
                        let s = Double(took.components.seconds) + Double(took.components.attoseconds) / 1e18
                        tally.slowest.withLock { $0 = max($0, s) }
                        next += .seconds(1)
                    }
                    if n == 0 { tally.stopped.withLock { $0 = .now } }
                    await index.shutdown()
                }
            }
            // Meanwhile: the stopped recorder is marked stale within two intervals (a reading
            // begun 2.5 s after its last beat says so), and not before.
            group.addTask {
                while tally.stopped.withLock({ $0 }) == nil { try await Task.sleep(for: .milliseconds(100)) }
                let since = try #require(tally.stopped.withLock { $0 })
                let early = try await reader.heartbeats().first { $0.machine == "rec-0" }
                // Read at once (unless the machine held the reading up past the two intervals).
                if since.duration(to: .now) < .seconds(1.5) {
                    #expect(early?.isStale(at: Date()) == false, "stale too soon: \(String(describing: early))")
                }
                try await Task.sleep(until: since + .seconds(2.5))
                let late = try await reader.heartbeats().first { $0.machine == "rec-0" }
                #expect(late?.isStale(at: Date()) == true, "not stale 2.5 s after its last beat: \(String(describing: late))")
            }
            try await group.waitForAll()
        }
        let writes = Int(try server.psql("SELECT n FROM beat_writes").output.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
        let rows = Int(try server.psql("SELECT count(*) FROM tapedeck_heartbeats").output.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
        let beats = sent.count
        print("heartbeats: \(recorders) recorders for \(seconds) s: \(beats) beats, \(writes) writes, \(rows) rows, \(failed.count) failed, slowest \(String(format: "%.3f", tally.slowest.withLock { $0 })) s")
        #expect(failed.count == 0)
        #expect(writes == beats + failed.count, "one upsert per heartbeat")
        #expect(rows == recorders, "one row per recorder")
        #expect(beats >= recorders * Int(seconds) * 3 / 4, "\(beats) beats")
        await reader.shutdown()
    }
}
