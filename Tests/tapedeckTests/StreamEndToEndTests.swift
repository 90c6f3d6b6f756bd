#if Streams
import Foundation
import TapedeckTesting
import Testing

/// `tapedeck record -D http://…`: network streams from a private Icecast server fed by ffmpeg
/// (test side), and from hostile test servers (one that stalls, one that sends garbage).
@Suite("network streams end to end", .endToEnd)
struct StreamEndToEndTests {
    static let rate = 48_000

    /// A tonal stereo signal whose frequencies wander (so one alignment fits), which lossy codecs keep well.
    static func tonal(seconds: Int) -> [Int16] {
        var out = [Int16](repeating: 0, count: seconds * rate * 2)
        var p = (0.0, 0.0, 0.0, 0.0)
        for i in 0..<(seconds * rate) {
            let t = Double(i) / Double(rate)
            p.0 += (500 + 300 * sin(2 * .pi * 0.23 * t)) / Double(rate)
            p.1 += (1200 + 500 * sin(2 * .pi * 0.11 * t + 1)) / Double(rate)
            p.2 += (700 + 250 * sin(2 * .pi * 0.31 * t + 2)) / Double(rate)
            p.3 += (300 + 100 * sin(2 * .pi * 0.17 * t + 3)) / Double(rate)
            out[2 * i] = Int16(12_000 * sin(2 * .pi * p.0) + 6_000 * sin(2 * .pi * p.1))
            out[2 * i + 1] = Int16(10_000 * sin(2 * .pi * p.2) + 7_000 * sin(2 * .pi * p.3))
        }
        return out
    }

    /// Writes interleaved s16 stereo samples as a WAV file.
    static func wav(_ samples: [Int16], _ url: URL) throws {
        var d = Data()
        func u32(_ v: Int) { withUnsafeBytes(of: UInt32(v).littleEndian) { d.append(contentsOf: $0) } }
        func u16(_ v: Int) { withUnsafeBytes(of: UInt16(v).littleEndian) { d.append(contentsOf: $0) } }
        d.append(contentsOf: Array("RIFF".utf8)); u32(36 + samples.count * 2); d.append(contentsOf: Array("WAVEfmt ".utf8))
        u32(16); u16(1); u16(2); u32(rate); u32(rate * 4); u16(4); u16(16)
        d.append(contentsOf: Array("data".utf8)); u32(samples.count * 2)
        samples.withUnsafeBytes { d.append(contentsOf: $0) }
        try d.write(to: url)
    }

    /// The take's samples as interleaved s16 stereo (decoded by sox).
    static func samples(_ path: String) async throws -> [Int16] {
        let raw = FileManager.default.temporaryDirectory.appendingPathComponent("stream-\(UUID().uuidString).raw")
        defer { try? FileManager.default.removeItem(at: raw) }
        let r = try await CLIHarness.tool("sox", ["-D", path, "-t", "raw", "-e", "signed", "-b", "16", "-L", "-c", "2", raw.path])
        #expect(r.status == 0, "\(r.stderr)")
        let data = try Data(contentsOf: raw)
        return data.withUnsafeBytes { Array($0.bindMemory(to: Int16.self)) }
    }

    /// The best correlation of `take`'s left channel with `source`'s at any offset (found on a
    /// decimated envelope, then refined), and that offset in frames.
    static func alignment(_ take: [Int16], _ source: [Int16]) -> (offset: Int, correlation: Double) {
        let takeFrames = take.count / 2, sourceFrames = source.count / 2
        let step = 8, window = min(takeFrames, rate) / step
        let t = (0..<window).map { Double(take[2 * ($0 * step + rate / 2)]) }
        var best = (0, -2.0)
        for lag in stride(from: 0, to: sourceFrames - takeFrames - rate, by: 1) where lag % step == 0 {
            var dot = 0.0, ss = 0.0
            for k in 0..<window {
                let s = Double(source[2 * (lag + rate / 2 + k * step)])
                dot += s * t[k]; ss += s * s
            }
            let c = dot / max(1, ss.squareRoot())
            if c > best.1 { best = (lag, c) }
        }
        var refined = (best.0, -2.0)
        for lag in max(0, best.0 - 2 * step)...min(sourceFrames - takeFrames, best.0 + 2 * step) {
            let c = correlation(take, source, offset: lag)
            if c > refined.1 { refined = (lag, c) }
        }
        return refined
    }

