import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `record --split` and `--split-size`: a run of takes whose frames, joined in run order, are
/// exactly what the null backend's frame counter delivered; checked with sox, flac and metaflac.
@Suite("split runs end to end", .endToEnd, .serialized)
struct SplitEndToEndTests {
    /// Checks a run's takes (JSON, in run order): linked, consecutive, each file sound, and the
    /// counter continuous across every boundary. Returns the frames of the run.
    @discardableResult
    func checkRun(_ takes: [[String: Any]], encoding: String, sourceLocation: SourceLocation = #_sourceLocation) async throws -> Int {
        var offset = 0
        var runID: String?
        for (i, take) in takes.enumerated() {
            let run = try #require(take["run"] as? [String: Any], "take \(i + 1) has no run", sourceLocation: sourceLocation)
            if runID == nil { runID = run["id"] as? String }
            #expect(run["id"] as? String == runID, sourceLocation: sourceLocation)
            #expect(run["index"] as? Int == i + 1, sourceLocation: sourceLocation)
            #expect(run["offsetFrames"] as? Int == offset, "take \(i + 1) starts where the one before ended", sourceLocation: sourceLocation)
            #expect(run["began"] as? String == (i == 0 ? "start" : takes[i - 1]["run"].flatMap { ($0 as? [String: Any])?["ended"] as? String }),
                    sourceLocation: sourceLocation)
            let path = try #require(take["path"] as? String, sourceLocation: sourceLocation)
            let frames = try #require(take["frames"] as? Int, sourceLocation: sourceLocation)
            #expect(take["encoding"] as? String == encoding, sourceLocation: sourceLocation)
            if encoding == "flac" {
                #expect(try await CLIHarness.tool("flac", ["-t", "-s", path]).status == 0, sourceLocation: sourceLocation)
                let total = try await CLIHarness.tool("metaflac", ["--show-total-samples", path]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
                #expect(total == String(frames), sourceLocation: sourceLocation)
            }
            let soxi = try await CLIHarness.tool("soxi", ["-s", path]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(Int(soxi) == frames, "take \(i + 1): the file holds what the catalog says", sourceLocation: sourceLocation)
            #expect(try await CLIHarness.firstWrongCounterSample(path, from: offset * 2) == nil, "take \(i + 1): no frame lost or doubled",
                    sourceLocation: sourceLocation)
            offset += frames
        }
        return offset
    }

    static let cases: [(storage: String, encoding: String)] = [("directory", "wav"), ("directory", "flac"), ("bundle", "wav"), ("bundle", "flac")]

