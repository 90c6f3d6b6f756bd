import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The options arecord and sox users reach for first: `-d`, `-r`, `-c`, `-f`, `-D`.
@Suite("recorder flags end to end", .endToEnd)
struct FlagsEndToEndTests {
    @Test("-r, -c and -f set the take's format (arecord's names too), -d its length to the frame")
    func formatFlags() async throws {
        let cli = try CLIHarness()
        let r = try await cli.run("record", "-d", "0:00.3", "-r", "44100", "-c", "1", "-f", "S24_3LE", "--json")
        #expect(r.status == 0, "\(r.stderr)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        let take = try #require(report["take"] as? [String: Any])
        #expect(take["frames"] as? Int == 13_230)
        let format = try #require(take["format"] as? [String: Any])
        #expect(format["sampleRate"] as? Int == 44_100 && format["channels"] as? Int == 1 && format["sampleFormat"] as? String == "s24")
        let path = try #require(take["path"] as? String ?? (take["file"] as? String), "\(take)")
        var read: [String] = []
        for option in ["-r", "-c", "-b"] {
            read.append(try await CLIHarness.tool("soxi", [option, path]).stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        #expect(read == ["44100", "1", "24"], "\(read)")

        let float = try await cli.run("record", "-d", "250ms", "--format", "FLOAT_LE", "--json")
        #expect(float.status == 0 && float.stdout.contains("\"f32\""), "\(float.stderr)")
        // Flags beat --set for the same key.
        let both = try await cli.run("record", "-d", "0.1", "--set", "format.channels=2", "-c", "1", "--json")
        #expect(both.status == 0 && both.stdout.contains("\"channels\" : 1"), "\(both.stdout)")
    }

    @Test("a format the encoder cannot store is refused with the flags that fix it, and nothing is made")
    func unstorableFormat() async throws {
        let cli = try CLIHarness()
        let r = try await cli.run("record", "-d", "0.2", "-f", "f32", "--set", "encoder.name=flac")
        #expect(r.status == 65, "\(r.stderr)")
        #expect(r.stderr.contains("32-bit float") && r.stderr.contains("-f FORMAT") && r.stderr.contains("--set encoder.name=NAME (wav, flac, opus, mp3, vorbis, aiff)"), "\(r.stderr)")
        #expect(try await cli.takes().isEmpty)
    }

    @Test("export --format takes any case; a file libsndfile refuses is named in one clean sentence")
    func exportFormatCaseAndImportMessage() async throws {
        let cli = try CLIHarness()
        _ = try await cli.run("record", "-d", "0.2")
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-case-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: out, withIntermediateDirectories: true)
        let r = try await cli.run("export", "Session 1/Take 1", "--format", "FLAC", "--output", out.path)
        #expect(r.status == 0 && FileManager.default.fileExists(atPath: out.appendingPathComponent("Session 1 - Take 1.flac").path), "\(r.stderr)")
        let bad = out.appendingPathComponent("broken.wav")
        try Data("RIFF\u{7f}\u{7f}\u{7f}\u{7f}WAVEjunk".utf8).write(to: bad)
        let i = try await cli.run("import", bad.path)
        #expect(i.status == 74 && i.stderr.contains("cannot be read as audio") && !i.stderr.contains(".."), "\(i.stderr)")
        // Not audio at all: said once, with what to do, and no advice about encoders.
        let text = out.appendingPathComponent("notes.txt")
        try Data("shopping list\n".utf8).write(to: text)
        let t = try await cli.run("import", text.path)
        #expect(t.status == 65 && t.stderr.contains("notes.txt is not audio Tapedeck reads") && t.stderr.contains("convert it first with ffmpeg or sox"), "\(t.stderr)")
        #expect(!t.stderr.contains("encoder.name") && t.stderr.split(separator: "\n").count == 1, "\(t.stderr)")
    }

    @Test("bad values name the option the user typed", arguments: [
        (["-r", "7"], "-r/--rate 7: 7 is out of range"), (["-c", "0"], "-c/--channels 0:"),
        (["-d", "5x"], "-d/--duration 5x: not a duration"), (["-d", "00:61"], "-d/--duration 00:61"),
    ])
    func badValues(_ args: [String], _ said: String) async throws {
        let r = try await CLIHarness().run(["record"] + args)
        #expect(r.status == 64 && r.stderr.contains(said), "\(r.status) \(r.stderr)")
    }

    @Test("-f with an unknown format is refused by the parser, listing the formats")
    func unknownFormat() async throws {
        let r = try await CLIHarness().run("record", "-f", "s8")
        #expect(r.status == 64 && r.stderr.contains("s16") && r.stderr.contains("f32"), "\(r.stderr)")
    }

    @Test("usage errors are one line in Tapedeck's style, naming the help to read", arguments: [
        (["record", "--bogus"], "tapedeck: Unknown option '--bogus'. Run `tapedeck record --help` for the options."),
        (["config", "chek"], "tapedeck: Unknown command 'config chek'. Did you mean 'check'? Run `tapedeck config --help` for the options."),
        (["play"], "tapedeck: Missing expected argument '<take>'. Run `tapedeck play --help` for the options."),
    ])
    func usageErrors(_ args: [String], _ line: String) async throws {
        let r = try await CLIHarness().run(args)
        #expect(r.status == 64 && r.stderr == line + "\n", "\(r.stderr)")
        #expect(r.stdout.isEmpty)
    }

    @Test("an id of fewer than 4 characters is answered as such, not as a missing take")
    func shortID() async throws {
        let cli = try CLIHarness()
        _ = try await cli.run("record", "-d", "0.1")
        let r = try await cli.run("show", "abc")
        #expect(r.status == 64 && r.stderr.contains("ids need at least 4 characters"), "\(r.stderr)")
        let version = try await cli.run("--version")
        let help = try await cli.run("--help")
        #expect(version.status == 0 && help.stdout.contains("USAGE"))
    }

    @Test("-D on a backend without devices says which backends have them, and makes nothing")
    func deviceOnNull() async throws {
        let cli = try CLIHarness()
        let r = try await cli.run("record", "-d", "1", "-D", "hw:0")
        #expect(r.status == 78 && r.stderr.contains("-D/--device hw:0: the null capture backend has no device setting"), "\(r.stderr)")
        #expect(r.stderr.contains("alsa") || r.stderr.contains("pulse"))
        #expect(try await cli.takes().isEmpty)
        _ = try await cli.run("record", "-d", "0.1")
        let play = try await cli.run("play", "Session 1/Take 1", "-D", "hw:0")
        #expect(play.status == 78 && play.stderr.contains("-D/--device hw:0: the null playback backend has no device setting"), "\(play.stderr)")
    }
}

/// Where Tapedeck keeps things when nothing says where: the XDG folders, from the environment.
@Suite("user folders end to end", .endToEnd)
struct UserFoldersEndToEndTests {
    /// A harness whose library is the default one under a fresh `$HOME`.
    static func homeHarness(_ extra: [String: String] = [:]) throws -> (CLIHarness, URL) {
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-home-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        var cli = try CLIHarness()
        cli.usesDefaultLibrary = true
        cli.extraEnvironment = ["HOME": home.path, "XDG_DATA_HOME": ""].merging(extra) { $1 }
        return (cli, home)
    }

