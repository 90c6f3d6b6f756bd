#if JACK
import Foundation
import TapedeckTesting
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The JACK backend driven through the `tapedeck` binary against a private `jackd -d dummy`:
/// record and play, a round trip between two tapedeck processes checked sample for sample,
/// Ctrl-C, the server killed, `devices`, and detection with no config file.
@Suite("JACK end to end", .endToEnd, .serialized)
struct JACKEndToEndTests {
    func harness(_ server: JACKServer) throws -> CLIHarness {
        var cli = try CLIHarness()
        cli.extraEnvironment = server.environment
        return cli
    }

    /// Whether a recording ended well: exit 0, or 3 when its only flaw is cycles the test server
    /// skipped (`jackd --no-realtime` on a loaded machine); those are filled, the length stays exact.
    func recorded(_ r: CLIHarness.Result) -> Bool {
        r.status == 0 || (r.status == 3 && r.stderr.contains("xrun(s) reported by the server"))
    }

    func flags(_ server: JACKServer, capture device: String = "", playback: String = "") -> [String] {
        ["--set", "capture.backend=jack", "--set", "capture.jack.server=\(server.name)", "--set", "capture.jack.device=\(device)",
         "--set", "playback.backend=jack", "--set", "playback.jack.server=\(server.name)", "--set", "playback.jack.device=\(playback)"]
    }

    @Test("record from the physical ports and play to them; the take's length is exact")
    func recordAndPlay() async throws {
        let server = try await JACKServer.startAsync()
        defer { server.stop() }
        let cli = try harness(server)
        let r = try await cli.run(["record", "--duration", "1s", "--json"] + flags(server))
        #expect(recorded(r), "\(r.stderr)")
        #expect(r.stdout.contains("\"frames\" : 48000"), "\(r.stdout)")
        let played = try await cli.run(["play", "last"] + flags(server))
        #expect(played.status == 0, "\(played.stderr)")
    }

