import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `tapedeck export` and recording straight to FLAC, checked with flac, metaflac and sox.
@Suite("export and FLAC end to end", .endToEnd, .serialized)
struct ExportEndToEndTests {
    func outputFolder() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-out-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    /// Raw little-endian PCM of any audio file, as sox decodes it.
    func pcm(_ path: String, bits: Int) async throws -> Data {
        let raw = FileManager.default.temporaryDirectory.appendingPathComponent("pcm-\(UUID().uuidString).raw").path
        let r = try await CLIHarness.tool("sox", [path, "-t", "raw", "-e", "signed", "-b", String(bits), "-L", raw])
        #expect(r.status == 0, "sox could not decode \(path): \(r.stderr)")
        defer { unlink(raw) }
        return try Data(contentsOf: URL(fileURLWithPath: raw))
    }

    @Test("--progress-fd: JSON lines that end at every frame; a reader that closes it stops the export as Ctrl-C does (130, nothing left); a descriptor not open for writing is refused (64)")
    func progressDescriptor() async throws {
        let cli = try CLIHarness()
        #expect(try await cli.run("record", "--duration", "120s", "--session", "P", "--name", "Long", "--set", "capture.null.paced=false").status == 0)
        let out = try outputFolder()
        defer { try? FileManager.default.removeItem(at: out) }
        let binary = try CLIHarness.binary.path
        let options = "--config '\(cli.config)' --set 'storage.directory.path=\(cli.library.path)' -o '\(out.path)/'"
        let log = out.appendingPathComponent("progress.log").path
        let whole = try await CLIHarness.tool("sh", ["-c", "exec \"$0\" export P/Long \(options) --progress-fd 3 3>'\(log)'", binary])
        #expect(whole.status == 0, "\(whole.stderr)")
        let lines = try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n")
        let last = try #require(lines.last.flatMap { try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] })
        #expect(last["kind"] as? String == "progress" && last["take"] as? String == "P/Long")
        #expect(last["framesDone"] as? Int == 120 * 48_000 && last["totalFrames"] as? Int == 120 * 48_000, "\(last)")

        // The reader reads one byte and goes: the next report fails, and the export stops.
        let again = out.appendingPathComponent("again")
        try FileManager.default.createDirectory(at: again, withIntermediateDirectories: true)
        let rc = out.appendingPathComponent("rc").path, err = out.appendingPathComponent("err").path
        let cut = try await CLIHarness.tool("sh", ["-c", "{ \"$0\" export P/Long --config '\(cli.config)' --set 'storage.directory.path=\(cli.library.path)' -o '\(again.path)/' --progress-fd 3; echo $? > '\(rc)'; } 3>&1 >/dev/null 2>'\(err)' | head -c 1 >/dev/null", binary])
        #expect(cut.status == 0)
        let said = (try? String(contentsOfFile: err, encoding: .utf8)) ?? ""
        #expect(try String(contentsOfFile: rc, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines) == "130", "\(said)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: again.path).isEmpty)

        let refused = try await cli.run("export", "P/Long", "-o", again.path + "/", "--progress-fd", "9")
        #expect(refused.status == 64 && refused.stderr.contains("--progress-fd 9"), "\(refused.stderr)")
    }

    @Test("a take exported as FLAC passes flac -t, carries its tags, total samples and MD5, and decodes to the same samples")
    func exportFLAC() async throws {
        let cli = try CLIHarness()
        #expect(try await cli.run("record", "--duration", "2s", "--session", "Gig / 2026", "--name", "Opener", "--set", "format.sample-format=s24").status == 0)
        let out = try outputFolder()
        let r = try await cli.run("export", "Gig / 2026/Opener", "--output", out.path, "--json")
        #expect(r.status == 0, "\(r.stderr)")
        let reports = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [[String: Any]])
        let report = try #require(reports.first)
        let path = try #require(report["output"] as? String)
        #expect(path == out.appendingPathComponent("Gig _ 2026 - Opener.flac").path)
        #expect((report["verification"] as? String)?.contains("compared with the input") == true)
        #expect(report["frames"] as? Int == 96_000)

