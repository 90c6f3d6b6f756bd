import Foundation
import Testing

/// A reader that goes away (`| head -c1`) never crashes a command: the output is dropped, the
/// command ends with its own status (docs/RELIABILITY.md, case 11).
@Suite("closed pipes end to end", .endToEnd)
struct PipeEndToEndTests {
    /// Runs `tapedeck ARGS | READER` in bash with SIGPIPE at its default action (as a login
    /// shell has it) and exits with tapedeck's own status.
    static func piped(into reader: String) -> [String] {
        ["/usr/bin/env", "--default-signal=PIPE", "bash", "-c", "\"$0\" \"$@\" | \(reader); exit ${PIPESTATUS[0]}"]
    }

    @Test("list, show, devices and backends piped into head -c1, 50 times each: never a crash, never a signal's status",
          arguments: [["list", "--json"], ["list"], ["show", "Session 1", "--json"], ["devices", "--json"], ["backends"], ["backends", "--json"]])
    func readersGoAway(_ args: [String]) async throws {
        var cli = try CLIHarness()
        for _ in 0..<3 { #expect(try await cli.run("record", "--duration", "0.1s").status == 0) }
        cli.launcher = Self.piped(into: "head -c1 >/dev/null")
        var statuses: [Int32: Int] = [:]
        for _ in 0..<50 {
            let r = try await cli.run(args)
            statuses[r.status, default: 0] += 1
            #expect(!r.stderr.contains("Fatal error") && !r.stderr.contains("crashed"), "\(args): \(r.stderr)")
        }
        #expect(statuses.keys.allSatisfy { $0 == 0 }, "\(args): exit statuses \(statuses)")
    }

    @Test("a reader that is gone before anything is written: the output is dropped quietly, status 0")
    func readerGoneFirst() async throws {
        var cli = try CLIHarness()
        for _ in 0..<3 { #expect(try await cli.run("record", "--duration", "0.1s").status == 0) }
        cli.launcher = ["/usr/bin/env", "--default-signal=PIPE", "bash", "-c", "\"$0\" \"$@\" | true; exit ${PIPESTATUS[0]}"]
        for args in [["list", "--json"], ["backends"], ["config", "show"]] {
            let r = try await cli.run(args)
            #expect(r.status == 0 && r.stderr.isEmpty, "\(args): \(r.status) \(r.stderr)")
        }
    }

    @Test("record --json into a pipe whose reader leaves after 1 s keeps the whole take and exits 0")
    func recordingIntoClosedPipe() async throws {
        var cli = try CLIHarness()
        cli.launcher = Self.piped(into: "sleep 1")
        let r = try await cli.run("record", "--duration", "2s", "--json", "--session", "Piped")
        #expect(r.status == 0, "\(r.stderr)")
        cli.launcher = []
        let takes = try await cli.takes()
        #expect(takes.count == 1)
        #expect(takes.first?["state"] as? String == "complete")
        #expect(takes.first?["frames"] as? Int == 96_000, "\(takes)")
    }
}

extension PipeEndToEndTests {
    @Test("record -o - into a file (> take.wav) leaves a WAV whose sizes are the real ones, as sox does; through a pipe with -d the header says the length; without one, or appended (>>), 'until the end'")
    func standardOutputIntoFile() async throws {
        var cli = try CLIHarness()
        let file = cli.library.deletingLastPathComponent().appendingPathComponent("stdout-\(UUID().uuidString).wav").path
        defer { try? FileManager.default.removeItem(atPath: file) }
        cli.launcher = ["bash", "-c", "\"$0\" \"$@\" > '\(file)'"]
        let r = try await cli.run("record", "-o", "-", "-d", "1s", "-r", "48000", "-c", "2")
        #expect(r.status == 0, "\(r.stderr)")
        let data = try Data(contentsOf: URL(fileURLWithPath: file))
        func u32(_ at: Int) -> UInt32 { data[at..<at + 4].enumerated().reduce(0) { $0 | UInt32($1.element) << (8 * UInt32($1.offset)) } }
        #expect(Int(u32(4)) == data.count - 8, "RIFF size \(u32(4)) for a file of \(data.count) bytes")
        #expect(Int(u32(40)) == data.count - 44, "data size \(u32(40)) for a file of \(data.count) bytes")
        let sox = try await CLIHarness.tool("soxi", ["-s", file])
        #expect(sox.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "48000", "\(sox.stdout) \(sox.stderr)")

        // Through a pipe, with -d: the header says the length it will have (as arecord -d).
        cli.launcher = ["bash", "-c", "\"$0\" \"$@\" | cat > '\(file)'"]
        #expect(try await cli.run("record", "-o", "-", "-d", "0.5s").status == 0)
        let piped = try Data(contentsOf: URL(fileURLWithPath: file))
        #expect(Int(piped[40..<44].enumerated().reduce(UInt32(0)) { $0 | UInt32($1.element) << (8 * UInt32($1.offset)) }) == piped.count - 44, "\(piped.count)")
        // Without a length, and appending (which cannot rewrite the header in place): "until the end".
        try Data().write(to: URL(fileURLWithPath: file))
        cli.launcher = ["bash", "-c", "\"$0\" \"$@\" >> '\(file)' & sleep 1; kill -TERM $!; wait"]
        _ = try await cli.run("record", "-o", "-")
        let appended = try Data(contentsOf: URL(fileURLWithPath: file))
        #expect(appended.count > 44 && appended[4..<8] == Data([0xFF, 0xFF, 0xFF, 0xFF]))
    }
}