    /// Pearson correlation of both channels of `take` with `source` from frame `offset` on.
    static func correlation(_ take: [Int16], _ source: [Int16], offset: Int) -> Double {
        var sxy = 0.0, sxx = 0.0, syy = 0.0
        for i in 0..<min(take.count, source.count - 2 * offset) {
            let x = Double(take[i]), y = Double(source[2 * offset + i])
            sxy += x * y; sxx += x * x; syy += y * y
        }
        return sxy / max(1, (sxx * syy).squareRoot())
    }

    @Test("each codec from Icecast: the take is the source (lossless: sample-exact; lossy: correlation ≥ 0.99), the stream's format, no gaps",
          arguments: ["flac", "opus", "vorbis", "mp3"])
    func codecs(_ codec: String) async throws {
        let cli = try CLIHarness()
        let folder = try Self.folder(cli)
        defer { try? FileManager.default.removeItem(at: folder) }
        let lossless = codec == "flac"
        let seconds = 30
        let source: [Int16] = lossless
            ? StereoSignal.noise(seconds: Double(seconds)).withUnsafeBytes { Array($0.bindMemory(to: Int16.self)) }
            : Self.tonal(seconds: seconds)
        let (server, _) = try await Self.icecast(feeding: source, codec: codec, in: folder)
        let r = try await cli.run("record", "-D", server.url("live"), "-d", "5", "--json")
        #expect(r.status == 0, "\(r.stderr)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        let take = try #require(report["take"] as? [String: Any])
        #expect(take["frames"] as? Int == 5 * Self.rate, "\(take)")
        let format = try #require(take["format"] as? [String: Any])
        #expect(format["sampleRate"] as? Int == Self.rate && format["channels"] as? Int == 2)
        #expect(format["sampleFormat"] as? String == "s16", "the stream's depth (FLAC), or the default for a lossy codec")
        #expect(take["overrunFrames"] as? Int == 0, "\(r.stdout)")
        let path = try #require(take["path"] as? String)
        let got = try await Self.samples(path)
        if lossless {
            let (matched, stray) = StereoSignal.copiedRuns(StereoSignal.frames(got.withUnsafeBytes { Array($0) }),
                                                          of: StereoSignal.frames(source.withUnsafeBytes { Array($0) }))
            #expect(stray == 0 && matched == got.count / 2, "\(matched) of \(got.count / 2) frames are the source's, \(stray) stray")
        } else {
            let (offset, c) = Self.alignment(got, source)
            #expect(c >= 0.99, "\(codec): correlation \(c) at frame \(offset)")
        }
    }

    /// A hostile HTTP server (test side): `stall FILE` sends a 200, FILE's bytes and then nothing
    /// (the socket kept open); `garbage` sends a 200 and random bytes; `silent` accepts and says nothing.
    static let hostileServer = """
    import random, socket, sys, threading, time
    mode, port = sys.argv[1], int(sys.argv[2])
    def serve(c):
        c.recv(65536)
        if mode == "stall":
            c.sendall(b"HTTP/1.0 200 OK\\r\\nContent-Type: audio/mpeg\\r\\n\\r\\n" + open(sys.argv[3], "rb").read())
        elif mode == "garbage":
            r = random.Random(42)
            c.sendall(b"HTTP/1.0 200 OK\\r\\nContent-Type: application/octet-stream\\r\\n\\r\\n" + bytes(r.getrandbits(8) for _ in range(262144)))
        time.sleep(120)
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("127.0.0.1", port)); s.listen(64)
    while True:
        c, _ = s.accept()
        threading.Thread(target=serve, args=(c,), daemon=True).start()
    """

    /// Starts ``hostileServer`` in `mode` on a free port. - Returns: its process and URL.
    static func hostile(_ mode: String, _ extra: [String] = [], in folder: URL) async throws -> (pid_t, String) {
        let script = folder.appendingPathComponent("hostile.py")
        try hostileServer.write(to: script, atomically: true, encoding: .utf8)
        let port = try S3Server.freePort()
        let pid = try ChildProcess.start(["python3", script.path, mode, String(port)] + extra, environment: ProcessInfo.processInfo.environment,
                                         output: folder.appendingPathComponent("hostile.log").path)
        var tries = 0
        while !S3Server.answers(port) && tries < 200 {
            tries += 1
            try await Task.sleep(for: .milliseconds(25))
        }
        return (pid, "http://127.0.0.1:\(port)/live")
    }

