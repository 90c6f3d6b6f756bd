import Foundation
import TapedeckTesting
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The real audio backends driven through the `tapedeck` binary against a private PulseAudio
/// daemon (null sink; its monitor is the capture source): PulseAudio directly, and ALSA through
/// its `pulse` device.
@Suite("audio servers end to end", .endToEnd, .serialized)
struct AudioServerEndToEndTests {
    func harness(_ daemon: PulseAudioDaemon) throws -> CLIHarness {
        var cli = try CLIHarness()
        cli.extraEnvironment = daemon.environment.merging(["PULSE_SOURCE": "null.monitor", "PULSE_SINK": "null"]) { $1 }
        return cli
    }

    func pulseFlags(_ daemon: PulseAudioDaemon) -> [String] {
        ["--set", "capture.backend=pulse", "--set", "capture.pulse.server=\(daemon.serverAddress)",
         "--set", "capture.pulse.device=null.monitor", "--set", "playback.backend=pulse",
         "--set", "playback.pulse.server=\(daemon.serverAddress)", "--set", "playback.pulse.device=null"]
    }

    let alsaFlags = ["--set", "capture.backend=alsa", "--set", "capture.alsa.device=pulse",
                     "--set", "playback.backend=alsa", "--set", "playback.alsa.device=pulse"]

    /// Records until the daemon is killed; the take must be kept, interrupted and readable, and
    /// `record` must exit 4 within 2 s of the kill.
    func serverLoss(_ flags: [String], daemon: PulseAudioDaemon, cli: CLIHarness) async throws {
        let (p, _, err) = try cli.start(["record", "--json"] + flags)
        #expect(try await cli.waitForPendingFile())
        try await Task.sleep(for: .seconds(1.5))
        daemon.kill()
        let killed = Date()
        #expect(try await CLIHarness.wait(timeout: 5) { !p.isRunning }, "record must notice the lost server")
        let waited = Date().timeIntervalSince(killed)
        try await CLIHarness.waitForExit(p)
        #expect(waited < 2.0, "noticed after \(waited) s")
        #expect(p.terminationStatus == 4, "\((try? String(contentsOf: err, encoding: .utf8)) ?? "")")
        let take = try #require(try await cli.takes().first)
        #expect(take["state"] as? String == "interrupted")
        #expect((take["seconds"] as? Double ?? 0) >= 1.0)
        let path = try #require(take["path"] as? String)
        let soxi = try await CLIHarness.tool("soxi", ["-s", path])
        #expect(soxi.status == 0 && Int(soxi.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) == take["frames"] as? Int)
    }

    @Test("PulseAudio with --resume: the source unloaded and loaded again ends the take and goes on in a new one; nothing captured is lost")
    func pulseResume() async throws {
        let daemon = try await PulseAudioDaemon.startAsync()
        defer { daemon.stop() }
        let cli = try harness(daemon)
        func pactl(_ args: [String]) async throws -> CLIHarness.Result {
            try await CLIHarness.tool("pactl", ["-s", daemon.serverAddress] + args)
        }
        let (p, out, err) = try cli.start(["record", "--json", "--resume", "-d", "5s"] + pulseFlags(daemon))
        #expect(try await cli.waitForPendingFile())
        try await Task.sleep(for: .seconds(1.5))
        let unloaded = try await pactl(["unload-module", "module-null-sink"])
        #expect(unloaded.status == 0, "\(unloaded.stderr)")
        try await Task.sleep(for: .seconds(2))
        let loaded = try await pactl(["load-module", "module-null-sink", "sink_name=null", "rate=48000", "channels=2"])
        #expect(loaded.status == 0, "\(loaded.stderr)")
        #expect(try await CLIHarness.wait(timeout: 20) { !p.isRunning }, "the run goes on after the source is back, then ends")
        try await CLIHarness.waitForExit(p)
        let stderr = (try? String(contentsOf: err, encoding: .utf8)) ?? ""
        #expect(p.terminationStatus == 4, "\(stderr)")
        #expect(stderr.contains("Waiting for the device to come back") && stderr.contains("The device is back"), "\(stderr)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: out)) as? [String: Any])
        let takes = try #require(report["takes"] as? [[String: Any]])
        #expect(takes.count == 2)
        #expect(takes.map { $0["state"] as? String } == ["interrupted", "complete"])
        #expect(takes.map { ($0["run"] as? [String: Any])?["began"] as? String } == ["start", "device-resumed"])
        #expect(((report["events"] as? [[String: Any]])?.first?["seconds"] as? Double ?? 0) >= 1.5)
        // -d with --resume keeps the clock: 5 s after the audio began, less the 2 s the source
        // was away (not 5 s of audio, which would end the run 2 s late).
        let total = takes.reduce(0) { $0 + ($1["frames"] as? Int ?? 0) }
        #expect(total >= 48_000 && total <= 240_000 - 72_000, "\(total) frames")
        #expect((takes.first?["frames"] as? Int ?? 0) >= 48_000)
        for take in takes {
            let path = try #require(take["path"] as? String)
            let soxi = try await CLIHarness.tool("soxi", ["-s", path])
            #expect(Int(soxi.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) == take["frames"] as? Int)
        }
    }

