import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Drives the built `tapedeck` binary the way a user does, on the null backend.
@Suite("tapedeck end to end", .endToEnd, .serialized)
struct EndToEndTests {
    static let verifier = CLIHarness.packageRoot.appendingPathComponent("Tests/tapedeckTests/verify_wav.py").path

    func verify(_ path: String, _ signal: String) async throws -> (frames: Int, firstBad: Int, headerOK: Bool) {
        let r = try await CLIHarness.tool("python3", [Self.verifier, path, signal])
        #expect(r.status == 0, "python's wave refused \(path): \(r.stderr)")
        let f = r.stdout.split(separator: " ").map(String.init)
        return (Int(f[0]) ?? -1, Int(f[3]) ?? -2, f.last?.hasPrefix("header-ok") == true)
    }

    @Test("record 2 s, list, show, play, rename and delete; sox and python's wave read the same samples as the null signal")
    func mainJob() async throws {
        let cli = try CLIHarness()
        let rec = try await cli.run("record", "--duration", "2s", "--json")
        #expect(rec.status == 0, "record failed: \(rec.stderr)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(rec.stdout.utf8)) as? [String: Any])
        let take = try #require(report["take"] as? [String: Any])
        #expect(take["frames"] as? Int == 96_000)
        #expect(take["state"] as? String == "complete")
        #expect(take["session"] as? String == "Session 1" && take["name"] as? String == "Take 1")
        let path = try #require(take["path"] as? String)
        #expect(path.hasPrefix(cli.library.path))

        let listed = try await cli.takes()
        #expect(listed.count == 1)
        #expect(listed.first?["seconds"] as? Double == 2.0)

        // Two independent readers: python's wave and sox.
        let py = try await verify(path, "sine440")
        #expect(py.frames == 96_000 && py.firstBad == -1 && py.headerOK)
        let soxi = try await CLIHarness.tool("soxi", ["-s", path])
        #expect(soxi.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "96000", "\(soxi.stderr)")
        let raw = FileManager.default.temporaryDirectory.appendingPathComponent("e2e-\(UUID().uuidString).raw").path
        let sox = try await CLIHarness.tool("sox", [path, "-t", "raw", "-e", "signed", "-b", "16", "-L", raw])
        #expect(sox.status == 0 && sox.stderr.isEmpty, "sox: \(sox.stderr)")
        let decoded = try Data(contentsOf: URL(fileURLWithPath: raw))
        let wavPayload = try Data(contentsOf: URL(fileURLWithPath: path)).suffix(decoded.count)
        #expect(decoded.count == 96_000 * 4 && decoded.elementsEqual(wavPayload))

        let show = try await cli.run("show", "Session 1/Take 1", "--json")
        #expect(show.status == 0 && show.stdout.contains("\"frames\" : 96000"))
        let start = Date()
        #expect(try await cli.run("play", "Session 1/Take 1").status == 0)
        #expect(Date().timeIntervalSince(start) >= 1.9, "null playback is paced like a real device")

        #expect(try await cli.run("rename", "Session 1/Take 1", "Opening").status == 0)
        #expect(try await cli.run("rename", "Session 1", "Rehearsal").status == 0)
        #expect(try await cli.takes().first?["name"] as? String == "Opening")
        #expect(try await cli.run("show", "Rehearsal/Opening").status == 0)
        let id = try #require(try await cli.takes().first?["shortID"] as? String)
        #expect(try await cli.run("delete", id, "--yes").status == 0)
        #expect(try await cli.takes().isEmpty)
        #expect(!FileManager.default.fileExists(atPath: path))
    }

