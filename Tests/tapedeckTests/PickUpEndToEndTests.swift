import Foundation
import TapedeckTesting
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// What a person meets first, tried as they would: on a terminal (tmux), with and without a
/// config file, with the flags other recorders taught them.
@Suite("picking tapedeck up", .endToEnd, .serialized)
struct PickUpEndToEndTests {
    /// A tmux server with one `columns`-wide window running `tapedeck ARGS`.
    final class Screen {
        let socket = "tapedeck-\(UUID().uuidString.prefix(8))"
        @discardableResult
        func tmux(_ more: [String]) async throws -> String { try await ChildProcess.runAsync(["tmux", "-L", socket] + more).output }

        init(_ cli: CLIHarness, _ args: [String], columns: Int = 80, environment extra: [String: String] = [:]) async throws {
            let command = ([try CLIHarness.binary.path] + args).map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }
                .joined(separator: " ") + "; sleep 60"
            // As a person's terminal has it: the test runner's NO_COLOR (swift test sets it) is
            // not passed on, unless a test sets it.
            let environment = cli.environment.filter { $0.key.hasPrefix("TAPEDECK_") || $0.key == "PATH" || $0.key == "HOME" }
                .merging(["NO_COLOR": ""]) { own, _ in own }.merging(extra) { _, own in own }
            try await tmux(["new-session", "-d", "-x", String(columns), "-y", "24"]
                           + environment.flatMap { ["-e", "\($0.key)=\($0.value)"] } + ["-e", "TERM=xterm", command])
        }

        var text: String {
            get async { (try? await tmux(["capture-pane", "-p", "-S", "-200"])) ?? "" }
        }

        /// Waits until `needle` is on screen; returns the screen.
        @discardableResult
        func wait(for needle: String, timeout: Double = 20) async throws -> String {
            var screen = ""
            _ = try await CLIHarness.wait(timeout: timeout) { screen = await text; return screen.contains(needle) }
            return screen
        }

