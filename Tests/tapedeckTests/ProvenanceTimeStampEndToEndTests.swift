import Foundation
import TapedeckCore
import TapedeckTesting
import Testing

/// Trusted time stamps of signed takes (`provenance.tsa`) against an RFC 3161 authority made with
/// `openssl ts` for the test: the token lands in the take's chain, `openssl ts -verify` accepts it
/// for the chain's head, `verify` reports its time and whether the authority is trusted; with the
/// authority down the request waits in the queue and `keys stamp` sends it later.
@Suite("signed takes' time stamps end to end", .endToEnd)
struct ProvenanceTimeStampEndToEndTests {
    static func stampLines(_ chain: String) throws -> [[String: Any]] {
        try String(contentsOfFile: chain, encoding: .utf8).split(separator: "\n").compactMap {
            try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }.filter { $0["type"] as? String == "timestamp" }
    }

    @Test("a take's end is time-stamped: openssl ts -verify accepts the token for the head, verify reports its time and authority; while the authority is down the request waits and `keys stamp` sends it; a changed token does not verify")
    func stamped() async throws {
        let tsa = try TimeStampAuthority()
        defer { tsa.close() }
        var (cli, folder) = try ProvenanceEndToEndTests.signing(signEvery: 2)
        defer { try? FileManager.default.removeItem(at: folder) }
        let config = folder.appendingPathComponent("tapedeck.yaml")
        try (try String(contentsOf: config, encoding: .utf8) + "  tsa: \(tsa.url)\n").write(to: config, atomically: true, encoding: .utf8)
        cli.extraEnvironment["XDG_STATE_HOME"] = folder.appendingPathComponent("state").path
        try #require(try await cli.run("keys", "init").status == 0)
        let began = Date().addingTimeInterval(-2)

        let r = try await cli.run("record", "-d", "3s", "--session", "Stamped", "--json", "--set", "capture.null.signal=counter")
        try #require(r.status == 0, "\(r.stderr)")
        let audio = try ProvenanceEndToEndTests.takePath(r.stdout)
        let stamps = try Self.stampLines(audio + ".chain")
        let chainText = (try? String(contentsOfFile: audio + ".chain", encoding: .utf8)) ?? ""
        try #require(stamps.count == 1, "\(chainText)\n\(r.stderr)")
        // openssl, on its own, accepts the stored token for the chain's last head.
        let tokenText = try #require(stamps[0]["token"] as? String)
        let token = try #require(Data(base64Encoded: tokenText))
        let head = try #require(stamps[0]["head"] as? String)
        let (status, said) = try tsa.opensslVerify(token: token, digest: head)
        #expect(status == 0 && said.contains("Verification: OK"), "\(said)")

        let v = try await cli.run("verify", "last", "--tsa-ca", tsa.caFile.path, "--json")
        #expect(v.status == 0, "\(v.stdout)\(v.stderr)")
        let report = try #require(try ProvenanceEndToEndTests.json(v.stdout).first)
        let reported = try #require((report["timestamps"] as? [[String: Any]])?.first, "\(report)")
        #expect(report["result"] as? String == "intact" && reported["trusted"] as? Bool == true
                && reported["checkpoint"] as? Int == report["checkpoints"] as? Int && reported["tsa"] as? String == tsa.url, "\(report)")
        let timeText = try #require(reported["time"] as? String)
        let time = try #require(UTCTimestamp.parse(timeText))
        #expect(time >= began && time <= Date().addingTimeInterval(2), "\(time)")
        // Without the authority's CA: still intact, its time said, the authority said not to be trusted.
        let untrusted = try await cli.run("verify", "last")
        #expect(untrusted.status == 0 && untrusted.stdout.contains("Time-stamped: its end") && untrusted.stdout.contains("--tsa-ca"), "\(untrusted.stdout)")
        // The independent reader agrees, openssl checking the token against the CA.
        let oracle = try await CLIHarness.tool("python3", [CLIHarness.packageRoot.appendingPathComponent("scripts/verify-chain").path, audio, "--tsa-ca", tsa.caFile.path])
        #expect(oracle.status == 0 && oracle.stdout.contains("\"timestamps\": [\(reported["checkpoint"] ?? 0)]"), "\(oracle.stdout)\(oracle.stderr)")

        // The authority down: the take is recorded and signed; its request waits, said with what to do.
        tsa.stop()
        let offline = try await cli.run("record", "-d", "1s", "--session", "Stamped", "--json")
        #expect(offline.status == 0 && offline.stderr.contains("waits in the queue") && offline.stderr.contains("tapedeck keys stamp"), "\(offline.stderr)")
        let later = try ProvenanceEndToEndTests.takePath(offline.stdout)
        #expect(try Self.stampLines(later + ".chain").isEmpty)
        let waiting = try await cli.run("verify", "last")
        #expect(waiting.status == 0 && waiting.stdout.contains("no time stamp yet"), "\(waiting.stdout)")
        let shown = try await cli.run("keys")
        #expect(shown.stdout.contains("1 time-stamp request waits"), "\(shown.stdout)")
        let refused = try await cli.run("keys", "stamp")
        #expect(refused.status == 69 && refused.stderr.contains("could not be reached"), "\(refused.stderr)")
        try tsa.start()
        let sent = try await cli.run("keys", "stamp")
        #expect(sent.status == 0 && sent.stdout.contains("Sent 1 time-stamp request"), "\(sent.stdout)\(sent.stderr)")
        #expect(try Self.stampLines(later + ".chain").count == 1)
        let now = try await cli.run("verify", "last", "--tsa-ca", tsa.caFile.path)
        #expect(now.status == 0 && now.stdout.contains("a trusted authority"), "\(now.stdout)")