    /// A private Icecast whose `mount` ffmpeg feeds, looped in real time, from `source` (written
    /// into `folder` as WAV). - Returns: the server and the WAV (to feed it again after a restart).
    static func icecast(feeding source: [Int16], codec: String, mount: String = "live", in folder: URL) async throws -> (IcecastServer, URL) {
        let wav = folder.appendingPathComponent("source.wav")
        try Self.wav(source, wav)
        let server = try await IcecastServer.startAsync()
        try await OwnThread.run { try server.feed(wav, codec: codec, mount: mount) }
        return (server, wav)
    }

    static func folder(_ cli: CLIHarness) throws -> URL {
        let folder = cli.library.deletingLastPathComponent().appendingPathComponent("stream-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return folder
    }

    @Test("a server that sends audio and then nothing: the take ends interrupted within stall-after + 1 s, with what came; exit 4")
    func stall() async throws {
        let cli = try CLIHarness()
        let folder = try Self.folder(cli)
        defer { try? FileManager.default.removeItem(at: folder) }
        try Self.wav(Self.tonal(seconds: 3), folder.appendingPathComponent("s.wav"))
        let mp3 = folder.appendingPathComponent("s.mp3").path
        #expect(try await CLIHarness.tool("ffmpeg", ["-nostdin", "-loglevel", "error", "-i", folder.appendingPathComponent("s.wav").path, "-c:a", "libmp3lame", mp3]).status == 0)
        let (pid, url) = try await Self.hostile("stall", [mp3], in: folder)
        defer { ChildProcess.terminate(pid, SIGKILL) }
        let began = Date()
        let r = try await cli.run("record", "-D", url, "-d", "30", "--json", "--set", "capture.stream.stall-after=2s")
        let took = Date().timeIntervalSince(began)
        #expect(r.status == 4, "\(r.stderr)")
        #expect(took < 2 + 1 + 2, "the stall was seen after \(took) s (stall-after 2 s; the 3 s of audio come at once)")
        #expect(r.stderr.contains("stalled") && r.stderr.contains(url), "\(r.stderr)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        let take = try #require(report["take"] as? [String: Any])
        #expect(take["state"] as? String == "interrupted")
        #expect((140_000...146_000).contains(take["frames"] as? Int ?? 0), "3 s of MP3 (with the codec's padding): \(take["frames"] ?? 0)")
    }

    @Test("a server that accepts and says nothing, or sends bytes that are not audio: a clear message, exit 69, no take left")
    func silentAndGarbage() async throws {
        let cli = try CLIHarness()
        let folder = try Self.folder(cli)
        defer { try? FileManager.default.removeItem(at: folder) }
        for (mode, said) in [("silent", "stalled: no answer within 2 s"), ("garbage", "not audio Tapedeck decodes")] {
            let (pid, url) = try await Self.hostile(mode, in: folder)
            defer { ChildProcess.terminate(pid, SIGKILL) }
            let began = Date()
            let r = try await cli.run("record", "-D", url, "-d", "10", "--set", "capture.stream.stall-after=2s")
            #expect(r.status == 69, "\(mode): \(r.stderr)")
            #expect(r.stderr.contains(said) && r.stderr.contains("--resume"), "\(mode): \(r.stderr)")
            #expect(Date().timeIntervalSince(began) < 2 + 1 + 2, "\(mode)")
        }
        #expect(try await cli.run("doctor").status == 0)
        let list = try await cli.run("list", "--json")
        #expect(!list.stdout.contains("\"take\""), "\(list.stdout)")
    }

    @Test("credentials in the URL reach the server and no output: not the banner, the log, the report or the take's file")
    func credentials() async throws {
        let cli = try CLIHarness()
        let folder = try Self.folder(cli)
        defer { try? FileManager.default.removeItem(at: folder) }
        let (server, _) = try await Self.icecast(feeding: Self.tonal(seconds: 10), codec: "opus", in: folder)
        let url = server.url("live").replacingOccurrences(of: "http://", with: "http://listener:pw-Secret-42@")
        let r = try await cli.run("record", "-D", url, "-d", "1", "--json", "-v")
        #expect(r.status == 0, "\(r.stderr)")
        #expect(!(r.stdout + r.stderr).contains("pw-Secret-42"), "\(r.stderr)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        let path = try #require((report["take"] as? [String: Any])?["path"] as? String)
        #expect(try !Data(contentsOf: URL(fileURLWithPath: path)).contains(Data("pw-Secret-42".utf8)))
        let shown = try await cli.run("config", "show", "--set", "capture.backend=stream", "--set", "capture.stream.device=\(url)")
        #expect(!shown.stdout.contains("pw-Secret-42") && shown.stdout.contains("capture.stream.device"), "\(shown.stdout)")
    }

    @Test("Icecast killed mid-take and started again, with --resume: an interrupted take, a resumed one, the gap in events")
    func serverKilled() async throws {
        let cli = try CLIHarness()
        let folder = try Self.folder(cli)
        defer { try? FileManager.default.removeItem(at: folder) }
        let (server, wav) = try await Self.icecast(feeding: Self.tonal(seconds: 20), codec: "opus", in: folder)
        let (p, out, err) = try cli.start(["record", "-D", server.url("live"), "-d", "12", "--resume", "--json",
                                           "--set", "capture.stream.stall-after=2s", "--set", "capture.stream.reconnect=1s..2s"])
        try await Task.sleep(for: .seconds(4))
        try await OwnThread.run { server.kill() }
        try await Task.sleep(for: .seconds(2.5))
        try await OwnThread.run {
            try server.restart()
            try server.feed(wav, codec: "opus", mount: "live")
        }
        try await CLIHarness.waitForExit(p, limit: 60)
        let stdout = try String(contentsOf: out, encoding: .utf8), stderr = try String(contentsOf: err, encoding: .utf8)
        #expect(p.terminationStatus == 4, "\(stderr)")
        let report = try #require((try? JSONSerialization.jsonObject(with: Data(stdout.utf8))) as? [String: Any], "\(stdout)\n\(stderr)")
        let takes = try #require(report["takes"] as? [[String: Any]], "\(stdout)")
        #expect(takes.map { $0["state"] as? String } == ["interrupted", "complete"], "\(stderr)")
        #expect((takes.first?["frames"] as? Int ?? 0) > 2 * Self.rate, "\(takes.map { $0["frames"] ?? 0 })")
        let events = try #require(report["events"] as? [[String: Any]])
        #expect(events.first?["kind"] as? String == "device-lost")
        #expect((events.first?["seconds"] as? Double ?? 0) >= 2, "\(events)")
        #expect(stderr.contains("The stream \(server.url("live"))"), "\(stderr)")
    }

    @Test("ICY title changes become markers with the title as label, where the title changed")
    func icyTitles() async throws {
        let cli = try CLIHarness()
        let folder = try Self.folder(cli)
        defer { try? FileManager.default.removeItem(at: folder) }
        let (server, _) = try await Self.icecast(feeding: Self.tonal(seconds: 20), codec: "mp3", mount: "titles", in: folder)
        #expect(server.setTitle("Before", mount: "titles"))
        let (p, out, err) = try cli.start(["record", "-D", server.url("titles"), "-d", "8", "--json"])
        var changed: [(String, Date)] = []
        try await Task.sleep(for: .seconds(3))
        for title in ["Artist - Song One", "Ünïcode – Two"] {
            #expect(server.setTitle(title, mount: "titles"))
            changed.append((title, Date()))
            try await Task.sleep(for: .seconds(2))
        }
        try await CLIHarness.waitForExit(p, limit: 60)
        let stdout = try String(contentsOf: out, encoding: .utf8), stderr = try String(contentsOf: err, encoding: .utf8)
        #expect(p.terminationStatus == 0, "\(stderr)")
        let report = try #require((try? JSONSerialization.jsonObject(with: Data(stdout.utf8))) as? [String: Any], "\(stdout)\n\(stderr)")
        let take = try #require(report["take"] as? [String: Any])
        let markers = try #require(take["markers"] as? [[String: Any]])
        #expect(markers.map { $0["label"] as? String } == ["Before"] + changed.map(\.0), "\(markers)")
        let began = try #require((take["firstFrameAt"] as? String).flatMap { try? Date($0, strategy: .iso8601.year().month().day().dateSeparator(.dash).time(includingFractionalSeconds: true).timeSeparator(.colon)) })
        for (marker, (title, at)) in zip(markers.dropFirst(), changed) {
            let seconds = Double(marker["frame"] as? Int ?? 0) / Double(Self.rate)
            let expected = at.timeIntervalSince(began)
            #expect(abs(seconds - expected) < 0.75, "\(title): marker at \(seconds) s, the title changed at \(expected) s")
        }
    }
}
#endif