    static func mode(_ path: String) -> mode_t {
        var st = stat()
        return stat(path, &st) == 0 ? st.st_mode & 0o777 : 0
    }

    @Test("the default library is $HOME/.local/share/tapedeck, created 0700, and config show names it")
    func defaultLibrary() async throws {
        let (cli, home) = try Self.homeHarness()
        #expect(try await cli.run("record", "-d", "0.1").status == 0)
        let library = home.appendingPathComponent(".local/share/tapedeck")
        #expect(FileManager.default.fileExists(atPath: library.appendingPathComponent("catalog.sqlite").path))
        for folder in [".local", ".local/share", ".local/share/tapedeck"] {
            #expect(Self.mode(home.appendingPathComponent(folder).path) == 0o700, "\(folder)")
        }
        let show = try await cli.run("config", "show")
        #expect(show.stdout.contains("library: \(library.path)"), "\(show.stdout)")
    }

    @Test("a relative or empty XDG_DATA_HOME is ignored, as the XDG specification says")
    func relativeXDGIgnored() async throws {
        for value in ["relative/data", ""] {
            let (cli, home) = try Self.homeHarness(["XDG_DATA_HOME": value])
            let show = try await cli.run("config", "show", "--json")
            let report = try #require(try JSONSerialization.jsonObject(with: Data(show.stdout.utf8)) as? [String: Any])
            #expect(report["library"] as? String == home.appendingPathComponent(".local/share/tapedeck").path, "\(value): \(show.stdout)")
        }
    }