        // `record -o FILE` stamps the file's chain too.
        let file = folder.appendingPathComponent("out.wav").path
        let o = try await cli.run("record", "-d", "1s", "-o", file)
        #expect(o.status == 0, "\(o.stderr)")
        #expect(try Self.stampLines(file + ".chain").count == 1)

        // A changed token (one character of it) or one moved from another take does not verify.
        var lines = try String(contentsOfFile: file + ".chain", encoding: .utf8).split(separator: "\n").map(String.init)
        let i = try #require(lines.lastIndex { $0.contains("\"type\":\"timestamp\"") })
        if let at = lines[i].range(of: "\"token\":\"") {
            let index = lines[i].index(at.upperBound, offsetBy: 300)
            lines[i].replaceSubrange(index...index, with: lines[i][index] == "A" ? "B" : "A")
        }
        try (lines.joined(separator: "\n") + "\n").write(toFile: file + ".chain", atomically: true, encoding: .utf8)
        let changed = try await cli.run("verify", file)
        #expect(changed.status == 65 && changed.stdout.contains("time stamp of checkpoint"), "\(changed.stdout)")
        lines[i] = try String(contentsOfFile: later + ".chain", encoding: .utf8).split(separator: "\n").last.map(String.init) ?? ""
        try (lines.joined(separator: "\n") + "\n").write(toFile: file + ".chain", atomically: true, encoding: .utf8)
        let moved = try await cli.run("verify", file)
        #expect(moved.status == 65 && moved.stdout.contains("time stamp of checkpoint"), "\(moved.stdout)")
    }

    @Test("a signed take says so in the library (tag SIGNED, not carried into exports): its chain deleted, it does not verify and `show` says the chain is missing; its chain and file cut back together are said to be cut after recording")
    func signedInTheLibrary() async throws {
        var (cli, folder) = try ProvenanceEndToEndTests.signing(signEvery: 1)
        defer { try? FileManager.default.removeItem(at: folder) }
        cli.extraEnvironment["XDG_STATE_HOME"] = folder.appendingPathComponent("state").path
        try #require(try await cli.run("keys", "init").status == 0)
        let r = try await cli.run("record", "-d", "3s", "--session", "Kept", "--json")
        try #require(r.status == 0, "\(r.stderr)")
        let audio = try ProvenanceEndToEndTests.takePath(r.stdout)
        let fingerprint = try await cli.run("keys").stdout.split(separator: "\n").first { $0.hasPrefix("Fingerprint:") }?.split(separator: " ").last.map(String.init)
        let listed = try await cli.run("list", "--json")
        #expect(listed.stdout.contains("\"SIGNED\"") && listed.stdout.contains(fingerprint ?? "?"), "\(listed.stdout)")
        let exported = folder.appendingPathComponent("out.flac").path
        #expect(try await cli.run("export", "last", "-o", exported).status == 0)
        let tags = try await CLIHarness.tool("ffprobe", ["-v", "error", "-show_entries", "format_tags", "-of", "json", exported])
        #expect(!tags.stdout.uppercased().contains("SIGNED"), "\(tags.stdout)")

        // The chain and the file cut back together, to the first second: said, not hidden.
        let chain = audio + ".chain"
        let whole = try String(contentsOfFile: chain, encoding: .utf8)
        let lines = whole.split(separator: "\n").map(String.init)
        let firstSignature = try #require(lines.firstIndex { $0.contains("\"type\":\"signature\"") })
        try (lines[...firstSignature].joined(separator: "\n") + "\n").write(toFile: chain, atomically: true, encoding: .utf8)
        let original = try Data(contentsOf: URL(fileURLWithPath: audio))
        let dataStart = try #require(original.range(of: Data("data".utf8))).upperBound + 4
        try original.prefix(dataStart + 48_000 * 4).write(to: URL(fileURLWithPath: audio))
        let cut = try await cli.run("verify", "last")
        #expect(cut.status == 1 && cut.stdout.contains("chain was cut back after recording"), "\(cut.stdout)")
        try whole.write(toFile: chain, atomically: true, encoding: .utf8)
        try original.write(to: URL(fileURLWithPath: audio))

        // The chain deleted: not "unsigned", but a signed take whose chain is missing.
        try FileManager.default.removeItem(atPath: chain)
        let missing = try await cli.run("verify", "last")
        #expect(missing.status == 65 && missing.stdout.contains("chain") && missing.stdout.contains("is missing"), "\(missing.stdout)")
        let shown = try await cli.run("show", "last")
        #expect(shown.stdout.contains("its chain is missing"), "\(shown.stdout)")
    }
}
