import Foundation
import TapedeckTesting
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Markers set by SIGUSR1, by `tapedeck mark` and by `m` on a terminal: in the catalog, in the WAV
/// file's `cue ` chunk (read by python's chunk walk) and in FLAC's Vorbis comment chapters
/// (metaflac); `--split-on-marker` splits sample-exactly.
@Suite("markers end to end", .endToEnd, .serialized)
struct MarkerEndToEndTests {
    /// The cue points (sample offsets) and labels of a WAV file, read by python's own RIFF walk.
    static func wavCues(_ path: String) async throws -> (offsets: [Int], labels: [String]) {
        let script = """
            import struct, sys, json
            b = open(sys.argv[1], 'rb').read()
            assert b[:4] == b'RIFF' and struct.unpack('<I', b[4:8])[0] + 8 == len(b), 'RIFF size'
            i, cues, labels = 12, [], {}
            while i + 8 <= len(b):
                cid, size = b[i:i+4], struct.unpack('<I', b[i+4:i+8])[0]
                body = b[i+8:i+8+size]
                if cid == b'cue ':
                    n = struct.unpack('<I', body[:4])[0]
                    cues = [struct.unpack('<I', body[4+24*k+20:4+24*k+24])[0] for k in range(n)]
                if cid == b'LIST' and body[:4] == b'adtl':
                    j = 4
                    while j + 8 <= len(body):
                        sid, ssize = body[j:j+4], struct.unpack('<I', body[j+4:j+8])[0]
                        if sid == b'labl':
                            labels[struct.unpack('<I', body[j+8:j+12])[0]] = body[j+12:j+8+ssize].rstrip(b'\\0').decode()
                        j += 8 + ssize + (ssize & 1)
                i += 8 + size + (size & 1)
            print(json.dumps([cues, [labels.get(k + 1, '') for k in range(len(cues))]]))
            """
        let r = try await CLIHarness.tool("python3", ["-c", script, path])
        #expect(r.status == 0, "\(r.stderr)")
        let parsed = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [[Any]])
        return (parsed[0].compactMap { $0 as? Int }, parsed[1].compactMap { $0 as? String })
    }

    @Test("SIGUSR1 and `tapedeck mark LABEL` set markers at the audio being captured, in the catalog and the file; WAV and FLAC", arguments: ["wav", "flac"])
    func signalAndCommand(_ encoding: String) async throws {
        var cli = try CLIHarness()
        // A runtime folder of the test's own, so `mark` finds only this recording.
        let runtime = cli.library.path + "-run"
        cli.extraEnvironment["XDG_RUNTIME_DIR"] = runtime
        let (p, out, _) = try cli.start(["record", "-d", "4s", "--set", "encoder.name=\(encoding)", "--json"])
        let started = Date()
        #expect(try await CLIHarness.wait(timeout: 10) { FileManager.default.fileExists(atPath: runtime + "/tapedeck/recorder-\(p.processIdentifier).json") })
        try await Task.sleep(for: .seconds(max(0, 1.5 - Date().timeIntervalSince(started))))
        kill(p.processIdentifier, SIGUSR1)
        try await Task.sleep(for: .seconds(1))
        let marked = try await cli.run("mark", "chorus ♪")
        #expect(marked.status == 0, "\(marked.stderr)")
        #expect(marked.stdout.contains("Marker \"chorus ♪\" sent to the recording"), "\(marked.stdout)")
        try await CLIHarness.waitForExit(p)
        #expect(p.terminationStatus == 0)
        let report = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: out)) as? [String: Any])
        let take = try #require(report["take"] as? [String: Any])
        let markers = try #require(take["markers"] as? [[String: Any]])
        #expect(markers.map { $0["label"] as? String } == ["", "chorus ♪"])
        let frames = markers.compactMap { $0["frame"] as? Int }
        #expect(frames.count == 2)
        // Sent 1.5 s and 2.5 s after the process started; its audio began up to 0.6 s after that.
        #expect((43_000...80_000).contains(frames.first ?? 0), "\(frames)")
        #expect((frames.last ?? 0) - (frames.first ?? 0) >= 36_000, "\(frames)")
        let path = try #require(take["path"] as? String)
        if encoding == "wav" {
            let cues = try await Self.wavCues(path)
            #expect(cues.offsets == frames)
            #expect(cues.labels == ["", "chorus ♪"])
            #expect(try await CLIHarness.tool("sox", [path, "-n"]).stderr.isEmpty, "sox reads the file without a warning")
        } else {
            #expect(try await CLIHarness.tool("flac", ["-t", "-s", path]).status == 0)
            let comments = try await CLIHarness.tool("metaflac", ["--export-tags-to=-", path]).stdout
            let ms = frames.map { $0 * 1000 / 48_000 }
            #expect(comments.contains("CHAPTER001=00:00:0\(ms[0] / 1000).\(String(format: "%03d", ms[0] % 1000))"), "\(comments)")
            #expect(comments.contains("CHAPTER002NAME=chorus ♪"), "\(comments)")
        }
        #expect(try await cli.run("doctor").status == 0)
        // The recorder's files in the runtime folder are gone with it.
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: runtime + "/tapedeck")) ?? []).isEmpty)
        let none = try await cli.run("mark")
        #expect(none.status == 66 && none.stderr.contains("No recording is running"), "\(none.stderr)")
    }

    @Test("--split-on-marker: each marker begins a take at its frame; the takes join to exactly the delivered frames")
    func splitOnMarker() async throws {
        let cli = try CLIHarness()
        let (p, out, _) = try cli.start(["record", "-d", "3s", "--split-on-marker", "--set", "capture.null.signal=counter", "--json"])
        try await Task.sleep(for: .seconds(1.2))
        kill(p.processIdentifier, SIGUSR1)
        try await Task.sleep(for: .seconds(0.8))
        kill(p.processIdentifier, SIGUSR1)
        try await CLIHarness.waitForExit(p)
        let report = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: out)) as? [String: Any])
        let takes = try #require(report["takes"] as? [[String: Any]])
        #expect(takes.count == 3)
        #expect(takes.map { ($0["run"] as? [String: Any])?["ended"] as? String } == ["marker-split", "marker-split", "duration"])
        #expect(takes.dropFirst().allSatisfy { ($0["markers"] as? [[String: Any]])?.first?["frame"] as? Int == 0 })
        var offset = 0
        for take in takes {
            #expect((take["run"] as? [String: Any])?["offsetFrames"] as? Int == offset)
            let path = try #require(take["path"] as? String)
            #expect(try await CLIHarness.firstWrongCounterSample(path, from: offset * 2) == nil)
            offset += take["frames"] as? Int ?? 0
        }
        #expect(offset == 144_000)
    }

    /// A harness whose runtime folder is the test's own (so `mark` finds only its recording),
    /// and that folder's path.
    static func privateRuntime() throws -> (CLIHarness, String) {
        var cli = try CLIHarness()
        let runtime = cli.library.path + "-run"
        cli.extraEnvironment["XDG_RUNTIME_DIR"] = runtime
        return (cli, runtime)
    }

    /// Waits until recorder `p` has registered (its signals are trapped) and writes its take.
    static func waitUntilRecording(_ cli: CLIHarness, _ p: Process, runtime: String) async throws {
        #expect(try await CLIHarness.wait(timeout: 10) { FileManager.default.fileExists(atPath: runtime + "/tapedeck/recorder-\(p.processIdentifier).json") })
        #expect(try await cli.waitForPendingFile())
        try await Task.sleep(for: .seconds(0.3))
    }

    @Test("over 999 markers: the take keeps its first 999 and all else it learnt (loudness, first frame's time, run end); the report counts the rest, stderr says so once, the WAV's cue chunk holds the same 999")
    func overTheMarkerLimit() async throws {
        let (cli, runtime) = try Self.privateRuntime()
        let (p, out, err) = try cli.start(["record", "-d", "5s", "--split", "1h", "--json"])
        try await Self.waitUntilRecording(cli, p, runtime: runtime)
        // One signal at a time: the kernel merges a signal sent while the last one is pending,
        // so of 4,000 well over 1,200 arrive. All are sent while the take records (5 s), never
        // after the recorder has given SIGUSR1 its default action back.
        let until = Date().addingTimeInterval(2.5)
        for _ in 0..<4000 where p.isRunning && Date() < until {
            kill(p.processIdentifier, SIGUSR1)
            usleep(250)
        }
        try await CLIHarness.waitForExit(p)
        let stderr = try String(contentsOf: err, encoding: .utf8)
        #expect(p.terminationStatus == 0, "\(stderr)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: out)) as? [String: Any])
        let notKept = try #require(report["markersNotKept"] as? Int)
        #expect(notKept > 0, "\(report["message"] ?? "")")
        #expect((report["message"] as? String)?.contains("not kept: a take keeps at most 999.") == true, "\(report["message"] ?? "")")
        #expect(stderr.components(separatedBy: "A take keeps at most 999 markers").count == 2, "said once: \(stderr)")
        let shown = try await cli.run("show", "last", "--json")
        try #require(shown.status == 0, "\(shown.stderr)")
        let take = try #require(try JSONSerialization.jsonObject(with: Data(shown.stdout.utf8)) as? [String: Any])
        let markers = try #require(take["markers"] as? [[String: Any]])
        #expect(markers.count == 999)
        let frames = markers.compactMap { $0["frame"] as? Int }
        #expect(frames == frames.sorted())
        #expect(take["loudness"] as? [String: Any] != nil, "the loudness is kept: \(take.keys.sorted())")
        #expect(take["firstFrameAt"] as? String != nil, "the first frame's time is kept: \(take.keys.sorted())")
        #expect((take["run"] as? [String: Any])?["ended"] as? String == "duration", "the run's end is kept: \(take["run"] ?? "none")")
        #expect(((report["take"] as? [String: Any])?["markers"] as? [Any])?.count == 999, "the report's take is the catalog's")
        let cues = try await Self.wavCues(try #require(take["path"] as? String))
        #expect(cues.offsets == frames, "the cue chunk holds the markers the catalog keeps")
        #expect(try await cli.run("doctor").status == 0)
    }

    @Test("a flood of SIGUSR1 (a tight loop for 2 s) costs a FLAC take nothing: no overrun, every frame in order, markers within the limit")
    func signalFlood() async throws {
        let (cli, runtime) = try Self.privateRuntime()
        let (p, out, err) = try cli.start(["record", "-d", "4s", "--set", "encoder.name=flac", "--set", "capture.null.signal=counter", "--json"])
        try await Self.waitUntilRecording(cli, p, runtime: runtime)
        let until = Date().addingTimeInterval(2)
        while Date() < until && p.isRunning {
            for _ in 0..<200 { kill(p.processIdentifier, SIGUSR1) }
        }
        try await CLIHarness.waitForExit(p)
        let stderr = try String(contentsOf: err, encoding: .utf8)
        #expect(p.terminationStatus == 0, "no overruns (exit 3): \(stderr)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: out)) as? [String: Any])
        let take = try #require(report["take"] as? [String: Any])
        #expect(take["frames"] as? Int == 192_000)
        #expect(take["overruns"] as? Int == 0, "\(take["overrunEvents"] ?? "")")
        #expect(((take["markers"] as? [Any])?.count ?? 0) <= 999)
        let path = try #require(take["path"] as? String)
        #expect(try await CLIHarness.tool("flac", ["-t", "-s", path]).status == 0)
        #expect(try await CLIHarness.firstWrongCounterSample(path, from: 0) == nil, "every frame, in order")
    }

    @Test("50 `tapedeck mark LABEL` at once: each label arrives once, and no marker comes without one")
    func concurrentMarks() async throws {
        let (cli, runtime) = try Self.privateRuntime()
        let (p, out, _) = try cli.start(["record", "--json"])
        try await Self.waitUntilRecording(cli, p, runtime: runtime)
        let marks = try (0..<50).map { try cli.start(["mark", "L\($0)"]) }
        for (m, mout, merr) in marks {
            try await CLIHarness.waitForExit(m)
            #expect(m.terminationStatus == 0, "\((try? String(contentsOf: merr, encoding: .utf8)) ?? "")")
            try? FileManager.default.removeItem(at: mout)
            try? FileManager.default.removeItem(at: merr)
        }
        try await Task.sleep(for: .seconds(0.5))
        kill(p.processIdentifier, SIGINT)
        try await CLIHarness.waitForExit(p)
        let (take, _, _) = try CLIHarness.stoppedRecording(out)
        let labels = ((take["markers"] as? [[String: Any]]) ?? []).compactMap { $0["label"] as? String }
        #expect(labels.sorted() == (0..<50).map { "L\($0)" }.sorted(), "\(labels)")
    }

    @Test("m on a terminal sets a marker; the banner says so, and the terminal is given back as it was")
    func keyOnTerminal() async throws {
        let cli = try CLIHarness()
        let socket = "tapedeck-\(UUID().uuidString.prefix(8))"
        @discardableResult
        func tmux(_ more: [String]) async throws -> String { try await ChildProcess.runAsync(["tmux", "-L", socket] + more).output }
        // The tmux server goes when this returns, before the test does.
        defer { CLIHarness.killTmuxServer(socket) }
        let command = "'\(try CLIHarness.binary.path)' record -d 3s --session Keys; stty -a | tr ' ' '\\n' | grep -x -e icanon -e echo -e -icanon -e -echo; sleep 60"
        let environment = cli.environment.filter { $0.key.hasPrefix("TAPEDECK_") || $0.key == "PATH" || $0.key == "HOME" }
        try await tmux(["new-session", "-d", "-x", "80", "-y", "24"] + environment.flatMap { ["-e", "\($0.key)=\($0.value)"] } + ["-e", "TERM=xterm", command])
        var screen = ""
        #expect(try await CLIHarness.wait(timeout: 10) {
            screen = (try? await tmux(["capture-pane", "-p"])) ?? ""
            return screen.contains("Press m to set a marker")
        }, "\(screen)")
        try await Task.sleep(for: .seconds(1))
        try await tmux(["send-keys", "m"])
        #expect(try await CLIHarness.wait(timeout: 10) {
            screen = (try? await tmux(["capture-pane", "-p"])) ?? ""
            return screen.contains("Recorded Keys/Take 1") && screen.contains("echo")
        }, "\(screen)")
        #expect(screen.contains("icanon") && !screen.contains("-icanon") && !screen.contains("-echo"), "the terminal's mode is restored: \(screen)")
        let take = try #require(try await cli.takes().first)
        let markers = try #require(take["markers"] as? [[String: Any]])
        #expect(markers.count == 1)
        #expect((24_000...120_000).contains(markers.first?["frame"] as? Int ?? 0), "\(markers)")
    }
}
