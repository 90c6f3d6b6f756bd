import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The unattended logger's takes (issue 38, points 2 and 3): named from the time each take
/// begins (`--name` with strftime conversions), and labelled with that time everywhere (list,
/// show, the BWF OriginationTime, ffprobe's creation_time), rounded, never a second early.
@Suite("takes named and dated by the time they begin", .endToEnd, .serialized)
struct LoggerNamesEndToEndTests {
    @Test("record --split 2s --split-align --name \"%Y-%m-%d %H.%M.%S\": each aligned take is named at its boundary, and list, show, bext and ffprobe all agree")
    func alignedNames() async throws {
        let cli = try CLIHarness()
        let r = try await cli.run("record", "-d", "5s", "--split", "2s", "--split-align", "--session", "Logger",
                                  "--name", "%Y-%m-%d %H.%M.%S", "--json")
        #expect(r.status == 0, "\(r.stderr)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        let takes = try #require(report["takes"] as? [[String: Any]])
        #expect(takes.count >= 3)
        let listed = try await cli.run("list", "Logger").stdout
        for (i, take) in takes.enumerated() {
            let name = try #require(take["name"] as? String)
            // "2026-11-29 15.00.04", maybe with " (2)" when the first take began in the same second.
            let stamp = String(name.prefix(19))
            #expect(stamp.range(of: #"^\d{4}-\d\d-\d\d \d\d\.\d\d\.\d\d$"#, options: .regularExpression) != nil, "\(name)")
            let time = stamp.suffix(8).replacingOccurrences(of: ".", with: ":")
            let details = try await cli.run("show", take["id"] as? String ?? "", "--json")
            let detail = try #require(try JSONSerialization.jsonObject(with: Data(details.stdout.utf8)) as? [String: Any])
            let broadcast = try #require(detail["broadcast"] as? [String: Any])
            #expect(broadcast["originationTime"] as? String == time, "\(name): \(broadcast)")
            #expect(broadcast["originationDate"] as? String == String(stamp.prefix(10)))
            #expect(listed.contains("\(String(stamp.prefix(10))) \(time)"), "list shows \(time) for \(name): \(listed)")
            let path = try #require(take["path"] as? String)
            let probed = try await CLIHarness.tool("ffprobe", ["-v", "quiet", "-show_entries", "format_tags=creation_time", "-of", "default=nw=1:nk=1", path])
            #expect(probed.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == time, "ffprobe: \(probed.stdout) for \(name)")
            // Takes after the first begin on the clock's 2-second boundaries, at their first frame.
            if i > 0 {
                #expect(Int(time.suffix(2))! % 2 == 0, "\(name) is not on a boundary")
                let shown = try await cli.run("show", take["id"] as? String ?? "")
                #expect(shown.stdout.contains("Began:     \(String(stamp.prefix(10))) \(time)."), "\(shown.stdout)")
            }
        }
    }

    @Test("a template names each take at its start, a name it makes twice gets (2); a % that begins no conversion is kept")
    func templates() async throws {
        let cli = try CLIHarness()
        for name in ["%H:%M", "%H:%M", "50% mix"] {
            let r = try await cli.run("record", "-d", "0.3s", "--session", "Names", "--name", name)
            #expect(r.status == 0, "\(name): \(r.stderr)")
            // Off a terminal too, the report says the format (a journal has nothing else).
            #expect(r.stdout.contains(", 48 kHz 2ch s16 wav"), "\(r.stdout)")
        }
        let names = try await cli.takes().compactMap { $0["name"] as? String }
        #expect(names.count == 3)
        #expect(names.contains("50% mix"))
        let timed = names.filter { $0 != "50% mix" }.sorted()
        #expect(timed.first?.range(of: #"^\d\d:\d\d$"#, options: .regularExpression) != nil, "\(names)")
        // The two made in the same minute, or across a minute's turn.
        #expect(timed.last == timed.first! + " (2)" || timed.last?.range(of: #"^\d\d:\d\d$"#, options: .regularExpression) != nil, "\(names)")
        #expect(!names.contains("%H:%M"))
    }
}

extension LoggerNamesEndToEndTests {
    @Test("on a terminal, -d and --until say when the run stops and how long that is, and the meter shows the length; an --until that passed today is tomorrow, said off a terminal too")
    func stopTimes() async throws {
        let cli = try CLIHarness()
        let screen = try await PickUpEndToEndTests.Screen(cli, ["record", "-d", "8"])
        let shown = try await screen.wait(for: "● REC")
        #expect(shown.contains("Stops at ") && shown.contains(", in 0:00:0"), "\(shown)")
        _ = try await CLIHarness.wait(timeout: 10) { await screen.text.contains(" of 0:00:08") }
        let meter = await screen.text
        #expect(meter.contains(" of 0:00:08"), "\(meter)")
        // A minute ago: tomorrow at that time, said at once, even into a pipe.
        let f = DateFormatter()
        f.dateFormat = "HH:mm:ss"
        let past = f.string(from: Date().addingTimeInterval(-60))
        let (p, _, err) = try cli.start(["record", "--until", past])
        _ = try await CLIHarness.wait(timeout: 15) { ((try? String(contentsOf: err, encoding: .utf8)) ?? "").contains("Stops at") }
        kill(p.processIdentifier, SIGTERM)
        try await CLIHarness.waitForExit(p)
        let said = try String(contentsOf: err, encoding: .utf8)
        #expect(said.contains("Stops at \(past) tomorrow, in 23:5"), "\(said)")
    }
}