        // The tmux server goes with the screen, before the test does.
        deinit { CLIHarness.killTmuxServer(socket) }
    }

    @Test("on a terminal: a banner before audio, a meter that never reads -inf on a steady signal, a clip count for full-scale noise, nothing left wrapped")
    func bannerMeterAndClips() async throws {
        let cli = try CLIHarness()
        let screen = try await Screen(cli, ["record", "-d", "7", "--set", "capture.null.signal=noise", "--set", "capture.null.level=1.0"])
        let first = try await screen.wait(for: "● REC")
        #expect(first.contains("Recording from") && first.contains("Press Ctrl-C to stop."), "\(first)")
        var reads: [String] = []
        let start = Date()
        while Date().timeIntervalSince(start) < 5 {
            if let line = await screen.text.split(separator: "\n").first(where: { $0.contains("● REC") }) { reads.append(String(line)) }
            try await Task.sleep(for: .seconds(0.2))
        }
        #expect(reads.count >= 15, "\(reads)")
        let silent = reads.filter { $0.contains("inf") || $0.contains("<-90") }
        #expect(silent.isEmpty, "\(silent)")
        #expect(reads.allSatisfy { $0.count <= 80 })
        #expect(reads.contains { $0.contains("CLIP") }, "\(reads)")
        let end = try await screen.wait(for: "Recorded")
        #expect(end.contains("Clipped:"), "\(end)")
        #expect(!end.split(separator: "\n").contains { $0.contains("● REC") }, "meter rows left behind: \(end)")
        let take = try #require(try await cli.takes().first)
        #expect((take["clippedSamples"] as? Int ?? 0) > 0)
    }

    @Test("Ctrl-C shows Stopping… at once, and the take is kept")
    func stopping() async throws {
        let cli = try CLIHarness()
        // Long periods: the take takes a moment to finish after the stop, long enough to see.
        let screen = try await Screen(cli, ["record", "--set", "capture.period-frames=48000"])
        try await screen.wait(for: "● REC")
        try await screen.tmux(["send-keys", "C-c"])
        let shown = try await screen.wait(for: "Stopping", timeout: 2)
        #expect(shown.contains("Stopping…"), "\(shown)")
        #expect(try await screen.wait(for: "Recorded").contains("Recorded Session 1/Take 1"))
    }

    @Test("delete asks on a terminal with the length and size of what goes")
    func deletePrompt() async throws {
        let cli = try CLIHarness()
        #expect(try await cli.run("record", "1s").status == 0)
        let screen = try await Screen(cli, ["delete", "last"])
        let prompt = try await screen.wait(for: "y/N")
        // 1 s of 48 kHz stereo s16 (187.5 KiB) with its header, bext and iXML.
        #expect(prompt.contains("Delete take \"Session 1/Take 1\" (0:01.000, 19") && prompt.contains("KB)"), "\(prompt)")
        try await screen.tmux(["send-keys", "n", "Enter"])
        #expect(try await screen.wait(for: "Nothing was deleted.").contains("Nothing was deleted."))
        #expect(try await cli.takes().count == 1)
    }

    @Test("note, tag and export: notes and tags reach the FLAC file, export --tag adds its own, -o names a file, - writes stdout")
    func notesTagsAndExport() async throws {
        let cli = try CLIHarness()
        #expect(try await cli.run("record", "-d", "1").status == 0)
        #expect(try await cli.run("note", "last", "Warm-up").status == 0)
        #expect(try await cli.run("tag", "last", "mic=SM57", "ROOM=Studio A").status == 0)
        #expect(try await cli.run("tag", "last", "bad name=x").status == 64)
        #expect(try await cli.run("note", "last").stdout == "Warm-up\n")
        #expect(try await cli.run("note", "last", "--append", "Second line").status == 0)
        #expect(try await cli.run("note", "last").stdout == "Warm-up\nSecond line\n")
        #expect(try await cli.run("note", "last", "Warm-up").status == 0)
        #expect(try await cli.run("tag", "last", "GONE=soon").status == 0)
        #expect(try await cli.run("tag", "last", "--remove", "gone").status == 0)
        #expect(!(try await cli.run("tag", "last").stdout.contains("GONE")))
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-pickup-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: out, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: out) }
        let file = out.appendingPathComponent("warm.flac").path
        let r = try await cli.run("export", "last", "-o", file, "--tag", "artist=Ann", "--level", "8")
        #expect(r.status == 0 && r.stdout.count <= 101 && r.stdout.contains("verified"), "\(r.stdout) \(r.stderr)")
        let tags = try await CLIHarness.tool("metaflac", ["--export-tags-to=-", file]).stdout
        for tag in ["DESCRIPTION=Warm-up", "MIC=SM57", "ROOM=Studio A", "ARTIST=Ann", "TITLE=Take 1"] {
            #expect(tags.contains(tag), "\(tag) in \(tags)")
        }
        let wav = try await cli.run("export", "last", "-o", out.appendingPathComponent("warm.wav").path)
        let wavType = try await CLIHarness.tool("soxi", ["-t", out.appendingPathComponent("warm.wav").path]).stdout
        #expect(wav.status == 0 && wavType.contains("wav"))
        let level = try await cli.run("export", "last", "--level", "12")
        #expect(level.status == 64 && level.stderr.contains("--level 12"), "\(level.stderr)")
        let bitrate = try await cli.run("export", "last", "--bitrate", "96k")
        #expect(bitrate.status == 64 && bitrate.stderr.contains("--bitrate"), "\(bitrate.stderr)")
        let opus = try await cli.run("export", "last", "-o", out.appendingPathComponent("warm.opus").path, "--bitrate", "64k")
        #expect(opus.status == 0, "\(opus.stderr)")
        let piped = try await ChildProcess.runAsync(["sh", "-c", "'\(try CLIHarness.binary.path)' export last -o - | flac -t -s -"],
                                                    environment: cli.environment)
        #expect(piped.status == 0, "\(piped.output)")
        let show = try await cli.run("show", "last", "--json")
        let take = try #require(try JSONSerialization.jsonObject(with: Data(show.stdout.utf8)) as? [String: Any])
        #expect(take["kind"] as? String == "take" && take["schema"] as? Int == 1 && take["notes"] as? String == "Warm-up")
        #expect((take["tags"] as? [String: String])?["MIC"] == "SM57")
    }

    @Test("list: header, totals, the next record's session, and --since/--state/--search; names are printed escaped")
    func listing() async throws {
        let cli = try CLIHarness()
        #expect(try await cli.run("record", "1s", "--session", "Band", "--name", "Intro").status == 0)
        #expect(try await cli.run("record", "1s", "--session", "Solo", "--name", "Evil\u{202E}txt.exe").status == 0)
        let list = try await cli.run("list")
        #expect(list.stdout.contains("ID") && list.stdout.contains("LENGTH") && list.stdout.contains("(next record)"), "\(list.stdout)")
        #expect(list.stdout.contains("Evil\\u{202E}txt.exe") && !list.stdout.contains("\u{202E}"), "\(list.stdout)")
        #expect(try await cli.run("list", "--search", "intro").stdout.contains("Intro"))
        let intro = try await cli.run("list", "--search", "intro").stdout
        #expect(!intro.contains("Solo"))
        #expect(try await cli.run("list", "--state", "recovered").stdout.contains("No takes match."))
        #expect(try await cli.run("list", "--since", "1h").stdout.contains("Intro"))
        #expect(try await cli.run("list", "--since", "2999-01-01").stdout.contains("No takes match."))
        #expect(try await cli.run("list", "--since", "soon").status == 64)
    }

    @Test("did you mean: commands, takes and sessions (any case); last; play --start/--end; --version names the libraries")
    func suggestions() async throws {
        let cli = try CLIHarness()
        #expect(try await cli.run("record", "1s", "--name", "Hello World").status == 0)
        let command = try await cli.run("recrod")
        #expect(command.status == 64 && command.stderr.contains("Did you mean 'record'?"), "\(command.stderr)")
        let lower = try await cli.run("show", "session 1/hello world")
        #expect(lower.status == 66 && lower.stderr.contains("did you mean \"Session 1/Hello World\"?"), "\(lower.stderr)")
        let typo = try await cli.run("play", "Hello Wrld")
        #expect(typo.stderr.contains("did you mean \"Session 1/Hello World\"?"), "\(typo.stderr)")
        // A take's name alone names it when no other take has that name.
        let bare = try await cli.run("show", "Hello World", "--json")
        #expect(bare.status == 0 && bare.stdout.contains(#""name" : "Hello World""#), "\(bare.stderr)")
        #expect(try await cli.run("show", "lst").stderr.contains("did you mean \"last\"?"))
        #expect(try await cli.run("play", "last", "-s", "0.5", "-e", "0:00.8").status == 0)
        #expect(try await cli.run("play", "last", "--start", "5").status == 64)
        let version = try await cli.run("--version")
        #expect(version.stdout.hasPrefix("tapedeck 0.") && version.stdout.contains("libFLAC") && version.stdout.contains("SQLite"), "\(version.stdout)")
        let device = try await cli.run("record", "-d", "1", "--set", "capture.backend=alsa", "-D", "defualt")
        #expect(device.status == 69 && device.stderr.contains("did you mean \"default\"?"), "\(device.stderr)")
        let positional = try await cli.run("record", "soon")
        #expect(positional.status == 64 && positional.stderr.contains("-d"), "\(positional.stderr)")
    }

    @Test("config example is the reference config; config init writes a starter config once, and it loads")
    func configInit() async throws {
        var cli = try CLIHarness()
        cli.withoutConfig = true
        let example = try await cli.run("config", "example")
        let reference = try String(contentsOf: CLIHarness.packageRoot.appendingPathComponent("Configuration/tapedeck.yaml"), encoding: .utf8)
        #expect(example.stdout == reference, "config example differs from Configuration/tapedeck.yaml")
        let first = try await cli.run("config", "init", "--machine", "studio")
        #expect(first.status == 0, "\(first.stderr)")
        let written = cli.library.path + "-config/tapedeck/config.yaml"
        #expect(FileManager.default.fileExists(atPath: written))
        let again = try await cli.run("config", "init")
        #expect(again.status == 73 && again.stderr.contains("exists already"))
        #expect(try await cli.run("config", "check", "--offline", "--machine", "studio").status == 0)
        // Defaults are comments: the only values the file sets are the machine's backends.
        let shown = try await cli.run("config", "show", "--machine", "studio")
        let fromFile = shown.stdout.split(separator: "\n").filter { $0.contains("config.yaml:") }.map { $0.split(separator: " ").first ?? "" }
        #expect(Set(fromFile) == ["capture.backend", "playback.backend"], "\(shown.stdout)")
        let text = try String(contentsOfFile: written, encoding: .utf8)
        #expect(text.contains("  # period-frames: 8192") && text.contains("    # signal: sine"), "\(text)")
    }

    @Test("record -o FILE writes a file outside the library (never over one); -o - streams WAV or FLAC; a reader that leaves stops it cleanly")
    func recordToFile() async throws {
        let cli = try CLIHarness()
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-o-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: out, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: out) }
        let flac = out.appendingPathComponent("take.flac").path
        let r = try await cli.run("record", "-d", "1", "-o", flac, "--json")
        #expect(r.status == 0, "\(r.stderr)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        #expect(report["kind"] as? String == "file-recording" && report["frames"] as? Int == 48000 && report["encoding"] as? String == "flac")
        #expect(try await CLIHarness.tool("flac", ["-t", "-s", flac]).status == 0)
        #expect(try await cli.takes().isEmpty, "nothing in the library")
        let again = try await cli.run("record", "-d", "1", "-o", flac)
        #expect(again.status == 73 && again.stderr.contains("exists already"), "\(again.stderr)")
        let binary = try CLIHarness.binary.path
        let wav = try await ChildProcess.runAsync(["sh", "-c", "'\(binary)' record 1 -o - | sox -t wav - -n stat 2>&1"], environment: cli.environment)
        #expect(wav.output.contains("Samples read:             96000"), "\(wav.output)")
        let stream = try await ChildProcess.runAsync(["sh", "-c", "'\(binary)' record 1 -o - -c 1 --set encoder.name=flac | flac -t -s - && echo decoded"], environment: cli.environment)
        #expect(stream.output.contains("decoded"), "\(stream.output)")
        let head = try await ChildProcess.runAsync(["bash", "-c", "'\(binary)' record 5 -o - | head -c 1000 >/dev/null; echo \"status ${PIPESTATUS[0]}\""], environment: cli.environment)
        #expect(head.output.contains("status 0"), "\(head.output)")
    }

    @Test("import names takes song, song (2); --name; a missing file, a folder and a FIFO are refused up front")
    func importNaming() async throws {
        let cli = try CLIHarness()
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-imp-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir.appendingPathComponent("b"), withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        for path in ["song.wav", "b/song.wav"] {
            #expect(try await CLIHarness.tool("sox", ["-n", "-r", "48000", "-c", "2", "-b", "16", dir.appendingPathComponent(path).path, "synth", "0.2", "sine", "440"]).status == 0)
        }
        let r = try await cli.run("import", dir.appendingPathComponent("song.wav").path, dir.appendingPathComponent("b/song.wav").path)
        #expect(r.status == 0, "\(r.stderr)")
        let imported = try await cli.takes()
        #expect(Set(imported.compactMap { $0["name"] as? String }) == ["song", "song (2)"])
        #expect(try await cli.run("import", dir.appendingPathComponent("song.wav").path, "--name", "Chorus").status == 0)
        #expect(try await cli.takes().contains { $0["name"] as? String == "Chorus" })
        let missing = try await cli.run("import", dir.appendingPathComponent("absent.wav").path)
        #expect(missing.status == 66 && missing.stderr.contains("does not exist"), "\(missing.stderr)")
        let fifo = dir.appendingPathComponent("pipe.wav").path
        #expect(mkfifo(fifo, 0o600) == 0)
        let start = Date()
        let refused = try await cli.run("import", fifo)
        #expect(refused.status == 64 && refused.stderr.contains("FIFO") && Date().timeIntervalSince(start) < 10, "\(refused.stderr)")
        #expect(try await cli.run("import", dir.appendingPathComponent("b").path).status == 64)
        #expect(try await cli.run("import", dir.appendingPathComponent("song.wav").path, dir.appendingPathComponent("b/song.wav").path, "--name", "X").status == 64)
    }

    @Test("completion: the scripts parse, and take arguments complete to last, sessions, SESSION/TAKE and ids")
    func completion() async throws {
        let cli = try CLIHarness()
        #expect(try await cli.run("record", "1", "--session", "Band", "--name", "Intro").status == 0)
        let bash = try await cli.run("--generate-completion-script", "bash")
        let check = try await ChildProcess.runAsync(["bash", "-c", "bash -n <<'EOF'\n\(bash.stdout)\nEOF\necho parsed"])
        #expect(check.output.contains("parsed"), "\(check.output)")
        for shell in ["zsh", "fish"] { #expect(try await cli.run("--generate-completion-script", shell).status == 0) }
        let names = try await cli.run("---completion", "play", "--", "positional@0", "2", "0", "")
        #expect(names.status == 0)
        let lines = Set(names.stdout.split(separator: "\n").map(String.init))
        // play takes a take: never a bare session, which it would refuse.
        #expect(lines.isSuperset(of: ["last", "Band/Intro"]) && !lines.contains("Band"), "\(names.stdout)")
        let sessions = try await cli.run("---completion", "list", "--", "positional@0", "2", "0", "")
        #expect(sessions.stdout.split(separator: "\n").map(String.init) == ["Band"], "\(sessions.stdout)")
    }

    @Test("completion in a real bash: names with spaces, quotes and brackets complete escaped, after SESSION/ too, and play then plays them; formats and devices complete")
    func completionInBash() async throws {
        let cli = try CLIHarness()
        #expect(try await cli.run("record", "0.3s", "--session", "Session 1", "--name", "Take 1").status == 0)
        #expect(try await cli.run("record", "0.3s", "--session", "Band's", "--name", "Song (2)").status == 0)
        let folder = cli.library.appendingPathExtension("bash")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let script = try await cli.run("--generate-completion-script", "bash").stdout
        try script.write(to: folder.appendingPathComponent("tapedeck.bash"), atomically: true, encoding: .utf8)
        let exports = cli.environment.filter { $0.key.hasPrefix("TAPEDECK_") }.map { "export \($0.key)='\($0.value)'" }.joined(separator: "\n")
        try """
            export PATH='\(try CLIHarness.binary.deletingLastPathComponent().path)':"$PATH"
            \(exports)
            source '\(folder.appendingPathComponent("tapedeck.bash").path)'
            PS1='$ '
            """.write(to: folder.appendingPathComponent("rc"), atomically: true, encoding: .utf8)
        let socket = "tapedeck-\(UUID().uuidString.prefix(8))"
        func tmux(_ more: [String]) async throws -> String { try await ChildProcess.runAsync(["tmux", "-L", socket] + more).output }
        defer { CLIHarness.killTmuxServer(socket) }
        _ = try await tmux(["new-session", "-d", "-x", "120", "-y", "20", "-e", "TERM=xterm", "bash --noprofile --rcfile '\(folder.appendingPathComponent("rc").path)' -i"])
        // The prompt first: keys typed while bash still reads its rc file reach no completion.
        _ = try await CLIHarness.wait(timeout: 30) { ((try? await tmux(["capture-pane", "-p"])) ?? "").contains("$ ") }
        func complete(_ typed: String, to expected: String) async throws -> String {
            _ = try await tmux(["send-keys", "C-u", typed, "Tab"])
            var line = ""
            _ = try await CLIHarness.wait(timeout: 30) {
                line = ((try? await tmux(["capture-pane", "-p"])) ?? "").split(separator: "\n").last.map(String.init) ?? ""
                return line.hasSuffix(expected)
            }
            return line
        }
        let band = #"tapedeck play Band\'s/Song\ \(2\)"#
        let completed = try await complete("tapedeck play Band", to: band)
        #expect(completed.hasSuffix(band), "the line: \(completed)")
        _ = try await tmux(["send-keys", "Enter"])
        _ = try await CLIHarness.wait(timeout: 15) { ((try? await tmux(["capture-pane", "-p"])) ?? "").contains("Played Band's/Song (2)") }
        #expect(try await tmux(["capture-pane", "-p"]).contains("Played Band's/Song (2)"))
        for (typed, expected) in [(#"tapedeck play Session\ 1/"#, #"tapedeck play Session\ 1/Take\ 1"#),
                                  ("tapedeck export --format op", "tapedeck export --format opus"),
                                  ("tapedeck record -D nu", "tapedeck record -D null")] {
            let line = try await complete(typed, to: expected)
            #expect(line.hasSuffix(expected), "\(typed): the line is \(line)")
        }
        // The interactive bash would outlive the test: the server goes now, not in a detached
        // kill that a finished test process may never run.
        _ = try? await tmux(["kill-server"])
    }

    @Test("every JSON output carries kind and schema, and every key is documented in docs/JSON.md")
    func jsonDocumented() async throws {
        let cli = try CLIHarness()
        let first = try await cli.run("record", "1s", "--json")
        #expect(first.status == 0)
        let firstTake = (try JSONSerialization.jsonObject(with: Data(first.stdout.utf8)) as? [String: Any])?["take"] as? [String: Any]
        let began = try #require(firstTake?["firstFrameAt"] as? String)
        #expect(try await cli.run("tag", "last", "MIC=x").status == 0)
        let doc = try String(contentsOf: CLIHarness.packageRoot.appendingPathComponent("docs/JSON.md"), encoding: .utf8)
        var sections: [String: Set<String>] = [:]
        var current: String?
        for line in doc.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("## `") { current = line.split(separator: "`").dropFirst().first.map(String.init); continue }
            if line.hasPrefix("## ") { current = nil; continue }
            if let current, line.hasPrefix("| `") {
                sections[current, default: []].insert(String(line.split(separator: "`")[1]))
            }
        }
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-json-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: out, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: out) }
        let free: Set<String> = ["tags", "details", "roles", "settings", "ixml"]
        func keys(_ value: Any, into set: inout Set<String>, parent: String = "") {
            if let d = value as? [String: Any] {
                for (k, v) in d {
                    set.insert(k)
                    if !free.contains(k) || v is [Any] { keys(v, into: &set, parent: k) }
                }
            } else if let a = value as? [Any] {
                for v in a { keys(v, into: &set, parent: parent) }
            }
        }
        for args in [["list", "--json"], ["show", "last", "--json"], ["record", "0.2", "--json"], ["import", "--json", "--session", "Imports"],
                     ["export", "last", "-o", out.path, "--json"], ["devices", "--backend", "null", "--json"], ["backends", "--json"],
                     ["config", "check", "--offline", "--json"], ["config", "show", "--json"], ["doctor", "--json"], ["tag", "last", "--json"],
                     ["record", "0.2", "-o", out.appendingPathComponent("o.wav").path, "--json"],
                     ["record", "2.2", "--split", "1s", "--set", "capture.null.paced=false", "--json"], ["show", "last", "--json"], ["list", "--json"],
                     ["timeline", "--json"], ["export", "--session", "Session 1", "--from", began, "--duration", "0.5s", "-o", out.appendingPathComponent("clip.wav").path, "--json"]] {
            var run = args
            if args[0] == "import" {
                let wav = out.appendingPathComponent("in.wav").path
                #expect(try await CLIHarness.tool("sox", ["-n", "-r", "48000", "-c", "2", "-b", "16", wav, "trim", "0", "0.2"]).status == 0)
                run.append(wav)
            }
            let r = try await cli.run(run)
            #expect(r.status == 0, "\(args): \(r.stderr)")
            let value = try JSONSerialization.jsonObject(with: Data(r.stdout.utf8))
            let objects = (value as? [Any]) ?? [value]
            for case let object as [String: Any] in objects {
                let kind = try #require(object["kind"] as? String, "\(args) prints an object without kind")
                #expect(object["schema"] as? Int == (["export", "config-check"].contains(kind) ? 2 : 1), "\(args)")
                var found = Set<String>()
                keys(object, into: &found)
                let missing = found.subtracting(sections[kind] ?? [])
                #expect(missing.isEmpty, "\(args): kind \(kind) fields not in docs/JSON.md: \(missing.sorted())")
            }
        }
    }
}

