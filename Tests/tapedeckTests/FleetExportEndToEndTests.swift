import Foundation
import TapedeckTesting
import Testing

/// `tapedeck fleet export MACHINE/SESSION --from … --to …` against `rclone serve s3` behind a
/// counting proxy: only the takes the time spans are downloaded, and the clip is the one the
/// recorder itself exports.
@Suite("fleet export end to end", .endToEnd)
struct FleetExportEndToEndTests {
    @Test("a stretch of another machine's logger: only the takes it spans are fetched, and the clip equals the recorder's own export")
    func onlyTheTakesNeeded() async throws {
        let server = try await S3Server.startAsync(.rclone)
        defer { server.remove() }
        let (folder, file) = try FleetEndToEndTests.workspace(server)
        defer { try? FileManager.default.removeItem(at: folder) }
        let studio = FleetEndToEndTests.machine(file, server, folder: folder, name: "studio")
        let office = FleetEndToEndTests.machine(file, server, folder: folder, name: "office")
        // Six takes of 1 s from one run (unpaced noise), pushed.
        let r = try await studio.run("record", "--machine", "studio", "--session", "Logger", "-d", "6", "--split", "1s", "--json")
        try #require(r.status == 0, "\(r.stderr)")
        let takes = try #require((try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])?["takes"] as? [[String: Any]])
        try #require(takes.count == 6)
        #expect(try await studio.run("push", "--machine", "studio").status == 0)
        let start = try await TimelineExportEndToEndTests.seconds(takes[0])
        // 1.5 s to 3.5 s into the run: takes 2, 3 and 4.
        let (from, to) = (try await TimelineExportEndToEndTests.iso(start + 1.5), try await TimelineExportEndToEndTests.iso(start + 3.5))

        let proxy = try await FaultProxy.startAsync(upstream: server.port, plan: [])
        defer { proxy.stop() }
        let clip = folder.appendingPathComponent("clip.wav").path
        let e = try await office.run("fleet", "export", "--machine", "office", "studio/Logger", "--from", from, "--to", to, "-o", clip, "--json",
                                     "--set", "sync.s3.endpoint=\(proxy.endpoint)")
        #expect(e.status == 0, "\(e.stdout) \(e.stderr)")
        let audio = proxy.arrivals.filter { $0.method == "GET" && $0.path.contains(".wav") }
        #expect(audio.count == 3, "only the three takes the time spans are downloaded: \(audio.map(\.path))")
        #expect(Set(audio.map { ($0.path as NSString).lastPathComponent.replacingOccurrences(of: ".wav", with: "") })
                == Set(takes[1...3].compactMap { $0["id"] as? String }), "takes 2, 3 and 4: \(audio.map(\.path))")
        #expect(e.stderr.contains("3 takes of 6 span that time"), "\(e.stderr)")
        let report = try #require((try JSONSerialization.jsonObject(with: Data(e.stdout.utf8)) as? [[String: Any]])?.first, "\(e.stdout)")
        #expect(report["frames"] as? Int == 96_000)

        let own = folder.appendingPathComponent("own.wav").path
        let local = try await studio.run("export", "--machine", "studio", "--session", "Logger", "--from", from, "--to", to, "-o", own)
        #expect(local.status == 0, "\(local.stderr)")
        let same = try await CLIHarness.tool("python3", ["-c", "import sys, wave; a, b = (wave.open(p).readframes(10**9) for p in sys.argv[1:]); print(a == b, len(a))", clip, own])
        #expect(same.stdout.hasPrefix("True 384000"), "the clip equals the recorder's own export: \(same.stdout) \(same.stderr)")

        // Again: the takes are in the office's library already; nothing is downloaded.
        let before = proxy.arrivals.filter { $0.method == "GET" && $0.path.contains(".wav") }.count
        let again = try await office.run("fleet", "export", "--machine", "office", "studio/Logger", "--from", from, "--to", to, "-o", clip, "--force",
                                         "--set", "sync.s3.endpoint=\(proxy.endpoint)")
        #expect(again.status == 0 && again.stderr.contains("0 fetched"), "\(again.stderr)")
        #expect(proxy.arrivals.filter { $0.method == "GET" && $0.path.contains(".wav") }.count == before)
    }
}
