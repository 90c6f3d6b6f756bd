import Foundation
import Testing

/// The options arecord and sox users reach for first: `-d`, `-r`, `-c`, `-f`, `-D`.
@Suite("recorder flags end to end")
struct FlagsEndToEndTests {
    @Test("-r, -c and -f set the take's format (arecord's names too), -d its length to the frame")
    func formatFlags() throws {
        let cli = try CLIHarness()
        let r = try cli.run("record", "-d", "0:00.3", "-r", "44100", "-c", "1", "-f", "S24_3LE", "--json")
        #expect(r.status == 0, "\(r.stderr)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        let take = try #require(report["take"] as? [String: Any])
        #expect(take["frames"] as? Int == 13_230)
        let format = try #require(take["format"] as? [String: Any])
        #expect(format["sampleRate"] as? Int == 44_100 && format["channels"] as? Int == 1 && format["sampleFormat"] as? String == "s24")
        let path = try #require(take["path"] as? String ?? (take["file"] as? String), "\(take)")
        let read = try ["-r", "-c", "-b"].map { try CLIHarness.tool("soxi", [$0, path]).stdout.trimmingCharacters(in: .whitespacesAndNewlines) }
        #expect(read == ["44100", "1", "24"], "\(read)")

        let float = try cli.run("record", "-d", "250ms", "--format", "FLOAT_LE", "--json")
        #expect(float.status == 0 && float.stdout.contains("\"f32\""), "\(float.stderr)")
        // Flags beat --set for the same key.
        let both = try cli.run("record", "-d", "0.1", "--set", "format.channels=2", "-c", "1", "--json")
        #expect(both.status == 0 && both.stdout.contains("\"channels\" : 1"), "\(both.stdout)")
    }

    @Test("bad values name the option the user typed", arguments: [
        (["-r", "7"], "-r/--rate 7: 7 is out of range"), (["-c", "0"], "-c/--channels 0:"),
        (["-d", "5x"], "-d/--duration 5x: not a duration"), (["-d", "00:61"], "-d/--duration 00:61"),
    ])
    func badValues(_ args: [String], _ said: String) throws {
        let r = try CLIHarness().run(["record"] + args)
        #expect(r.status == 64 && r.stderr.contains(said), "\(r.status) \(r.stderr)")
    }

    @Test("-f with an unknown format is refused by the parser, listing the formats")
    func unknownFormat() throws {
        let r = try CLIHarness().run("record", "-f", "s8")
        #expect(r.status == 64 && r.stderr.contains("s16") && r.stderr.contains("f32"), "\(r.stderr)")
    }

    @Test("-D on a backend without devices says which backends have them, and makes nothing")
    func deviceOnNull() throws {
        let cli = try CLIHarness()
        let r = try cli.run("record", "-d", "1", "-D", "hw:0")
        #expect(r.status == 78 && r.stderr.contains("-D/--device hw:0: the null capture backend has no device setting"), "\(r.stderr)")
        #expect(r.stderr.contains("alsa") || r.stderr.contains("pulse"))
        #expect(try cli.takes().isEmpty)
        _ = try cli.run("record", "-d", "0.1")
        let play = try cli.run("play", "Session 1/Take 1", "-D", "hw:0")
        #expect(play.status == 78 && play.stderr.contains("-D/--device hw:0: the null playback backend has no device setting"), "\(play.stderr)")
    }
}
