import Foundation
import TapedeckTesting
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Broadcast Wave and file facts, read back by independent readers: python's own RIFF walk and
/// XML parser, ffprobe (ffmpeg's BWF reader), metaflac and `flac -t`; the loudness against
/// ffmpeg's EBU R128 filter.
@Suite("broadcast wave, time of day and loudness end to end", .endToEnd, .serialized)
struct BroadcastWaveEndToEndTests {
    /// What python makes of a WAV file's bext and iXML: every chunk before `data`, the bext
    /// fields, the iXML values (parsed by xml.etree), and the local time of `began`.
    static func broadcast(_ path: String, began: Double? = nil) async throws -> [String: Any] {
        let script = """
            import struct, sys, json, time, xml.etree.ElementTree as ET
            b = open(sys.argv[1], 'rb').read()
            assert b[:4] in (b'RIFF', b'RF64') and b[8:12] == b'WAVE'
            i, order, out = 12, [], {}
            while i + 8 <= len(b):
                cid, size = b[i:i+4], struct.unpack('<I', b[i+4:i+8])[0]
                body = b[i+8:i+8+size]
                order.append(cid.decode('latin-1'))
                if cid == b'bext':
                    z = lambda s: s.split(b'\\0')[0].decode('ascii')
                    out['bext'] = dict(description=z(body[0:256]), originator=z(body[256:288]), reference=z(body[288:320]),
                        date=z(body[320:330]), time=z(body[330:338]), timeReference=struct.unpack('<Q', body[338:346])[0],
                        version=struct.unpack('<H', body[346:348])[0], loudness=list(struct.unpack('<5h', body[412:422])),
                        history=z(body[602:]), size=size)
                if cid == b'iXML':
                    root = ET.fromstring(body.decode('utf-8').strip())
                    assert root.tag == 'BWFXML'
                    x = {e.tag: (e.text or '') for e in root if len(e) == 0}
                    s = root.find('SPEED')
                    x['timestamp'] = int(s.find('TIMESTAMP_SAMPLES_SINCE_MIDNIGHT_HI').text) * 2**32 + int(s.find('TIMESTAMP_SAMPLES_SINCE_MIDNIGHT_LO').text)
                    x['rate'] = int(s.find('FILE_SAMPLE_RATE').text)
                    x['tracks'] = [t.find('NAME').text for t in root.find('TRACK_LIST').findall('TRACK')]
                    fs = root.find('FILE_SET')
                    if fs is not None: x['fileSet'] = [fs.find('FAMILY_UID').text, int(fs.find('FILE_SET_INDEX').text)]
                    out['ixml'] = x
                if cid == b'data' and 'dataAt' not in out: out['dataAt'] = len(order) - 1
                i += 8 + size + (size & 1)
            out['order'] = order
            if len(sys.argv) > 2:
                # Date and time at the nearest second (a take 0.2 ms before 15:00 says 15:00:00).
                t = float(sys.argv[2]); lt = time.localtime(t); nearest = time.localtime(round(t))
                out['local'] = dict(date=time.strftime('%Y-%m-%d', nearest), time=time.strftime('%H:%M:%S', nearest),
                                    seconds=lt.tm_hour * 3600 + lt.tm_min * 60 + lt.tm_sec + (t - int(t)))
            print(json.dumps(out))
            """
        let r = try await CLIHarness.tool("python3", ["-c", script, path] + (began.map { [String($0)] } ?? []))
        try #require(r.status == 0, "\(r.stderr)")
        return try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
    }

    /// `began` of a take's JSON as seconds since 1970.
    /// How far a TimeReference (whole frames at 48 kHz) may be from `firstFrameAt` (given to the
    /// microsecond) times the rate: one frame, and the date's last digit (0.048 frames).
    static let timeReferenceTolerance = 1 + 48_000 * 1e-6

    static func began(_ take: [String: Any]) async throws -> Double {
        let text = try #require(take["firstFrameAt"] as? String, "the take has its first frame's time")
        let r = try await CLIHarness.tool("python3", ["-c", "import sys, datetime; print(datetime.datetime.fromisoformat(sys.argv[1].replace('Z', '+00:00')).timestamp())", text])
        return try #require(Double(r.stdout.trimmingCharacters(in: .whitespacesAndNewlines)), "\(text): \(r.stderr)")
    }

