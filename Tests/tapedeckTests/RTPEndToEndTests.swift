#if Streams
import Foundation
import TapedeckTesting
import Testing

/// `tapedeck record -D rtp://…`: RTP streams sent by `ffmpeg -re -f rtp` (test side) to
/// loopback, directly or through a relay that drops packets.
@Suite("RTP end to end", .endToEnd)
struct RTPEndToEndTests {
    /// A UDP relay (test side): forwards from one port to another, dropping a share of the
    /// packets (seeded), to put holes in a stream.
    static let relay = """
    import random, socket, sys
    listen, forward, share = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    i = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); i.bind(("127.0.0.1", listen))
    o = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    r = random.Random(7)
    while True:
        d, _ = i.recvfrom(65536)
        if len(d) > 12 and r.random() < share: continue
        o.sendto(d, ("127.0.0.1", forward))
    """

    /// Sends `wav` looped in real time as `codec` (pcm_s16be: L16, pcm_s24be: L24) to loopback
    /// `port`; the SDP ffmpeg writes goes to `sdp`. - Returns: ffmpeg's process.
    static func send(_ wav: URL, codec: String, port: Int, sdp: URL, log: URL) throws -> pid_t {
        try ChildProcess.start(["ffmpeg", "-nostdin", "-hide_banner", "-loglevel", "error", "-re", "-stream_loop", "-1", "-i", wav.path,
                                "-c:a", codec, "-f", "rtp", "-sdp_file", sdp.path, "rtp://127.0.0.1:\(port)?pkt_size=1200"],
                               environment: ProcessInfo.processInfo.environment, output: log.path)
    }

    /// How a take holds the source: each frame is silence or continues the source exactly, and a
    /// run after silence goes on where the source went on (a hole in the right place).
    /// - Returns: the frames matched, the frames of holes, and the first problem, if any.
    static func holes(_ take: [(Int16, Int16)], in source: [(Int16, Int16)]) -> (matched: Int, hole: Int, problem: String?) {
        var index: [UInt64: Int] = [:]
        for i in 0..<(source.count - 1) {
            index[key(source[i], source[i + 1])] = i
        }
        var matched = 0, hole = 0, position: Int?
        for i in 0..<take.count {
            if let p = position, source[p % source.count] == take[i] {
                matched += 1
                position = p + 1
                continue
            }
            if take[i] == (0, 0) {
                hole += 1
                position = position.map { $0 + 1 }
                continue
            }
            guard i + 1 < take.count, let at = index[key(take[i], take[i + 1])] else {
                return (matched, hole, "frame \(i) is neither silence nor the source")
            }
            if let p = position {
                return (matched, hole, "frame \(i) is source frame \(at), expected \(p % source.count): a hole of the wrong length")
            }
            position = at + 1
            matched += 1
        }
        return (matched, hole, nil)
    }

    static func key(_ a: (Int16, Int16), _ b: (Int16, Int16)) -> UInt64 {
        UInt64(UInt16(bitPattern: a.0)) | UInt64(UInt16(bitPattern: a.1)) << 16 | UInt64(UInt16(bitPattern: b.0)) << 32 | UInt64(UInt16(bitPattern: b.1)) << 48
    }