        #expect(try await CLIHarness.tool("flac", ["-t", "-s", path]).status == 0)
        let tags = try await CLIHarness.tool("metaflac", ["--export-tags-to=-", path]).stdout.split(separator: "\n").map(String.init)
        // The take's tags, and its facts: time of day and loudness (the catalog measured it).
        #expect(Set(tags.map { String($0.prefix { $0 != "=" }) }) == ["TITLE", "ALBUM", "TRACKNUMBER", "DATE", "ENCODER", "TIME_REFERENCE",
                                                                      "REPLAYGAIN_TRACK_GAIN", "REPLAYGAIN_REFERENCE_LOUDNESS", "R128_TRACK_GAIN",
                                                                      "REPLAYGAIN_TRACK_PEAK", "LOUDNESS_RANGE"], "\(tags)")
        #expect(tags.contains("TITLE=Opener") && tags.contains("ALBUM=Gig / 2026") && tags.contains("TRACKNUMBER=1"))
        #expect(tags.contains { $0.hasPrefix("DATE=20") && $0.hasSuffix("Z") })
        #expect(tags.contains { $0.hasPrefix("ENCODER=Tapedeck ") && $0.contains("libFLAC") })
        let total = try await CLIHarness.tool("metaflac", ["--show-total-samples", path]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(total == "96000")
        #expect(try await CLIHarness.tool("metaflac", ["--list", "--block-type=PADDING", path]).stdout.contains("PADDING"))

        let source = try #require(try await cli.takes().first?["path"] as? String)
        let sourcePCM = try await pcm(source, bits: 24)
        let flacPCM = try await pcm(path, bits: 24)
        #expect(sourcePCM.count == 96_000 * 6 && sourcePCM == flacPCM, "sox decodes the FLAC to the take's samples")
        let md5 = try await CLIHarness.tool("metaflac", ["--show-md5sum", path]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let raw = FileManager.default.temporaryDirectory.appendingPathComponent("md5-\(UUID().uuidString)")
        try sourcePCM.write(to: raw)
        #expect(try await CLIHarness.tool("md5sum", [raw.path]).stdout.hasPrefix(md5), "STREAMINFO's MD5 is the MD5 of the audio")
    }

    @Test("export never overwrites without --force; bad folders and missing audio are clear failures that leave nothing behind")
    func exportRefusals() async throws {
        let cli = try CLIHarness()
        #expect(try await cli.run("record", "--duration", "0.5s").status == 0)
        let out = try outputFolder()
        let target = out.appendingPathComponent("Session 1 - Take 1.flac")
        try Data("precious".utf8).write(to: target)
        let refused = try await cli.run("export", "Session 1/Take 1", "--output", out.path)
        #expect(refused.status == 73 && refused.stderr.contains("--force"))
        #expect(try Data(contentsOf: target) == Data("precious".utf8))
        #expect(try FileManager.default.contentsOfDirectory(atPath: out.path) == ["Session 1 - Take 1.flac"], "no temporary file left")
        #expect(try await cli.run("export", "Session 1/Take 1", "--output", out.path, "--force").status == 0)
        #expect(try await CLIHarness.tool("flac", ["-t", "-s", target.path]).status == 0)

        let missing = try await cli.run("export", "Session 1/Take 1", "--output", out.appendingPathComponent("absent").path)
        #expect(missing.status == 66 && missing.stderr.contains("does not exist"))

        // A folder no one may create files in: mode 555 for a normal user; /sys even for root.
        let locked: String
        if geteuid() == 0 {
            locked = "/sys"
        } else {
            let dir = try outputFolder()
            chmod(dir.path, 0o555)
            locked = dir.path
        }
        let unwritable = try await cli.run("export", "Session 1/Take 1", "--output", locked)
        #expect(unwritable.status == 74, "\(unwritable.stderr)")
        #expect(unwritable.stderr.contains(locked))

        let audio = try #require(try await cli.takes().first?["path"] as? String)
        try FileManager.default.removeItem(atPath: audio)
        let gone = try await cli.run("export", "Session 1/Take 1", "--output", try outputFolder().path)
        #expect(gone.status == 66 && gone.stderr.contains("missing"))
    }

    @Test("a session exports in parallel; float takes export as 24-bit FLAC with no flag, or as asked")
    func sessionAndFloat() async throws {
        let cli = try CLIHarness()
        for i in 1...3 { #expect(try await cli.run("record", "--duration", "1s", "--session", "Band", "--name", "Song \(i)").status == 0) }
        let out = try outputFolder()
        let r = try await cli.run("export", "--session", "Band", "--output", out.path, "--json")
        #expect(r.status == 0, "\(r.stderr)")
        let names = try FileManager.default.contentsOfDirectory(atPath: out.path).sorted()
        #expect(names == ["Band - Song 1.flac", "Band - Song 2.flac", "Band - Song 3.flac"])
        for n in names { #expect(try await CLIHarness.tool("flac", ["-t", "-s", out.appendingPathComponent(n).path]).status == 0) }

        #expect(try await cli.run("record", "--duration", "0.5s", "--session", "Float", "--set", "format.sample-format=f32").status == 0)
        // A float take exports as FLAC with no extra flag: converted to s24.
        let converted = try await cli.run("export", "--session", "Float", "--output", out.path)
        #expect(converted.status == 0, "\(converted.stderr)")
        let flac = out.appendingPathComponent("Float - Take 1.flac").path
        #expect(try await CLIHarness.tool("flac", ["-t", "-s", flac]).status == 0)
        #expect(try await CLIHarness.tool("soxi", ["-b", flac]).stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "24")
        // Another integer format on request; WAV keeps the float as it is.
        let s16 = try await cli.run("export", "--session", "Float", "-o", out.appendingPathComponent("f16.flac").path, "--sample-format", "s16")
        #expect(s16.status == 0, "\(s16.stderr)")
        #expect(try await CLIHarness.tool("soxi", ["-b", out.appendingPathComponent("f16.flac").path]).stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "16")
        #expect(try await cli.run("export", "--session", "Float", "-o", out.appendingPathComponent("f.wav").path).status == 0)
        #expect(try await CLIHarness.tool("soxi", ["-e", out.appendingPathComponent("f.wav").path]).stdout.contains("Floating Point"))
    }

    @Test("recording straight to FLAC: the take plays, exports, and passes flac -t")
    func recordFLAC() async throws {
        let cli = try CLIHarness()
        let r = try await cli.run("record", "--duration", "1.5s", "--set", "encoder.name=flac", "--json")
        #expect(r.status == 0, "\(r.stderr)")
        let take = try #require(try await cli.takes().first)
        #expect(take["encoding"] as? String == "flac" && take["frames"] as? Int == 72_000)
        let path = try #require(take["path"] as? String)
        #expect(path.hasSuffix(".flac"))
        #expect(try await CLIHarness.tool("flac", ["-t", "-s", path]).status == 0)
        #expect(try await cli.run("play", "--set", "playback.null.paced=false", "Session 1/Take 1").status == 0)
        let out = try outputFolder()
        #expect(try await cli.run("export", "Session 1/Take 1", "--format", "wav", "--output", out.path).status == 0)
        let wav = out.appendingPathComponent("Session 1 - Take 1.wav").path
        let exported = try await pcm(wav, bits: 16), recorded = try await pcm(path, bits: 16)
        #expect(exported == recorded)
    }

    @Test("SIGKILL while recording to FLAC: recovered, flac -t passes, and the audio is the signal's prefix")
    func sigkillFLAC() async throws {
        let cli = try CLIHarness()
        let (p, _, _) = try cli.start(["record", "--set", "encoder.name=flac", "--set", "capture.null.signal=counter"])
        // The counter ramp compresses to almost nothing, so wait for the file, then for time.
        #expect(try await CLIHarness.wait(timeout: 10) { cli.pendingBytes() > 0 })
        try await Task.sleep(for: .seconds(2.2))
        kill(p.processIdentifier, SIGKILL)
        try await CLIHarness.waitForExit(p)

        let take = try #require(try await cli.takes().first)
        #expect(take["state"] as? String == "recovered")
        let path = try #require(take["path"] as? String)
        let frames = try #require(take["frames"] as? Int)
        #expect(frames >= 48_000, "recovered \(frames) frames")
        #expect(try await CLIHarness.tool("flac", ["-t", "-s", path]).status == 0)
        let total = try await CLIHarness.tool("metaflac", ["--show-total-samples", path]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(total == String(frames))
        // The counter: sample k = frame * 2 + channel, as a 16-bit integer.
        let samples = try await pcm(path, bits: 16)
        #expect(samples.count == frames * 4)
        let firstWrong = samples.withUnsafeBytes { raw -> Int? in
            for k in 0..<(samples.count / 2) where raw.loadUnaligned(fromByteOffset: k * 2, as: Int16.self) != Int16(truncatingIfNeeded: k) {
                return k
            }
            return nil
        }
        #expect(firstWrong == nil)
    }
}