    @Test("SIGKILL mid-take: the next command lists it recovered, its header matches, its audio is the signal's prefix")
    func sigkillRecovery() async throws {
        let cli = try CLIHarness()
        let (p, _, _) = try cli.start(["record", "--name", "doomed", "--set", "capture.null.signal=counter"])
        // Wait for 1.5 s of audio (48 kHz stereo s16) on disk, then kill 0.7 s later.
        #expect(try await CLIHarness.wait(timeout: 10) { cli.pendingBytes() >= 288_000 })
        let seen = Date()
        try await Task.sleep(for: .seconds(0.7))
        let capturedAtLeast = 1.5 + Date().timeIntervalSince(seen)
        kill(p.processIdentifier, SIGKILL)
        try await CLIHarness.waitForExit(p)

        let takes = try await cli.takes()
        let take = try #require(takes.first)
        #expect(take["state"] as? String == "recovered")
        let path = try #require(take["path"] as? String)
        let seconds = try #require(take["seconds"] as? Double)
        // Lost at most one checkpoint interval (1 s) plus one period (8192 frames, the default).
        #expect(seconds >= capturedAtLeast - 1.0 - 8192.0 / 48_000 - 0.1, "recovered \(seconds) s of at least \(capturedAtLeast) s")
        let py = try await verify(path, "counter")
        #expect(py.frames == take["frames"] as? Int)
        #expect(py.firstBad == -1, "the recovered audio is the counter's prefix")
        #expect(py.headerOK)
        let soxi = try await CLIHarness.tool("soxi", ["-s", path])
        #expect(soxi.stderr.isEmpty && Int(soxi.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) == py.frames)
        // Nothing is left pending, and the recovered take plays.
        #expect(cli.pendingBytes() == 0)
        #expect(try await cli.run("play", "--set", "playback.null.paced=false", take["shortID"] as! String).status == 0)
    }

    @Test("a take whose header never reached the disk is quarantined by the next command, bytes intact, not left recording", arguments: ["wav", "flac"])
    func unreadableInterruptedTake(encoder: String) async throws {
        // Found by scripts/reliability-powerloss: after a power loss the header write can be lost
        // while audio is not; repair refused the file, so the take stayed `recording` for good and
        // `doctor --repair` could not end it.
        let cli = try CLIHarness()
        let (p, _, _) = try cli.start(["record", "--name", "headless", "--set", "capture.null.signal=counter", "--set", "encoder.name=\(encoder)"])
        #expect(try await CLIHarness.wait(timeout: 10) { cli.pendingBytes() >= 20_000 })
        kill(p.processIdentifier, SIGKILL)
        try await CLIHarness.waitForExit(p)
        let pending = try #require(FileManager.default.subpathsOfDirectory(atPath: cli.library.path).first { $0.contains(".pending.") })
        let url = cli.library.appendingPathComponent(pending)
        let handle = try FileHandle(forWritingTo: url)
        try handle.write(contentsOf: Data(repeating: 0xA5, count: 512))
        try handle.close()
        let damaged = try Data(contentsOf: url)

        let list = try await cli.run("list", "--json")
        #expect(list.status == 0)
        #expect(list.stderr.contains("could not be recovered") && list.stderr.contains("quarantine/"), "\(list.stderr)")
        let listed = try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [[String: Any]] ?? []
        #expect(listed.flatMap { ($0["takes"] as? [[String: Any]]) ?? [] }.isEmpty, "no entry is left without audio")
        let quarantined = try FileManager.default.subpathsOfDirectory(atPath: cli.library.path)
            .filter { $0.hasPrefix("quarantine/") && $0.hasSuffix((pending as NSString).lastPathComponent) }
        #expect(quarantined.count == 1)
        if let moved = quarantined.first {
            #expect(try Data(contentsOf: cli.library.appendingPathComponent(moved)) == damaged, "the bytes are kept as they were")
        }
        #expect(try await cli.run("doctor").status == 0)
    }