    @Test("L16 and L24 from ffmpeg, by SDP file and by address: sample-exact takes in the stream's format",
          arguments: [("pcm_s16be", "s16"), ("pcm_s24be", "s24")])
    func sampleExact(_ codec: String, _ depth: String) async throws {
        var cli = try CLIHarness()
        cli.withoutConfig = true  // no format chosen: the stream's own
        let folder = cli.library.deletingLastPathComponent().appendingPathComponent("rtp-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let noise = StereoSignal.noise(seconds: 30)
        let wav = folder.appendingPathComponent("source.wav")
        try StreamEndToEndTests.wav(noise.withUnsafeBytes { Array($0.bindMemory(to: Int16.self)) }, wav)
        let port = try S3Server.freePort()
        let sdp = folder.appendingPathComponent("stream.sdp")
        let sender = try Self.send(wav, codec: codec, port: port, sdp: sdp, log: folder.appendingPathComponent("ffmpeg.log"))
        defer { ChildProcess.terminate(sender, SIGKILL) }
        var tries = 0
        while !FileManager.default.fileExists(atPath: sdp.path) && tries < 100 {
            tries += 1
            try await Task.sleep(for: .milliseconds(50))
        }
        // L16 by the SDP file ffmpeg wrote, L24 by address and encoding: both ways of naming a stream.
        let args = depth == "s16" ? ["--set", "capture.rtp.sdp=\(sdp.path)", "--set", "capture.backend=rtp"]
            : ["-D", "rtp://127.0.0.1:\(port)", "--set", "capture.rtp.encoding=L24/48000/2"]
        do {
            let r = try await cli.run(["record", "-d", "3", "--json"] + args)
            #expect(r.status == 0, "\(r.stderr)")
            let report = try #require((try? JSONSerialization.jsonObject(with: Data(r.stdout.utf8))) as? [String: Any], "\(r.stdout)\(r.stderr)")
            let take = try #require(report["take"] as? [String: Any])
            let format = try #require(take["format"] as? [String: Any])
            #expect(format["sampleFormat"] as? String == depth && format["sampleRate"] as? Int == 48_000)
            #expect(!r.stderr.contains("not the requested"), "the stream's own format is no surprise when none was chosen: \(r.stderr)")
            #expect(take["overrunFrames"] as? Int == 0, "\(r.stderr)")
            let got = try await StreamEndToEndTests.samples(try #require(take["path"] as? String))
            let (matched, hole, problem) = Self.holes(StereoSignal.frames(got.withUnsafeBytes { Array($0) }), in: StereoSignal.frames(noise))
            #expect(problem == nil && hole == 0 && matched >= got.count / 2 - 1, "\(problem ?? "") \(matched) matched, \(hole) in holes")
        }
    }

    @Test("1% of the packets dropped on the way: each lost packet is a hole of its frames in its place, counted as overrun")
    func packetLoss() async throws {
        let cli = try CLIHarness()
        let folder = cli.library.deletingLastPathComponent().appendingPathComponent("rtp-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let noise = StereoSignal.noise(seconds: 30)
        let wav = folder.appendingPathComponent("source.wav")
        try StreamEndToEndTests.wav(noise.withUnsafeBytes { Array($0.bindMemory(to: Int16.self)) }, wav)
        let (relayPort, port) = (try S3Server.freePort(), try S3Server.freePort())
        let script = folder.appendingPathComponent("relay.py")
        try Self.relay.write(to: script, atomically: true, encoding: .utf8)
        let relay = try ChildProcess.start(["python3", script.path, String(relayPort), String(port), "0.01"],
                                           environment: ProcessInfo.processInfo.environment, output: folder.appendingPathComponent("relay.log").path)
        defer { ChildProcess.terminate(relay, SIGKILL) }
        try await Task.sleep(for: .milliseconds(300))
        let sender = try Self.send(wav, codec: "pcm_s16be", port: relayPort, sdp: folder.appendingPathComponent("s.sdp"),
                                   log: folder.appendingPathComponent("ffmpeg.log"))
        defer { ChildProcess.terminate(sender, SIGKILL) }
        let r = try await cli.run("record", "-D", "rtp://127.0.0.1:\(port)", "--set", "capture.rtp.encoding=L16/48000/2", "-d", "8", "--json")
        #expect(r.status == 3, "a take with overruns: \(r.stderr)")
        let report = try #require((try? JSONSerialization.jsonObject(with: Data(r.stdout.utf8))) as? [String: Any], "\(r.stdout)\(r.stderr)")
        let take = try #require(report["take"] as? [String: Any])
        let overrun = take["overrunFrames"] as? Int ?? 0
        let got = try await StreamEndToEndTests.samples(try #require(take["path"] as? String))
        let (matched, hole, problem) = Self.holes(StereoSignal.frames(got.withUnsafeBytes { Array($0) }), in: StereoSignal.frames(noise))
        #expect(problem == nil, "\(problem ?? "")")
        #expect(hole == overrun, "\(hole) frames of holes in the file, \(overrun) counted")
        #expect(overrun > 0)
        #expect((0.002...0.03).contains(Double(overrun) / Double(matched + hole)), "\(overrun) of \(matched + hole) frames")
        #expect(r.stderr.contains("packets lost"), "\(r.stderr)")
    }

    /// An AES67-style sender (test side, python) whose timestamps follow the PTP timescale
    /// (TAI, RFC 7273 `mediaclk:direct=`), taken here as this machine's clock plus 37 s, and
    /// whose packets leave 250 ms after their audio: each sample holds its own media-clock
    /// count (modulo 2²³), so the take's first frame says when it was, whatever its arrival.
    static let ptpSender = """
    import socket, struct, sys, time
    port, offset, latency = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    rate, per = 48000, 48
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    n = int((time.time() + 37) * rate) // per * per
    seq = 0
    while True:
        wait = n / rate - 37 + latency - time.time()
        if wait > 0:
            time.sleep(wait)
        payload = b"".join(((n + i) % (1 << 23)).to_bytes(3, "big") * 2 for i in range(per))
        s.sendto(struct.pack(">BBHII", 0x80, 98, seq & 0xFFFF, (n + offset) & 0xFFFFFFFF, 0x42) + payload, ("127.0.0.1", port))
        n += per
        seq += 1
    """

    @Test("timestamps on a PTP clock (RFC 7273) date the take by when its audio was, not when it arrived")
    func ptpClockDatesTheTake() async throws {
        var cli = try CLIHarness()
        cli.withoutConfig = true  // the stream's own format: s24
        let folder = cli.library.deletingLastPathComponent().appendingPathComponent("rtp-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let port = try S3Server.freePort(), offset = 1_234_567
        let sdp = folder.appendingPathComponent("studio.sdp")
        try """
            v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=PTP studio\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio \(port) RTP/AVP 98\r\n\
            a=rtpmap:98 L24/48000/2\r\na=ptime:1\r\na=ts-refclk:ptp=IEEE1588-2008:00-11-22-FF-FE-33-44-55:0\r\na=mediaclk:direct=\(offset)\r\n
            """.write(to: sdp, atomically: true, encoding: .utf8)
        let script = folder.appendingPathComponent("sender.py")
        try Self.ptpSender.write(to: script, atomically: true, encoding: .utf8)
        let sender = try ChildProcess.start(["python3", script.path, String(port), String(offset), "0.25"],
                                            environment: ProcessInfo.processInfo.environment, output: folder.appendingPathComponent("sender.log").path)
        defer { ChildProcess.terminate(sender, SIGKILL) }
        let r = try await cli.run("record", "-v", "-d", "2", "--json", "--set", "capture.backend=rtp", "--set", "capture.rtp.sdp=\(sdp.path)")
        try #require(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("take times are the RTP timestamps on the PTP clock"), "\(r.stderr)")
        let report = try #require((try? JSONSerialization.jsonObject(with: Data(r.stdout.utf8))) as? [String: Any], "\(r.stdout)\(r.stderr)")
        let take = try #require(report["take"] as? [String: Any])
        let began = try await BroadcastWaveEndToEndTests.began(take)
        let first = try await CLIHarness.tool("python3", ["-c", "import sys, wave; w = wave.open(sys.argv[1]); print(int.from_bytes(w.readframes(1)[:3], 'little', signed=True))",
                                                          try #require(take["path"] as? String)])
        let sample = try #require(Int(first.stdout.trimmingCharacters(in: .whitespacesAndNewlines)), "\(first.stderr)")
        // The first frame's own count against the count of the time the take says it began.
        let claimed = Int(((began + 37) * 48_000).rounded(.down)) % (1 << 23)
        var apart = (claimed - sample) % (1 << 23)
        if apart > 1 << 22 { apart -= 1 << 23 } else if apart < -(1 << 22) { apart += 1 << 23 }
        #expect(abs(apart) <= 2, "the take says its first frame was \(apart) frames (\(Double(apart) / 48) ms) from when it was; arrival is 250 ms late")
        // A session whose offset is not the sender's (26 s of media clock apart): the clocks
        // disagree, the takes are dated by arrival, and that is a warning without -v.
        let wrong = folder.appendingPathComponent("wrong.sdp")
        try String(contentsOf: sdp, encoding: .utf8).replacingOccurrences(of: "direct=\(offset)", with: "direct=0").write(to: wrong, atomically: true, encoding: .utf8)
        let w = try await cli.run("record", "-d", "1", "--set", "capture.backend=rtp", "--set", "capture.rtp.sdp=\(wrong.path)")
        #expect(w.status == 0 && w.stderr.contains("takes are dated by the packets' arrival") && w.stderr.contains("ptp4l"), "\(w.stderr)")
    }

    @Test("devices --backend rtp lists the streams SAP announces (and only when asked by name)")
    func sapDiscovery() async throws {
        var cli = try CLIHarness()
        cli.withoutConfig = true
        let folder = cli.library.deletingLastPathComponent().appendingPathComponent("rtp-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let port = try S3Server.freePort()
        let announcer = """
        import socket, sys, time
        sdp = "v=0\\r\\no=- 7 7 IN IP4 10.0.0.7\\r\\ns=Studio A\\r\\nc=IN IP4 239.69.1.7/32\\r\\nt=0 0\\r\\nm=audio 5004 RTP/AVP 96\\r\\na=rtpmap:96 L24/48000/2\\r\\na=ts-refclk:ptp=IEEE1588-2008:00-11-22-FF-FE-33-44-55:0\\r\\n"
        packet = bytes([0x20, 0, 0, 7, 10, 0, 0, 7]) + b"application/sdp\\0" + sdp.encode()
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        while True:
            s.sendto(packet, ("127.0.0.1", int(sys.argv[1]))); time.sleep(0.2)
        """
        let script = folder.appendingPathComponent("sap.py")
        try announcer.write(to: script, atomically: true, encoding: .utf8)
        let sender = try ChildProcess.start(["python3", script.path, String(port)], environment: ProcessInfo.processInfo.environment,
                                            output: folder.appendingPathComponent("sap.log").path)
        defer { ChildProcess.terminate(sender, SIGKILL) }
        let r = try await cli.run("devices", "--backend", "rtp", "--json", "--set", "capture.backend=rtp", "--set", "capture.rtp.sap=127.0.0.1:\(port)")
        #expect(r.status == 0, "\(r.stderr)")
        let listed = try #require((try? JSONSerialization.jsonObject(with: Data(r.stdout.utf8))) as? [[String: Any]], "\(r.stdout)\(r.stderr)")
        #expect(listed.map { $0["name"] as? String } == ["rtp://239.69.1.7:5004"], "\(r.stdout)")
        #expect((listed.first?["description"] as? String)?.contains("Studio A: L24/48000/2") == true, "\(r.stdout)")
        let all = try await cli.run("devices", "--json", "--set", "capture.backend=rtp", "--set", "capture.rtp.sap=127.0.0.1:\(port)")
        #expect(!all.stdout.contains("rtp://"), "a plain devices does not wait for announcements: \(all.stdout)")
    }
}
#endif