    @Test("a WAV take is Broadcast Wave: bext and iXML before the audio, read by python and ffprobe; TimeReference is its first frame's time of day")
    func wavTake() async throws {
        let cli = try CLIHarness()
        let before = Date().timeIntervalSince1970
        let r = try await cli.run("record", "-d", "2s", "--name", "Scène 12A", "--set", "metadata.tape=CARD7", "--set", "metadata.user=MIXER=Ana, ROOM=B", "--json")
        let after = Date().timeIntervalSince1970
        try #require(r.status == 0, "\(r.stderr)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        let take = try #require(report["take"] as? [String: Any])
        let path = try #require(take["path"] as? String)
        let began = try await Self.began(take)
        #expect(began >= before && began <= after, "the first frame came while the command ran: \(before) \(began) \(after)")
        let b = try await Self.broadcast(path, began: began)
        let order = try #require(b["order"] as? [String])
        let data = try #require(order.firstIndex(of: "data"))
        #expect(order.prefix(data).contains("bext") && order.prefix(data).contains("iXML"), "\(order)")
        #expect(order.prefix(data).firstIndex(of: "fmt ")! < order.firstIndex(of: "bext")!, "bext after fmt: \(order)")
        let bext = try #require(b["bext"] as? [String: Any])
        let ixml = try #require(b["ixml"] as? [String: Any])
        let local = try #require(b["local"] as? [String: Any])
        let id = try #require(take["id"] as? String)
        #expect(bext["originator"] as? String == "Tapedeck")
        #expect(bext["reference"] as? String == id.replacingOccurrences(of: "-", with: ""))
        #expect(bext["date"] as? String == local["date"] as? String)
        #expect(bext["time"] as? String == local["time"] as? String)
        #expect(bext["version"] as? Int == 2)
        let reference = try #require(bext["timeReference"] as? Int)
        let seconds = try #require(local["seconds"] as? Double)
        // A whole frame (TimeReference counts frames), and the microsecond `firstFrameAt` is given to.
        #expect(abs(Double(reference) - seconds * 48_000) <= Self.timeReferenceTolerance, "TimeReference \(reference) is the first frame's \(seconds) s since midnight")
        #expect(ixml["timestamp"] as? Int == reference)
        #expect((bext["description"] as? String)?.contains("sSCENE=Scene 12A\r\nsTAKE=1\r\n") == true, "\(bext)")
        #expect((bext["history"] as? String)?.contains("A=PCM,F=48000,W=16,M=stereo,T=null") == true, "\(bext)")
        #expect(ixml["SCENE"] as? String == "Scène 12A")
        #expect(ixml["TAKE"] as? String == "1")
        #expect(ixml["TAPE"] as? String == "CARD7")
        #expect(ixml["FILE_UID"] as? String == id.replacingOccurrences(of: "-", with: "").uppercased())
        #expect(ixml["tracks"] as? [String] == ["FL", "FR"])
        #expect((ixml["USER"] as? String)?.contains("MIXER=Ana") == true, "\(ixml)")
        #expect(ixml["NOTE"] == nil, "no blank values")
        // The loudness fields are what the library stores, in hundredths.
        let loudness = try #require(take["loudness"] as? [String: Any])
        let fields = try #require(bext["loudness"] as? [Int])
        #expect(abs(Double(fields[0]) - (loudness["integrated"] as? Double ?? 0) * 100) <= 1, "\(fields) \(loudness)")
        // ffmpeg's own reader.
        let probe = try await CLIHarness.tool("ffprobe", ["-v", "error", "-show_entries", "format_tags", "-of", "json", path])
        let tags = try #require((try JSONSerialization.jsonObject(with: Data(probe.stdout.utf8)) as? [String: Any]).flatMap { ($0["format"] as? [String: Any])?["tags"] as? [String: String] })
        #expect(tags["time_reference"] == String(reference), "\(tags)")
        #expect(tags["encoded_by"] == "Tapedeck", "ffmpeg reads the Originator as encoded_by: \(tags)")
        #expect(tags["originator_reference"] == id.replacingOccurrences(of: "-", with: ""))
        #expect(try await CLIHarness.tool("sox", [path, "-n"]).stderr.isEmpty, "sox reads the file without a warning")
        // And `show` says when it began.
        let shown = try await cli.run("show", "last")
        #expect(shown.stdout.contains("TimeReference \(reference)"), "\(shown.stdout)")
    }