    @Test("SIGINT, SIGTERM and SIGHUP each end a recording cleanly with no audio lost", arguments: [SIGINT, SIGTERM, SIGHUP])
    func stopSignals(signal: Int32) async throws {
        let cli = try CLIHarness()
        let (p, out, _) = try cli.start(["record", "--json", "--set", "capture.null.signal=counter"])
        #expect(try await cli.waitForPendingFile())
        try await Task.sleep(for: .seconds(1.2))
        kill(p.processIdentifier, signal)
        try await CLIHarness.waitForExit(p)
        #expect(p.terminationStatus == 0)
        let (take, seconds, wall) = try CLIHarness.stoppedRecording(out)
        #expect(abs(seconds - wall) <= 8192.0 / 48_000 + 0.02, "recorded \(seconds) s over \(wall) s of wall time")
        let py = try await verify(try #require(take["path"] as? String), "counter")
        #expect(py.firstBad == -1 && py.headerOK && py.frames == take["frames"] as? Int)
    }

    @Test("a stop signal the command was started with ignored stays ignored (nohup, a script's background job); SIGTERM still stops it cleanly")
    func inheritedIgnoredSignalsStayIgnored() async throws {
        var cli = try CLIHarness()
        cli.launcher = ["/usr/bin/env", "--ignore-signal=HUP,INT"]
        let (p, out, _) = try cli.start(["record", "--json", "--set", "capture.null.signal=counter"])
        defer { if p.isRunning { kill(p.processIdentifier, SIGKILL) } }
        #expect(try await cli.waitForPendingFile())
        try await Task.sleep(for: .seconds(0.5))
        kill(p.processIdentifier, SIGHUP)
        kill(p.processIdentifier, SIGINT)
        try await Task.sleep(for: .seconds(1.0))
        #expect(p.isRunning, "a hang-up the command was told to ignore stopped the recording")
        kill(p.processIdentifier, SIGTERM)
        try await CLIHarness.waitForExit(p)
        #expect(p.terminationStatus == 0)
        let (_, seconds, _) = try CLIHarness.stoppedRecording(out)
        #expect(seconds >= 1.3, "the take ends at SIGTERM, not at the ignored signals: \(seconds) s")
    }

    @Test("a stop signal that comes as soon as record or play has taken SIGTERM over is never lost, however slowly the process runs",
          arguments: ["play", "record"])
    func stopSignalWhileArming(command: String) async throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/strace") else {
            Issue.record("strace is missing (scripts/install-deps installs it)")
            return
        }
        var cli = try CLIHarness()
        if command == "play" {
            #expect(try await cli.run("record", "--duration", "20s", "--set", "capture.null.paced=false").status == 0)
        }
        // strace slows every sigaction by 0.2 s and writes each thread's calls to its own file,
        // one whole line per finished call; the signal goes the moment a line shows SIGTERM's
        // action changed from the default. A trap that sets SIGTERM to "ignore" and installs its
        // real handler later (on another thread) loses that signal, and the command runs on.
        let trace = cli.library.appendingPathExtension("trace")
        cli.launcher = ["/usr/bin/strace", "-ff", "-qq", "-e", "trace=rt_sigaction",
                        "-e", "inject=rt_sigaction:delay_enter=200000", "-o", trace.path]
        let args = command == "record"
            ? ["record", "--json", "--set", "capture.null.signal=counter"]
            : ["play", "--set", "playback.null.paced=true", "Session 1/Take 1"]
        let (strace, _, err) = try cli.start(args)
        let folder = trace.deletingLastPathComponent()
        var tracee: pid_t = 0
        defer {
            if strace.isRunning {
                if tracee > 0 { kill(tracee, SIGKILL) }
                strace.terminate()
            }
            for name in (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
            where name.hasPrefix(trace.lastPathComponent + ".") {
                try? FileManager.default.removeItem(at: folder.appendingPathComponent(name))
            }
        }
        // The process that took SIGTERM over: the thread-group id of the thread whose file shows it.
        let taken = try await CLIHarness.wait(timeout: 30) {
            let files = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
            for name in files where name.hasPrefix(trace.lastPathComponent + ".") {
                let text = (try? String(contentsOf: folder.appendingPathComponent(name), encoding: .utf8)) ?? ""
                let changed = text.split(separator: "\n").contains {
                    $0.hasPrefix("rt_sigaction(SIGTERM, {sa_handler=") && !$0.hasPrefix("rt_sigaction(SIGTERM, {sa_handler=SIG_DFL")
                        && $0.contains(") = 0")
                }
                let status = (try? String(contentsOfFile: "/proc/\(name.split(separator: ".").last ?? "")/status", encoding: .utf8)) ?? ""
                if changed, let line = status.split(separator: "\n").first(where: { $0.hasPrefix("Tgid:") }) {
                    tracee = pid_t(line.dropFirst(5).trimmingCharacters(in: .whitespaces)) ?? 0
                    return true
                }
            }
            return false
        }
        try #require(taken && tracee > 0, "SIGTERM's action never changed")
        kill(tracee, SIGTERM)
        let ended = try await CLIHarness.wait(timeout: 15) { !strace.isRunning }
        if !ended { kill(tracee, SIGKILL) }
        try await CLIHarness.untilExited(strace)
        let stderr = try String(contentsOf: err, encoding: .utf8)
        cli.launcher = []
        #expect(ended, "\(command) still ran 15 s after SIGTERM: the signal was lost")
        if command == "record" {
            // Stopped before the take began (nothing made) or after (a complete take).
            #expect([0, 130].contains(strace.terminationStatus), "exit \(strace.terminationStatus): \(stderr)")
            if strace.terminationStatus == 130 {
                #expect(stderr.contains("Stopped before recording began"))
                #expect(try await cli.takes().isEmpty)
            } else {
                #expect(try await cli.takes().map { $0["state"] as? String } == ["complete"])
            }
        } else {
            #expect(strace.terminationStatus == 0, "exit \(strace.terminationStatus): \(stderr)")
        }
    }