    @Test("PulseAudio: a killed server gives a finalized, interrupted take and exit 4 within 2 s")
    func pulseServerLoss() async throws {
        let daemon = try await PulseAudioDaemon.startAsync()
        defer { daemon.stop() }
        try await serverLoss(pulseFlags(daemon), daemon: daemon, cli: try harness(daemon))
    }

    @Test("ALSA through the pulse device: a killed server gives a finalized, interrupted take and exit 4 within 2 s")
    func alsaServerLoss() async throws {
        let daemon = try await PulseAudioDaemon.startAsync()
        defer { daemon.stop() }
        try await serverLoss(alsaFlags, daemon: daemon, cli: try harness(daemon))
    }

    @Test("PulseAudio: SIGINT drains, so the take is as long as the recording ran, within one fragment")
    func pulseSIGINT() async throws {
        let daemon = try await PulseAudioDaemon.startAsync()
        defer { daemon.stop() }
        let cli = try harness(daemon)
        let (p, out, _) = try cli.start(["record", "--json"] + pulseFlags(daemon))
        #expect(try await cli.waitForPendingFile())
        try await Task.sleep(for: .seconds(3))
        kill(p.processIdentifier, SIGINT)
        try await CLIHarness.waitForExit(p)
        #expect(p.terminationStatus == 0)
        let (_, seconds, wall) = try CLIHarness.stoppedRecording(out)
        #expect(abs(seconds - wall) <= 0.020 + 0.030, "recorded \(seconds) s over \(wall) s")
    }

    @Test("record and play through both real backends; the take's length is exact")
    func recordAndPlay() async throws {
        let daemon = try await PulseAudioDaemon.startAsync()
        defer { daemon.stop() }
        let cli = try harness(daemon)
        for flags in [pulseFlags(daemon), alsaFlags] {
            let r = try await cli.run(["record", "--duration", "1s", "--json"] + flags)
            #expect(r.status == 0, "\(r.stderr)")
            #expect(r.stdout.contains("\"frames\" : 48000"))
            let id = try #require(try await cli.takes().last?["shortID"] as? String)
            let played = try await cli.run(["play", id] + flags)
            #expect(played.status == 0, "\(played.stderr)")
        }
    }

