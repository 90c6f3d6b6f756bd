import Foundation
import Testing

/// `record --resume` on the null backend's injected device loss and return.
@Suite("resume end to end", .endToEnd, .serialized)
struct ResumeEndToEndTests {
    @Test("--resume: the take ends interrupted where the device went, the run waits and goes on in a new take; the frames are the device's; WAV and FLAC", arguments: ["wav", "flac"])
    func resume(_ encoding: String) async throws {
        let cli = try CLIHarness()
        let began = Date()
        let r = try await cli.run("record", "-d", "3s", "--resume", "--json", "--set", "encoder.name=\(encoding)", "--set", "capture.null.signal=counter",
                                  "--set", "capture.null.device-loss-at-frame=48000", "--set", "capture.null.device-back-after=1")
        let took = Date().timeIntervalSince(began)
        #expect(r.status == 4, "\(r.stderr)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        let takes = try #require(report["takes"] as? [[String: Any]])
        // -d is kept on the clock: 3 s after the audio began, less the second the device was
        // away (not 3 s of audio, which would end the run a second late).
        #expect(takes.first?["frames"] as? Int == 48_000)
        #expect((24_000..<96_000).contains(takes.last?["frames"] as? Int ?? 0), "\(takes.map { $0["frames"] ?? 0 })")
        #expect(took < 3 + 2.5, "the run of -d 3s with a 1 s outage took \(took) s")
        #expect(takes.map { $0["state"] as? String } == ["interrupted", "complete"])
        #expect(takes.map { ($0["run"] as? [String: Any])?["ended"] as? String } == ["device-lost", "duration"])
        #expect(takes.map { ($0["run"] as? [String: Any])?["offsetFrames"] as? Int } == [0, 48_000])
        let events = try #require(report["events"] as? [[String: Any]])
        #expect(events.count == 1 && events.first?["kind"] as? String == "device-lost")
        #expect((events.first?["seconds"] as? Double ?? 0) >= 1)
        #expect(r.stderr.contains("Waiting for the device to come back"), "\(r.stderr)")
        // Take 1 is the counter up to the loss; the device that came back starts its counter anew.
        for (take, first) in zip(takes, [0, 0]) {
            let path = try #require(take["path"] as? String)
            #expect(try await CLIHarness.firstWrongCounterSample(path, from: first) == nil)
        }
        #expect(try await cli.run("doctor").status == 0)
    }

    @Test("--resume with a device that never comes back: the run ends at its length, the take before is kept, exit 4")
    func neverBack() async throws {
        let cli = try CLIHarness()
        let r = try await cli.run("record", "-d", "2s", "--resume", "--json", "--set", "capture.null.device-loss-at-frame=24000")
        #expect(r.status == 4, "\(r.stderr)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        let take = try #require(report["take"] as? [String: Any])
        #expect(take["state"] as? String == "interrupted" && take["frames"] as? Int == 24_000)
        #expect((report["events"] as? [[String: Any]])?.count == 1)
        #expect(try await cli.run("doctor").status == 0, "the take made ready for the device's return is not left behind")
    }
}