    @Test("an injected overrun and a device loss show in the take, the report and the exit status")
    func faultsReported() async throws {
        let cli = try CLIHarness()
        let r = try await cli.run("record", "--duration", "1s", "--json", "--set", "capture.null.overrun-at-frame=4800")
        #expect(r.status == 3, "\(r.stderr)")
        #expect(r.stdout.contains("\"overruns\" : 1"))
        let lost = try await cli.run("record", "--duration", "3s", "--set", "capture.null.device-loss-at-frame=24000")
        #expect(lost.status == 4, "\(lost.stderr)")
        #expect(lost.stderr.contains("removed at frame 24000"))
        let states = try await cli.takes().map { $0["state"] as? String }
        #expect(states == ["complete", "interrupted"])
        #expect(try await cli.takes().last?["frames"] as? Int == 24_000)
    }

    @Test("bad input gets one line that says what to do, and a documented exit code")
    func badInput() async throws {
        let cli = try CLIHarness()
        #expect(try await cli.run("record", "--duration", "0.2s", "--session", "a/../../b", "--name", "../x/.. /y").status == 0)
        let take = try #require(try await cli.takes().first)
        #expect(take["session"] as? String == "a/../../b" && take["name"] as? String == "../x/.. /y")
        #expect((take["path"] as? String)?.hasPrefix(cli.library.path + "/sessions/") == true)

        let missing = try await cli.run("show", "Nope/Take 9")
        #expect(missing.status == 66 && missing.stderr.contains("tapedeck list"))
        let noYes = try await cli.run("delete", "a/../../b")
        #expect(noYes.status == 64 && noYes.stderr.contains("--yes"))
        let badDuration = try await cli.run("record", "--duration", "soon")
        #expect(badDuration.status == 64 && badDuration.stderr.contains("-d/--duration soon: not a duration") && badDuration.stderr.contains("01:02:03.5"))

        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cfg-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let typo = dir.appendingPathComponent("typo.yaml")
        try Data("capture:\n  backend: nul\n".utf8).write(to: typo)
        let unknown = try await cli.run("list", "--config", typo.path)
        #expect(unknown.status == 78)
        #expect(unknown.stderr == "tapedeck: \(typo.path):2: capture.backend: unknown backend \"nul\" (did you mean \"null\"?). Known: alsa, jack, null, pipewire, pulse, rtp, stream.\n")
        let unreadable = try await cli.run("list", "--config", dir.appendingPathComponent("absent.yaml").path)
        #expect(unreadable.status == 78 && unreadable.stderr.contains("no such file"))
        // Every error is one line.
        for r in [missing, noYes, badDuration, unknown, unreadable] {
            #expect(r.stderr.split(separator: "\n").count == 1, "\(r.stderr)")
        }
        // Nothing was deleted by any of that.
        #expect(try await cli.takes().count == 1)
    }

    @Test("backends --json lists the compiled-in plugins with their settings")
    func backends() async throws {
        let r = try await CLIHarness().run("backends", "--json")
        #expect(r.status == 0)
        let plugins = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [[String: Any]])
        let names = plugins.map { "\($0["role"] as! String):\($0["name"] as! String)" }
        #expect(names == ["capture:null", "capture:alsa", "capture:pulse", "capture:jack", "capture:pipewire", "capture:stream", "capture:rtp", "playback:null", "playback:alsa", "playback:pulse", "playback:jack", "playback:pipewire",
                          "encoder:wav", "encoder:flac", "encoder:opus", "encoder:mp3", "encoder:vorbis", "encoder:aiff",
                          "decoder:wav", "decoder:flac", "decoder:opus", "decoder:mp3", "decoder:vorbis", "decoder:aiff",
                          "storage:directory", "storage:bundle", "remote:s3"])
        let nullCapture = try #require(plugins.first)
        let keys = (nullCapture["settings"] as? [[String: Any]])?.compactMap { $0["configKey"] as? String } ?? []
        #expect(keys.contains("capture.null.signal"))
    }
}