extension PickUpEndToEndTests {
    /// The position shown on the play line, in seconds ("▶ 0:04.850 / 1:00.000").
    static func shownPosition(_ screen: String) -> Double? {
        guard let line = screen.split(separator: "\n").last(where: { $0.contains(" / 1:00.000") }),
              let clock = line.split(separator: " ").dropFirst().first else { return nil }
        let parts = clock.split(separator: ":")
        guard parts.count == 2, let m = Double(parts[0]), let s = Double(parts[1]) else { return nil }
        return m * 60 + s
    }

    @Test("play on a terminal: space pauses (the position stands still) and resumes, → seeks 5 s on, q stops")
    func playKeys() async throws {
        let cli = try CLIHarness()
        #expect(try await cli.run("record", "-d", "60s", "-q", "--set", "capture.null.paced=false").status == 0)
        let screen = try await Screen(cli, ["play", "last"])
        try await screen.wait(for: "space pause")
        try await Task.sleep(for: .milliseconds(500))
        try await screen.tmux(["send-keys", " "])
        let paused = try await screen.wait(for: "paused")
        let at = try #require(Self.shownPosition(paused), "\(paused)")
        try await Task.sleep(for: .seconds(1))
        let still = await screen.text
        #expect(still.contains("paused") && Self.shownPosition(still) == at, "\(still)")
        try await screen.tmux(["send-keys", " "])
        try await screen.wait(for: "space pause")
        try await screen.tmux(["send-keys", "Right"])
        var later = ""
        let moved = try await CLIHarness.wait(timeout: 5) {
            later = await screen.text
            return (Self.shownPosition(later) ?? 0) >= at + 5
        }
        #expect(moved, "→ did not seek 5 s on from \(at): \(later)")
        // Presses that come faster than playback restarts all count: three → are 15 s.
        let before = Self.shownPosition(await screen.text) ?? 0
        try await screen.tmux(["send-keys", "Right", "Right", "Right"])
        var further = ""
        let all = try await CLIHarness.wait(timeout: 5) {
            further = await screen.text
            return (Self.shownPosition(further) ?? 0) >= before + 15
        }
        #expect(all, "three → from \(before): \(further)")
        try await screen.tmux(["send-keys", "q"])
        let end = try await screen.wait(for: "Played")
        #expect(end.contains("on null (discarded), stopped at 0:") && end.contains(" of 1:00.000."), "\(end)")
    }
}