    @Test("a SIGKILLed WAV take is recovered with bext and iXML that still agree")
    func killedTake() async throws {
        let cli = try CLIHarness()
        let (p, _, _) = try cli.start(["record", "-d", "30s"])
        let pending = cli.library.appendingPathComponent("sessions")
        #expect(try await CLIHarness.wait(timeout: 10) {
            (FileManager.default.enumerator(atPath: pending.path)?.allObjects as? [String] ?? []).contains { $0.hasSuffix(".wav") }
        })
        try await Task.sleep(for: .seconds(2.5))
        kill(p.processIdentifier, SIGKILL)
        try await CLIHarness.waitForExit(p)
        let takes = try await cli.takes()  // opening the library recovers the take
        let take = try #require(takes.first)
        #expect(take["state"] as? String == "recovered")
        let path = try #require(take["path"] as? String)
        let b = try await Self.broadcast(path)
        let bext = try #require(b["bext"] as? [String: Any])
        let ixml = try #require(b["ixml"] as? [String: Any])
        let reference = try #require(bext["timeReference"] as? Int)
        #expect(reference > 0 && ixml["timestamp"] as? Int == reference, "stamped at the first frame: \(bext) \(ixml)")
        let created = try #require(take["createdAt"] as? String)
        #expect(!created.isEmpty)
        let wave = try await CLIHarness.tool("python3", ["-c", "import wave,sys; w = wave.open(sys.argv[1]); print(w.getnframes())", path])
        #expect(wave.status == 0 && Int(wave.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) == take["frames"] as? Int, "\(wave.stderr)")
    }

    @Test("the takes of a split run: each TimeReference is the first's plus its offset in the run; iXML FILE_SET names the run")
    func splitRun() async throws {
        let cli = try CLIHarness()
        let r = try await cli.run("record", "-d", "3s", "--split", "1s", "--json")
        try #require(r.status == 0, "\(r.stderr)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        let takes = try #require(report["takes"] as? [[String: Any]])
        #expect(takes.count == 3)
        var first: Int?
        for take in takes {
            let run = try #require(take["run"] as? [String: Any])
            let offset = try #require(run["offsetFrames"] as? Int)
            let b = try await Self.broadcast(try #require(take["path"] as? String))
            let reference = try #require((b["bext"] as? [String: Any])?["timeReference"] as? Int)
            if first == nil { first = reference }
            #expect(abs(reference - (first! + offset)) <= 1, "take \(run["index"] ?? "?"): \(reference) vs \(first!) + \(offset)")
            let fileSet = try #require((b["ixml"] as? [String: Any])?["fileSet"] as? [Any])
            #expect(fileSet.first as? String == (run["id"] as? String)?.replacingOccurrences(of: "-", with: "").uppercased())
            #expect(fileSet.last as? Int == run["index"] as? Int)
        }
    }

    @Test("a FLAC take carries ORGANIZATION from the start; `tapedeck loudness` adds TIME_REFERENCE (its first frame's) and its loudness; flac -t passes")
    func flacTake() async throws {
        let cli = try CLIHarness()
        let r = try await cli.run("record", "-d", "2s", "--set", "encoder.name=flac", "--set", "metadata.organization=Radio Tapedeck", "--json")
        try #require(r.status == 0, "\(r.stderr)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        let take = try #require(report["take"] as? [String: Any])
        let path = try #require(take["path"] as? String)
        #expect(try await CLIHarness.tool("flac", ["-t", "-s", path]).status == 0)
        let recorded = try await CLIHarness.tool("metaflac", ["--export-tags-to=-", path]).stdout
        #expect(recorded.contains("ORGANIZATION=Radio Tapedeck"), "\(recorded)")
        // The recorder never rewrites a committed take's file: the time of day and loudness
        // come with `tapedeck loudness` (or an export).
        #expect(!recorded.contains("TIME_REFERENCE=") && !recorded.contains("REPLAYGAIN"), "\(recorded)")
        #expect(try await cli.run("loudness", "last", "--set", "metadata.organization=Radio Tapedeck").status == 0)
        #expect(try await CLIHarness.tool("flac", ["-t", "-s", path]).status == 0)
        let tags = try await CLIHarness.tool("metaflac", ["--export-tags-to=-", path]).stdout
        let began = try await Self.began(take)
        let local = try #require(try await Self.broadcastLocalSeconds(began))
        let line = try #require(tags.split(separator: "\n").first { $0.hasPrefix("TIME_REFERENCE=") })
        let reference = try #require(Double(line.dropFirst("TIME_REFERENCE=".count)))
        #expect(abs(reference - local * 48_000) <= Self.timeReferenceTolerance, "\(line) vs \(local)")
        #expect(tags.contains("ORGANIZATION=Radio Tapedeck"), "\(tags)")
        let loudness = try #require(take["loudness"] as? [String: Any])
        let gain = -18 - (loudness["integrated"] as? Double ?? 0)
        #expect(tags.contains("REPLAYGAIN_TRACK_GAIN=\(String(format: "%.2f", gain)) dB"), "\(tags)")
        #expect(tags.contains("REPLAYGAIN_TRACK_PEAK="), "\(tags)")
    }

    @Test("an imported Broadcast Wave keeps its own bext and iXML byte for byte; show displays them; `loudness` changes only its loudness fields")
    func importedBroadcastWave() async throws {
        let cli = try CLIHarness()
        let folder = cli.library.path + "-bwf"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let source = folder + "/F6_0042.wav"
        // ffmpeg writes a bext chunk of its own: another recorder's file.
        let made = try await CLIHarness.tool("ffmpeg", ["-v", "error", "-f", "lavfi", "-i", "sine=frequency=440:duration=2:sample_rate=48000", "-ac", "2",
                                                        "-c:a", "pcm_s24le", "-write_bext", "1", "-metadata", "originator=Field Recorder F6",
                                                        "-metadata", "originator_reference=F6-0042", "-metadata", "description=sSCENE=12A\r\nsTAKE=4",
                                                        "-metadata", "origination_date=2026-05-01", "-metadata", "origination_time=06:30:00",
                                                        "-metadata", "time_reference=1123200000", source])
        try #require(made.status == 0, "\(made.stderr)")
        let imported = try await cli.run("import", source, "--json")
        try #require(imported.status == 0, "\(imported.stderr)")
        let take = try #require((try JSONSerialization.jsonObject(with: Data(imported.stdout.utf8)) as? [[String: Any]])?.first)
        let path = try #require(take["path"] as? String)
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == Data(contentsOf: URL(fileURLWithPath: source)), "kept byte for byte")
        let shown = try await cli.run("show", "last")
        #expect(shown.stdout.contains("Broadcast: Field Recorder F6, 2026-05-01 06:30:00, TimeReference 1123200000 (06:30:00.000)"), "\(shown.stdout)")
        let shownJSON = try await cli.run("show", "last", "--json")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(shownJSON.stdout.utf8)) as? [String: Any])
        #expect((json["broadcast"] as? [String: Any])?["originatorReference"] as? String == "F6-0042", "\(json)")
        // Measuring writes the loudness into its bext, and nothing else of it changes.
        #expect(try await cli.run("loudness", "last").status == 0)
        let b = try await Self.broadcast(path)
        let bext = try #require(b["bext"] as? [String: Any])
        #expect(bext["originator"] as? String == "Field Recorder F6" && bext["reference"] as? String == "F6-0042", "\(bext)")
        #expect(bext["timeReference"] as? Int == 1_123_200_000)
        #expect((bext["loudness"] as? [Int])?.first != 0x7FFF, "\(bext)")
        #expect(try await CLIHarness.tool("sox", [path, "-n"]).status == 0)
    }

    @Test("a take whose file was cut short or overwritten is not measured or exported as if whole: exit 74 and `tapedeck doctor` named")
    func damagedTake() async throws {
        let cli = try CLIHarness()
        #expect(try await cli.run("record", "-d", "2s", "--name", "cut").status == 0)
        #expect(try await cli.run("record", "-d", "1s", "--name", "noise").status == 0)
        let takes = try await cli.takes()
        let cut = try #require(takes.first { $0["name"] as? String == "cut" }?["path"] as? String)
        let noise = try #require(takes.first { $0["name"] as? String == "noise" }?["path"] as? String)
        try #require(truncate(cut, 40_000) == 0)
        try Data((0..<50_000).map { _ in UInt8.random(in: 0...255) }).write(to: URL(fileURLWithPath: noise))
        let out = cli.library.path + "-out"
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: out) }
        for take in ["Session 1/cut", "Session 1/noise"] {
            for args in [["loudness", take], ["export", take, "--loudness", "-23", "-o", out], ["export", take, "-o", out]] {
                let r = try await cli.run(args)
                #expect(r.status == 74 && r.stderr.contains("tapedeck doctor") && !r.stderr.contains("encoder"), "\(args): \(r.status) \(r.stderr)")
            }
        }
        #expect((try FileManager.default.contentsOfDirectory(atPath: out)).isEmpty, "nothing half-made is kept")
    }

    @Test("a take under 0.4 s is too short for an integrated loudness: said so, and --loudness suggests --normalize-peak")
    func shortTake() async throws {
        let cli = try CLIHarness()
        #expect(try await cli.run("record", "-d", "0.3s").status == 0)
        let shown = try await cli.run("show", "last")
        #expect(shown.stdout.contains("too short to measure (under 0.4 s)"), "\(shown.stdout)")
        let r = try await cli.run("export", "last", "--loudness", "-23", "-o", cli.library.path)
        #expect(r.status == 65 && r.stderr.contains("--normalize-peak"), "\(r.stderr)")
    }

    /// Seconds since local midnight of `t`, as python's localtime says.
    static func broadcastLocalSeconds(_ t: Double) async throws -> Double? {
        let r = try await CLIHarness.tool("python3", ["-c", "import time,sys; t=float(sys.argv[1]); l=time.localtime(t); print(l.tm_hour*3600+l.tm_min*60+l.tm_sec+(t-int(t)))", String(t)])
        return Double(r.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    @Test("loudness measured while recording, at import and by `tapedeck loudness` matches ffmpeg's; --missing skips measured takes", arguments: ["directory", "bundle"])
    func loudnessMatchesFFmpeg(_ storage: String) async throws {
        let cli = try CLIHarness(storage: storage)
        let r = try await cli.run("record", "-d", "4s", "--set", "format.sample-format=s24", "--json")
        try #require(r.status == 0, "\(r.stderr)")
        // A programme whose level and pitch move (speech-like), made by sox, imported. At 48 kHz: BS.1770 measures true
        // peak 4× oversampled, which libebur128 does at any rate, while ffmpeg's filter resamples
        // 44.1 kHz to 192 kHz (not 4×), so on noise their peaks differ by up to 0.3 dB there.
        let folder = cli.library.path + "-src"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let source = folder + "/speechlike.wav"
        let made = try await CLIHarness.tool("sox", ["-R", "-n", "-r", "48000", "-c", "1", "-b", "16", source, "synth", "12", "sine", "150-3000", "tremolo", "3", "90", "vol", "-12dB"])
        try #require(made.status == 0, "\(made.stderr)")
        let imported = try await cli.run("import", source, "--json")
        try #require(imported.status == 0, "\(imported.stderr)")
        for take in try await cli.takes() {
            let path = try #require(take["path"] as? String)
            let ours = try #require(take["loudness"] as? [String: Any], "\(take["name"] ?? "") was measured")
            let theirs = try await CLIHarness.ffmpegLoudness(path)
            #expect(abs((ours["integrated"] as? Double ?? .nan) - theirs.integrated) <= 0.1, "\(ours) vs ffmpeg \(theirs)")
            #expect(abs((ours["truePeak"] as? Double ?? .nan) - theirs.truePeak) <= 0.2, "\(ours) vs ffmpeg \(theirs)")
        }
        let skipped = try await cli.run("loudness", "--all", "--missing")
        #expect(skipped.status == 0 && skipped.stdout.isEmpty, "\(skipped.stdout) \(skipped.stderr)")
        let again = try await cli.run("loudness", "--all", "--json")
        #expect(again.status == 0, "\(again.stderr)")
        let measured = try #require(try JSONSerialization.jsonObject(with: Data(again.stdout.utf8)) as? [[String: Any]])
        #expect(measured.count == 2)
        for take in measured where take["encoding"] as? String == "wav" {
            // The file's bext (written in place, or after the audio for the imported file) says it too.
            let path = try #require(take["path"] as? String)
            let b = try await Self.broadcast(path)
            let fields = try #require((b["bext"] as? [String: Any])?["loudness"] as? [Int])
            let integrated = try #require((take["loudness"] as? [String: Any])?["integrated"] as? Double)
            #expect(abs(Double(fields[0]) - integrated * 100) <= 1, "\(fields) \(integrated)")
            #expect(try await CLIHarness.tool("sox", [path, "-n"]).status == 0)
        }
        let none = try await cli.run("loudness")
        #expect(none.status == 64 && none.stderr.contains("--all"), "\(none.stderr)")
    }
}