    @Test("--split 1s: takes of exactly 1 s, the last shorter, joined sample-exactly; every store and encoder", arguments: cases)
    func splitByTime(_ c: (storage: String, encoding: String)) async throws {
        let cli = try CLIHarness(storage: c.storage)
        let r = try await cli.run("record", "-d", "5.3s", "--split", "1s", "--json", "--set", "encoder.name=\(c.encoding)",
                                  "--set", "capture.null.signal=counter", "--set", "capture.null.paced=false", "--session", "Logger")
        #expect(r.status == 0, "\(r.stderr)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        let takes = try #require(report["takes"] as? [[String: Any]])
        #expect(takes.map { $0["frames"] as? Int } == [48_000, 48_000, 48_000, 48_000, 48_000, 14_400])
        #expect(takes.compactMap { ($0["run"] as? [String: Any])?["ended"] as? String }
                == ["split-time", "split-time", "split-time", "split-time", "split-time", "duration"])
        #expect(report["run"] as? String == (takes[0]["run"] as? [String: Any])?["id"] as? String)
        #expect((report["take"] as? [String: Any])?["id"] as? String == takes.last?["id"] as? String)
        #expect(try await checkRun(takes, encoding: c.encoding) == 254_400)
        // The library says the same as the report, after the process is gone.
        let listed = try await cli.listJSON().flatMap { $0["takes"] as? [[String: Any]] ?? [] }
        #expect(listed.map { $0["id"] as? String } == takes.map { $0["id"] as? String })
        #expect(listed.allSatisfy { $0["state"] as? String == "complete" })
        try await checkRun(listed, encoding: c.encoding)
    }

    @Test("--split-size: no file passes the size, each comes close to it, and the takes join sample-exactly", arguments: ["wav", "flac"])
    func splitBySize(_ encoding: String) async throws {
        let cli = try CLIHarness()
        // 12 s of 48 kHz stereo s16 is 2.3 MB raw: three takes under 1 MiB.
        let r = try await cli.run("record", "-d", "12s", "--split-size", "1MiB", "--json", "--set", "encoder.name=\(encoding)",
                                  "--set", "capture.null.signal=counter", "--set", "capture.null.paced=false")
        #expect(r.status == 0, "\(r.stderr)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        let takes = try #require(report["takes"] as? [[String: Any]])
        #expect(takes.count == 3)
        for take in takes {
            let bytes = try #require(take["bytes"] as? Int)
            #expect(bytes <= 1 << 20, "\(take["name"] ?? "") is \(bytes) bytes")
        }
        #expect(takes.dropLast().allSatisfy { ($0["run"] as? [String: Any])?["ended"] as? String == "split-size" })
        if encoding == "wav" {
            #expect(takes.dropLast().allSatisfy { ($0["bytes"] as? Int ?? 0) > (1 << 20) - 100_000 }, "each split comes close to the size")
        }
        #expect(try await checkRun(takes, encoding: encoding) == 576_000)
    }

    @Test("a run killed with SIGKILL keeps every finished take whole and joined; the current one is recovered; a take made ready for the next boundary is not left behind")
    func sigkill() async throws {
        let cli = try CLIHarness()
        let (p, _, _) = try cli.start(["record", "--split", "1s", "--set", "capture.null.signal=counter", "--session", "Killed"])
        try await Task.sleep(for: .seconds(3.6))
        kill(p.processIdentifier, SIGKILL)
        try await CLIHarness.waitForExit(p)
        let takes = try await cli.listJSON().flatMap { $0["takes"] as? [[String: Any]] ?? [] }
            .sorted { (($0["run"] as? [String: Any])?["index"] as? Int ?? 0) < (($1["run"] as? [String: Any])?["index"] as? Int ?? 0) }
        #expect(takes.count >= 3 && takes.count <= 5, "\(takes.count) takes")
        let finished = takes.filter { $0["state"] as? String == "complete" }
        #expect(finished.count >= 2)
        #expect(finished.allSatisfy { $0["frames"] as? Int == 48_000 })
        #expect(takes.last?["state"] as? String == "recovered")
        #expect(takes.dropLast().allSatisfy { $0["state"] as? String == "complete" })
        try await checkRun(takes, encoding: "wav")
        let folder = try #require((takes.first?["path"] as? String).map { URL(fileURLWithPath: $0).deletingLastPathComponent() })
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasPrefix(".") }
        #expect(leftovers.isEmpty, "\(leftovers)")
        #expect(try await cli.run("doctor").status == 0)
    }

    @Test("split flags are checked before anything is recorded, with what to type instead")
    func refusals() async throws {
        let cli = try CLIHarness()
        for (args, words) in [(["--split", "0.5s"], "at least 1 s"), (["--split-align"], "give --split too"),
                              (["--split-size", "100K"], "at least 1 MiB"), (["--split-size", "2 parsecs"], "not a size"),
                              (["--split", "1m", "-o", "/tmp/never-\(UUID().uuidString).wav"], "cannot be split")] {
            let r = try await cli.run(["record", "-d", "1s"] + args)
            #expect(r.status == 64, "\(args): \(r.status)")
            #expect(r.stderr.contains(words), "\(args): \(r.stderr)")
        }
        #expect(try await cli.listJSON().isEmpty)
    }

    @Test("show and list --json carry the run; text output names every take of the run")
    func reports() async throws {
        let cli = try CLIHarness()
        let r = try await cli.run("record", "-d", "2.5s", "--split", "1s", "--set", "capture.null.paced=false", "--session", "Text")
        #expect(r.status == 0)
        #expect(r.stdout.components(separatedBy: "\n").filter { $0.hasPrefix("Recorded Text/Take ") }.count == 3, "\(r.stdout)")
        #expect(r.stdout.contains("3 takes, 0:02.500 in all"), "\(r.stdout)")
        let show = try await cli.run("show", "Text/Take 2")
        #expect(show.stdout.contains("Run:       take 2 of run"), "\(show.stdout)")
        #expect(show.stdout.contains("from 0:01.000 (began: split-time, ended: split-time)"), "\(show.stdout)")
    }
}