extension PickUpEndToEndTests {
    @Test("the meter is in colour on a terminal (REC red, the bars green, yellow and red by level); NO_COLOR turns it off")
    func meterColour() async throws {
        let cli = try CLIHarness()
        let loud = ["--set", "capture.null.signal=noise", "--set", "capture.null.level=1.0"]
        let screen = try await Screen(cli, ["record", "-d", "4"] + loud)
        try await screen.wait(for: "● REC")
        try await Task.sleep(for: .milliseconds(700))
        let escaped = (try? await screen.tmux(["capture-pane", "-p", "-e"])) ?? ""
        #expect(escaped.contains("\u{1B}[1m\u{1B}[31m● REC"), "\(escaped.debugDescription)")
        #expect(escaped.contains("\u{1B}[32m#") && escaped.contains("\u{1B}[33m#") && escaped.contains("\u{1B}[31m#"), "\(escaped.debugDescription)")
        let plain = try await Screen(cli, ["record", "-d", "4"] + loud, environment: ["NO_COLOR": "1"])
        try await plain.wait(for: "● REC")
        try await Task.sleep(for: .milliseconds(700))
        let uncoloured = (try? await plain.tmux(["capture-pane", "-p", "-e"])) ?? ""
        #expect(uncoloured.contains("● REC") && !uncoloured.contains("\u{1B}[3"), "\(uncoloured.debugDescription)")
    }
}