    @Test("no config file: record takes the sound server's default source, play last its default sink, config show says they were detected")
    func firstRun() async throws {
        let daemon = try await PulseAudioDaemon.startAsync()
        defer { daemon.stop() }
        var cli = try harness(daemon)
        cli.withoutConfig = true
        let r = try await cli.run(["record", "-d", "2", "--json"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains("\"frames\" : 96000"), "\(r.stdout)")
        // The banner (one line off a terminal) and the file name the source the server chose,
        // not "default".
        let source = try await CLIHarness.tool("pactl", ["-s", daemon.serverAddress, "get-default-source"]).stdout
            .trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(!source.isEmpty)
        #expect(r.stderr.contains("Recording from \(source), the default device (pulse, detected): 48000 Hz, 2 channels"), "\(r.stderr)")
        let path = try #require(try await cli.takes().last?["path"] as? String)
        let history = try await CLIHarness.tool("ffprobe", ["-v", "quiet", "-show_entries", "format_tags=coding_history", "-of", "default=nw=1:nk=1", path])
        #expect(history.stdout.contains("T=pulse \(source) on "), "\(history.stdout)")
        let show = try await cli.run(["config", "show"])
        #expect(show.stdout.contains("detected: a sound server answered"), "\(show.stdout)")
        #expect(show.stdout.contains("capture: pulse") && show.stdout.contains("playback: pulse"), "\(show.stdout)")
        let played = try await cli.run(["play", "last"])
        #expect(played.status == 0, "\(played.stderr)")
        #expect(try await cli.run(["config", "check"]).status == 0)
    }

    @Test("no config file, no sound server, no ALSA device: exit 69 and what to do")
    func firstRunWithNothing() async throws {
        var cli = try CLIHarness()
        cli.withoutConfig = true
        let emptyALSAConfig = cli.library.path + "-alsa.conf"
        try Data().write(to: URL(fileURLWithPath: emptyALSAConfig))
        defer { try? FileManager.default.removeItem(atPath: emptyALSAConfig) }
        cli.extraEnvironment = ["PULSE_SERVER": "unix:/nonexistent/native", "ALSA_CONFIG_PATH": emptyALSAConfig]
        let r = try await cli.run(["record", "-d", "1"])
        #expect(r.status == 69, "\(r.stderr)")
        for advice in ["tapedeck devices", "--device", "tapedeck config init", "--set capture.backend=null"] {
            #expect(r.stderr.contains(advice), "\(advice) in \(r.stderr)")
        }
        #expect(!r.stderr.contains("Configuration/"), "no message points into the source tree")
        #expect(try await cli.takes().isEmpty)
        #expect(try await cli.run(["config", "check"]).status == 78)
    }

    @Test("devices --json lists the daemon's sinks and sources, and ALSA's pulse and default devices")
    func devices() async throws {
        let daemon = try await PulseAudioDaemon.startAsync()
        defer { daemon.stop() }
        let cli = try harness(daemon)
        let pulse = try await cli.run(["devices", "--backend", "pulse", "--json"] + pulseFlags(daemon))
        #expect(pulse.status == 0, "\(pulse.stderr)")
        let list = try #require(try JSONSerialization.jsonObject(with: Data(pulse.stdout.utf8)) as? [[String: Any]])
        let sink = try #require(list.first { $0["name"] as? String == "null" })
        #expect(sink["playback"] as? Bool == true && sink["isDefault"] as? Bool == true && sink["backend"] as? String == "pulse")
        let monitor = try #require(list.first { $0["name"] as? String == "null.monitor" })
        #expect(monitor["capture"] as? Bool == true)
        let spec = (monitor["details"] as? [String: String])?["sampleSpec"]
        #expect(spec?.contains("48000") == true, "\(String(describing: spec))")

        let alsa = try await cli.run(["devices", "--backend", "alsa", "--json"])
        #expect(alsa.status == 0, "\(alsa.stderr)")
        let names = (try JSONSerialization.jsonObject(with: Data(alsa.stdout.utf8)) as? [[String: Any]])?.compactMap { $0["name"] as? String } ?? []
        #expect(names.contains("pulse") && names.contains("default"), "\(names)")
    }

    @Test("a wrong server address or device name is a clear failure (exit 69) that names it")
    func wrongNames() async throws {
        let daemon = try await PulseAudioDaemon.startAsync()
        defer { daemon.stop() }
        let cli = try harness(daemon)
        let server = try await cli.run(["record", "--duration", "1s", "--set", "capture.backend=pulse", "--set", "capture.pulse.server=unix:/nonexistent/native"])
        #expect(server.status == 69 && server.stderr.contains("/nonexistent/native"), "\(server.stderr)")
        let source = try await cli.run(["record", "--duration", "1s"] + pulseFlags(daemon) + ["--set", "capture.pulse.device=no-such-source"])
        #expect(source.status == 69 && source.stderr.contains("no-such-source"), "\(source.stderr)")
        let pcm = try await cli.run(["record", "--duration", "1s", "--set", "capture.backend=alsa", "--set", "capture.alsa.device=nosuchpcm"])
        #expect(pcm.status == 69 && pcm.stderr.contains("nosuchpcm"), "\(pcm.stderr)")
        // -D names the selected backend's device, over the file's and --set's.
        let flag = try await cli.run(["record", "-d", "1"] + pulseFlags(daemon) + ["-D", "no-such-source"])
        #expect(flag.status == 69 && flag.stderr.contains("no-such-source"), "\(flag.stderr)")
        let alsaFlag = try await cli.run(["record", "-d", "1", "--set", "capture.backend=alsa", "-D", "nosuchpcm2"])
        #expect(alsaFlag.status == 69 && alsaFlag.stderr.contains("nosuchpcm2"), "\(alsaFlag.stderr)")
        #expect(try await cli.takes().isEmpty, "no take is made when the device cannot be opened")
        let good = try await cli.run(["record", "-d", "0.5", "--set", "capture.backend=pulse", "--set", "capture.pulse.server=\(daemon.serverAddress)",
                                      "-D", "null.monitor", "--json"])
        #expect(good.status == 0 && good.stdout.contains("\"frames\" : 24000"), "\(good.stderr)")
    }
}