    @Test("a take played by one tapedeck into JACK is recorded by another, sample for sample")
    func roundTrip() async throws {
        let server = try await JACKServer.startAsync()
        defer { server.stop() }
        let cli = try harness(server)
        // Noise from the null backend: 4 s, so that the recording (1 s) falls inside it.
        let made = try await cli.run(["record", "-d", "4", "--session", "Source", "--set", "capture.backend=null",
                                      "--set", "capture.null.signal=noise", "--set", "capture.null.paced=false"])
        #expect(made.status == 0, "\(made.stderr)")
        let source = try #require(try await cli.takes().last?["path"] as? String)
        let (player, _, playerErr) = try cli.start(["play", "last", "--set", "playback.jack.client-name=tdplay"] + flags(server, playback: "none"))
        // The player is ended (SIGTERM) and waited for after this, also when it throws.
        try await CLIHarness.stopping(player) {
            #expect(try await CLIHarness.wait(timeout: 10) {
                ((try? await CLIHarness.tool("jack_lsp", ["-s", server.name]))?.stdout.contains("tdplay:out_2")) == true
            }, "the player's ports never appeared: \((try? String(contentsOf: playerErr, encoding: .utf8)) ?? "")")
            let r = try await cli.run(["record", "-d", "1", "--session", "Copy"] + flags(server, capture: "tdplay"))
            #expect(recorded(r), "\(r.stderr)")
            let copy = try #require(try await cli.takes().last?["path"] as? String)
            let check = try await CLIHarness.copiedRuns(played: source, recorded: copy, atLeast: 40_000)
            #expect(check.status == 0, "\(check.stdout)\(check.stderr)")
        }
    }

    @Test("Ctrl-C drains: the take is as long as the recording ran")
    func sigint() async throws {
        let server = try await JACKServer.startAsync()
        defer { server.stop() }
        let cli = try harness(server)
        let (p, out, err) = try cli.start(["record", "--json"] + flags(server))
        #expect(try await cli.waitForPendingFile())
        try await Task.sleep(for: .seconds(2))
        kill(p.processIdentifier, SIGINT)
        try await CLIHarness.waitForExit(p)
        let stderr = (try? String(contentsOf: err, encoding: .utf8)) ?? ""
        // 0, or 3 when the only flaw is cycles the not-real-time test server skipped (filled).
        #expect(p.terminationStatus == 0 || (p.terminationStatus == 3 && stderr.contains("xrun(s) reported by the server")), "\(stderr)")
        let (_, seconds, wall) = try CLIHarness.stoppedRecording(out)
        // One JACK cycle (5 ms) and scheduling.
        #expect(abs(seconds - wall) <= 0.050, "recorded \(seconds) s over \(wall) s")
    }

    @Test("a killed server gives a finalized, interrupted take and exit 4 within 2 s")
    func serverLoss() async throws {
        let server = try await JACKServer.startAsync()
        defer { server.stop() }
        let cli = try harness(server)
        let (p, _, err) = try cli.start(["record", "--json"] + flags(server))
        #expect(try await cli.waitForPendingFile())
        try await Task.sleep(for: .seconds(1.5))
        server.kill()
        let killed = Date()
        #expect(try await CLIHarness.wait(timeout: 5) { !p.isRunning }, "record must notice the lost server")
        let waited = Date().timeIntervalSince(killed)
        try await CLIHarness.waitForExit(p)
        #expect(waited < 2.0, "noticed after \(waited) s")
        let stderr = (try? String(contentsOf: err, encoding: .utf8)) ?? ""
        #expect(p.terminationStatus == 4, "\(stderr)")
        #expect(stderr.contains("went away"), "\(stderr)")
        let take = try #require(try await cli.takes().first)
        #expect(take["state"] as? String == "interrupted")
        #expect((take["seconds"] as? Double ?? 0) >= 1.0)
        let path = try #require(take["path"] as? String)
        let soxi = try await CLIHarness.tool("soxi", ["-s", path])
        #expect(soxi.status == 0 && Int(soxi.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) == take["frames"] as? Int)
    }

    @Test("devices --json lists the server's clients with their ports; no server is exit 69 naming what to start")
    func devices() async throws {
        let server = try await JACKServer.startAsync()
        defer { server.stop() }
        let cli = try harness(server)
        let r = try await cli.run(["devices", "--backend", "jack", "--json"] + flags(server))
        #expect(r.status == 0, "\(r.stderr)")
        let list = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [[String: Any]])
        let system = try #require(list.first { $0["name"] as? String == "system" && $0["capture"] as? Bool == true }, "\(list)")
        #expect(system["isDefault"] as? Bool == true && system["backend"] as? String == "jack")
        #expect((system["details"] as? [String: String])?["capturePorts"] == "system:capture_1, system:capture_2")
        #expect((system["details"] as? [String: String])?["playbackPorts"] == "system:playback_1, system:playback_2")
        let none = try await cli.run(["record", "-d", "1", "--set", "capture.backend=jack", "--set", "capture.jack.server=nobody-here"])
        #expect(none.status == 69, "\(none.stderr)")
        #expect(none.stderr.contains("\"nobody-here\" is not running") && none.stderr.contains("jackd"), "\(none.stderr)")
        #expect(!none.stderr.contains("Cannot connect") && !none.stderr.contains("JackShm"), "libjack's own messages stay out of the terminal: \(none.stderr)")
    }

    @Test("no config file and a JACK server running: record and play use it, config show says it was detected")
    func detected() async throws {
        let server = try await JACKServer.startAsync()
        defer { server.stop() }
        var cli = try harness(server)
        cli.withoutConfig = true
        let r = try await cli.run(["record", "-d", "1", "--json"])
        #expect(recorded(r), "\(r.stderr)")
        #expect(r.stdout.contains("\"frames\" : 48000"), "\(r.stdout)")
        let show = try await cli.run(["config", "show"])
        #expect(show.stdout.contains("capture: jack") && show.stdout.contains("playback: jack"), "\(show.stdout)")
        let played = try await cli.run(["play", "last"])
        #expect(played.status == 0, "\(played.stderr)")
    }
}
#endif
