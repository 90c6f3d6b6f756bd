import Foundation
import TapedeckTesting
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Runs that wait for sound (VOX) or a trigger (armed), with pre-roll, and the silence alarm, on
/// the null backend with its signal switched off and on (`capture.null.gate`). A 480-frame
/// period puts every boundary of these patterns on a period, so they are exact to the frame.
@Suite("unattended runs end to end", .endToEnd, .serialized)
struct UnattendedEndToEndTests {
    func report(_ r: CLIHarness.Result, sourceLocation: SourceLocation = #_sourceLocation) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any], "\(r.stdout) \(r.stderr)",
                     sourceLocation: sourceLocation)
    }

    /// Each take's [offset, end) in the run, in frames.
    func spans(_ report: [String: Any]) -> [[Int]] {
        (report["takes"] as? [[String: Any]] ?? []).map { t in
            let offset = (t["run"] as? [String: Any])?["offsetFrames"] as? Int ?? -1
            return [offset, offset + (t["frames"] as? Int ?? 0)]
        }
    }

    static let exact = ["--set", "capture.period-frames=480", "--set", "capture.null.paced=false", "--json"]

    @Test("--vox: a take begins with its pre-roll where the sound does and ends after the hold, to the frame; WAV and FLAC", arguments: ["wav", "flac"])
    func vox(_ encoding: String) async throws {
        let cli = try CLIHarness()
        // Off 2 s, on 1 s, off 3 s, on 0.5 s, repeating: sound at 2–3 s, 6–6.5 s, 8.5–9.5 s.
        let r = try await cli.run(["record", "-d", "10s", "--vox", "-30dB", "--vox-hold", "1s", "--pre-roll", "0.5s",
                                   "--set", "capture.null.gate=2,1,3,0.5", "--set", "encoder.name=\(encoding)"] + Self.exact)
        #expect(r.status == 0, "\(r.stderr)")
        let rep = try report(r)
        #expect(spans(rep) == [[72_000, 192_000], [264_000, 360_000], [384_000, 480_000]])
        let reasons = (rep["takes"] as? [[String: Any]] ?? []).map { t in ["began", "ended"].map { (t["run"] as? [String: Any])?[$0] as? String ?? "" } }
        #expect(reasons == [["vox", "vox"], ["vox", "vox"], ["vox", "duration"]])
        // Each take holds the signal's own samples: the 0.5 s before the sound is silence, then the tone.
        for take in rep["takes"] as? [[String: Any]] ?? [] {
            let path = try #require(take["path"] as? String)
            let stat = try await CLIHarness.tool("sox", [path, "-n", "trim", "0", "0.5", "stat"])
            #expect(stat.stderr.contains("Maximum amplitude:     0.000000"), "\(path): the pre-roll holds the silence before the sound\n\(stat.stderr)")
            let tone = try await CLIHarness.tool("sox", [path, "-n", "trim", "0.5", "0.4", "stat"])
            #expect(tone.stderr.contains("Maximum amplitude:     0.5"), "\(path): then the tone\n\(tone.stderr)")
        }
    }

    @Test("--vox on a frame counter switched off and on: every take is exactly the delivered frames from its offset")
    func voxFrames() async throws {
        let cli = try CLIHarness()
        let r = try await cli.run(["record", "-d", "7s", "--vox", "-90dB", "--vox-hold", "0.5s", "--pre-roll", "0.25s",
                                   "--set", "capture.null.gate=1,1.5,2,0.5", "--set", "capture.null.signal=counter"] + Self.exact)
        #expect(r.status == 0, "\(r.stderr)")
        let rep = try report(r)
        let takes = rep["takes"] as? [[String: Any]] ?? []
        #expect(spans(rep) == [[36_000, 144_000], [204_000, 264_000], [276_000, 336_000]], "\(spans(rep))")
        for take in takes {
            let path = try #require(take["path"] as? String)
            let offset = try #require((take["run"] as? [String: Any])?["offsetFrames"] as? Int)
            let raw = FileManager.default.temporaryDirectory.appendingPathComponent("vox-\(UUID().uuidString).raw").path
            defer { unlink(raw) }
            #expect(try await CLIHarness.tool("sox", [path, "-t", "raw", "-e", "signed", "-b", "16", "-L", raw]).status == 0)
            let data = try Data(contentsOf: URL(fileURLWithPath: raw))
            // The gate: off 1 s, on 1.5 s, off 2 s, on 0.5 s (at 48 kHz), repeating every 5 s.
            let wrong = data.withUnsafeBytes { bytes -> Int? in
                for k in 0..<(data.count / 2) {
                    let frame = offset + k / 2
                    let t = frame % 240_000
                    let on = (48_000..<120_000).contains(t) || (216_000..<240_000).contains(t)
                    let expected = on ? Int16(truncatingIfNeeded: offset * 2 + k) : 0
                    if bytes.loadUnaligned(fromByteOffset: k * 2, as: Int16.self) != expected { return k }
                }
                return nil
            }
            #expect(wrong == nil, "\(path): sample \(wrong ?? -1) is not the signal's")
        }
    }

    @Test("--armed: SIGUSR2 begins the take with its pre-roll; the frames are the device's, none lost or doubled")
    func armedBySignal() async throws {
        let cli = try CLIHarness()
        let (p, out, _) = try cli.start(["record", "--armed", "--pre-roll", "1s", "--set", "capture.null.signal=counter", "--json"])
        try await Task.sleep(for: .seconds(2.0))
        // A marker while armed lands in the pre-roll the take begins with.
        kill(p.processIdentifier, SIGUSR1)
        try await Task.sleep(for: .seconds(0.5))
        kill(p.processIdentifier, SIGUSR2)
        try await Task.sleep(for: .seconds(1))
        kill(p.processIdentifier, SIGTERM)
        try await CLIHarness.waitForExit(p)
        #expect(p.terminationStatus == 0)
        let rep = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: out)) as? [String: Any])
        let takes = try #require(rep["takes"] as? [[String: Any]])
        #expect(takes.count == 1)
        let run = try #require(takes.first?["run"] as? [String: Any])
        #expect(run["began"] as? String == "trigger" && run["ended"] as? String == "stopped")
        let offset = try #require(run["offsetFrames"] as? Int)
        let frames = try #require(takes.first?["frames"] as? Int)
        // The trigger came about 2.5 s after start (less the start-up); the take keeps 1 s before it.
        #expect((24_000...84_000).contains(offset), "offset \(offset)")
        #expect(frames >= 48_000 + 40_000, "\(frames) frames: 1 s of pre-roll and about 1 s after the trigger")
        let markers = try #require(takes.first?["markers"] as? [[String: Any]])
        #expect(markers.count == 1 && (8_000...48_000).contains(markers.first?["frame"] as? Int ?? -1), "\(markers)")
        let path = try #require(takes.first?["path"] as? String)
        #expect(try await CLIHarness.firstWrongCounterSample(path, from: offset * 2) == nil)
    }

    @Test("--armed on a terminal: Enter begins the take; the banner says how")
    func armedByEnter() async throws {
        let cli = try CLIHarness()
        let socket = "tapedeck-\(UUID().uuidString.prefix(8))"
        @discardableResult
        func tmux(_ more: [String]) async throws -> String { try await ChildProcess.runAsync(["tmux", "-L", socket] + more).output }
        // The tmux server goes when this returns, before the test does.
        defer { CLIHarness.killTmuxServer(socket) }
        let command = "'\(try CLIHarness.binary.path)' record --armed -d 4s --session Armed; sleep 60"
        let environment = cli.environment.filter { $0.key.hasPrefix("TAPEDECK_") || $0.key == "PATH" || $0.key == "HOME" }
        try await tmux(["new-session", "-d", "-x", "80", "-y", "24"] + environment.flatMap { ["-e", "\($0.key)=\($0.value)"] } + ["-e", "TERM=xterm", command])
        var screen = ""
        #expect(try await CLIHarness.wait(timeout: 10) {
            screen = (try? await tmux(["capture-pane", "-p"])) ?? ""
            return screen.contains("press Enter")
        }, "\(screen)")
        #expect(try await CLIHarness.wait(timeout: 5) { ((try? await tmux(["capture-pane", "-p"])) ?? "").contains("○ ARMED") })
        try await tmux(["send-keys", "Enter"])
        #expect(try await CLIHarness.wait(timeout: 10) {
            screen = (try? await tmux(["capture-pane", "-p"])) ?? ""
            return screen.contains("Recorded Armed/Take 1")
        }, "\(screen)")
        let take = try #require(try await cli.takes().first)
        #expect((take["run"] as? [String: Any])?["began"] as? String == "trigger")
        #expect((take["frames"] as? Int ?? 0) > 0)
    }

    @Test("a run that waits and ends before its sound or trigger makes no take, says so and exits 0")
    func nothingRecorded() async throws {
        let cli = try CLIHarness()
        for args in [["--vox", "-20dB", "--set", "capture.null.signal=silence"], ["--armed"]] {
            let r = try await cli.run(["record", "-d", "1s", "--set", "capture.null.paced=false"] + args)
            #expect(r.status == 0, "\(args): \(r.stderr)")
            #expect(r.stdout.contains("no take was made"), "\(r.stdout)")
        }
        #expect(try await cli.takes().isEmpty)
        #expect(try await cli.run("doctor").status == 0, "a take made ready and never begun leaves nothing behind")
        // Stopped before the trigger came: nothing was recorded, exit 130 as the codes say.
        let (p, out, _) = try cli.start(["record", "--armed"])
        try await Task.sleep(for: .seconds(2))
        kill(p.processIdentifier, SIGTERM)
        try await CLIHarness.waitForExit(p)
        #expect(p.terminationStatus == 130, "\((try? String(contentsOf: out, encoding: .utf8)) ?? "")")
        #expect(try await cli.takes().isEmpty)
    }

    @Test("--silence-alarm: silence past the time warns on stderr, is in the report, and exits 6")
    func silenceAlarm() async throws {
        let cli = try CLIHarness()
        // On 0.5 s, then off 2 s, repeating: two silences of 2 s in 5 s.
        let r = try await cli.run(["record", "-d", "5s", "--silence-alarm", "1s", "--set", "capture.null.gate=0,0.5,2"] + Self.exact)
        #expect(r.status == 6, "\(r.status) \(r.stderr)")
        #expect(r.stderr.contains("Check the microphone"), "\(r.stderr)")
        let rep = try report(r)
        let silences = try #require(rep["silences"] as? [[String: Any]])
        #expect(silences.map { $0["offsetSeconds"] as? Double } == [0.5, 3.0])
        #expect(silences.map { $0["seconds"] as? Double } == [2.0, 2.0])
        // The same input without the alarm is a plain success.
        #expect(try await cli.run(["record", "-d", "1s", "--set", "capture.null.gate=0,0.5,2", "--set", "capture.null.paced=false"]).status == 0)
    }

    @Test("run flags that do not go together are refused with what to type instead")
    func refusals() async throws {
        let cli = try CLIHarness()
        for (args, words) in [(["--vox", "-40dB", "--armed"], "Choose one"), (["--pre-roll", "2s"], "give --vox LEVEL or --armed"),
                              (["--armed", "--pre-roll", "31s"], "at most 30s"), (["--vox", "loud"], "not a level"),
                              (["--vox-hold", "2s"], "give --vox LEVEL too"), (["--vox", "-40dB", "--silence-alarm", "10s"], "Leave out one of them"), (["--silence-threshold", "-60dB"], "give --silence-alarm"),
                              (["--until", "25:00"], "not a time"), (["--until", "2020-01-01 10:00"], "has passed"),
                              (["--vox", "-40dB", "-o", "/tmp/never-\(UUID().uuidString).wav"], "Leave out -o")] {
            let r = try await cli.run(["record"] + args)
            #expect(r.status == 64, "\(args): \(r.status)")
            #expect(r.stderr.contains(words), "\(args): \(r.stderr)")
        }
        #expect(try await cli.takes().isEmpty)
    }
}