    @Test("~ in a path setting is $HOME, not the password database's home")
    func tildeIsHome() async throws {
        let (cli, home) = try Self.homeHarness()
        let r = try await cli.run("record", "-d", "0.1", "--set", "storage.directory.path=~/music/lib")
        #expect(r.status == 0, "\(r.stderr)")
        #expect(FileManager.default.fileExists(atPath: home.appendingPathComponent("music/lib/catalog.sqlite").path))
    }
}

extension FlagsEndToEndTests {
    @Test("devices: endpoints only (ALSA's converter and effect plugins with --all), and one line for each sound server that is not running")
    func devicesQuiet() async throws {
        var cli = try CLIHarness()
        cli.extraEnvironment = ["PULSE_SERVER": "unix:/nonexistent/native", "JACK_DEFAULT_SERVER": "nobody-\(UUID().uuidString.prefix(6))",
                                "PIPEWIRE_REMOTE": "nobody-\(UUID().uuidString.prefix(6))"]
        let text = try await cli.run("devices")
        #expect(text.status == 0, "\(text.stderr)")
        for server in ["pulse", "jack", "pipewire"] {
            let lines = (text.stdout + text.stderr).split(separator: "\n").filter { $0.hasPrefix("\(server):") }
            #expect(lines.count == 1 && lines.first?.contains("not running") == true, "\(server): \(text.stdout) \(text.stderr)")
        }
        #expect(text.stderr.isEmpty, "\(text.stderr)")
        func listed(_ args: [String]) async throws -> [[String: Any]] {
            let r = try await cli.run(["devices", "--backend", "alsa", "--json"] + args)
            return try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [[String: Any]], "\(r.stderr)")
        }
        let endpoints = try await listed([])
        let everything = try await listed(["--all"])
        #expect(endpoints.allSatisfy { $0["isProcessingStage"] as? Bool == false })
        let names = Set(endpoints.compactMap { $0["name"] as? String })
        let stages = Set(everything.filter { $0["isProcessingStage"] as? Bool == true }.compactMap { $0["name"] as? String })
        #expect(Set(everything.compactMap { $0["name"] as? String }) == names.union(stages))
        #expect(names.isDisjoint(with: ["lavrate", "samplerate", "speexrate", "upmix", "vdownmix", "oss"]), "\(names)")
        if !stages.isEmpty { #expect(text.stdout.contains("`tapedeck devices --all` lists them"), "\(text.stdout)") }
        // Every key of every device is camelCase, details included.
        let all = try await cli.run("devices", "--json", "--all")
        #expect(all.stdout.range(of: #""[a-z]+-[a-zA-Z-]*" :"#, options: .regularExpression) == nil, "\(all.stdout)")
    }
}

extension FlagsEndToEndTests {
    @Test("help: the command's own options first, the global ones (and -q, -v) last, with examples; -q says nothing on stderr, a run off a terminal says one banner line, -v says more")
    func quietVerboseAndHelp() async throws {
        let cli = try CLIHarness()
        for command in ["record", "export", "list", "play", "serve", "push"] {
            let help = try await cli.run(command, "--help")
            #expect(help.stdout.contains("Examples:\n    tapedeck \(command)"), "\(command): \(help.stdout)")
            let options = try #require(help.stdout.range(of: "OPTIONS:"), "\(command)")
            let after = help.stdout[options.upperBound...]
            let own = after.range(of: "\n  -") ?? after.range(of: "\n  --")
            let global = try #require(after.range(of: "--config <config>"), "\(command)")
            #expect(own.map { $0.lowerBound < global.lowerBound } == true, "\(command): global options come first: \(after)")
            #expect(after.contains("-q, --quiet") && after.contains("-v, --verbose"))
        }
        let quiet = try await cli.run("record", "-q", "-d", "0.5")
        #expect(quiet.status == 0 && quiet.stderr.isEmpty && quiet.stdout.contains("Recorded "), "\(quiet.stderr)")
        let plain = try await cli.run("record", "-d", "0.5", "--session", "Journal")
        let lines = plain.stderr.split(separator: "\n")
        #expect(lines.count == 1 && lines.first?.hasPrefix("tapedeck: Recording from ") == true, "\(plain.stderr)")
        #expect(plain.stderr.contains("48000 Hz, 2 channels, s16, into Journal/Take 1 in "), "\(plain.stderr)")
        let verbose = try await cli.run("record", "-v", "-d", "0.5")
        #expect(verbose.status == 0 && verbose.stderr.split(separator: "\n").count > 1, "\(verbose.stderr)")
        let both = try await cli.run("record", "-q", "-v", "-d", "0.5")
        #expect(both.status == 64 && both.stderr.contains("-q/--quiet or -v/--verbose, not both"), "\(both.stderr)")
    }
}
