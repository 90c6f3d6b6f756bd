import Foundation
import TapedeckTesting
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Signed takes (`provenance: { sign: true }`): `keys init`, a take's chain written beside it as
/// it records, and `verify` saying intact, intact up to a checkpoint, altered, does not verify, or
/// unsigned, for takes in the library and for a file given with its chain.
@Suite("signed takes end to end", .endToEnd)
struct ProvenanceEndToEndTests {
    /// A harness whose config signs (every `signEvery` checkpoints), with a key made by `keys init`.
    static func signing(signEvery: Int = 10, storage: String = "directory") throws -> (CLIHarness, URL) {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-signed-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let config = folder.appendingPathComponent("tapedeck.yaml")
        let ci = try String(contentsOf: CLIHarness.packageRoot.appendingPathComponent("Configuration/ci.yaml"), encoding: .utf8)
        try (ci + "\nprovenance:\n  sign: true\n  key: \(folder.path)/signing-key\n  sign-every: \(signEvery)\n")
            .write(to: config, atomically: true, encoding: .utf8)
        var cli = CLIHarness(configFile: config)
        cli.extraEnvironment["XDG_CONFIG_HOME"] = folder.path
        return (cli, folder)
    }

    static func json(_ text: String) throws -> [[String: Any]] {
        try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [[String: Any]], "\(text)")
    }

    /// What scripts/verify-chain (Python's hashlib and `cryptography`, sox decoding) finds of the
    /// same file: the independent reader the verdicts are checked against.
    static func oracle(_ file: String, key: String? = nil) async throws -> [String: Any] {
        let script = CLIHarness.packageRoot.appendingPathComponent("scripts/verify-chain").path
        let r = try await CLIHarness.tool("python3", [script, file] + (key.map { [$0] } ?? []))
        return try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any], "\(r.stdout)\(r.stderr)")
    }

    /// `tapedeck verify --json` of `file` agrees with the oracle: the same result, checkpoint and range.
    static func agrees(_ cli: CLIHarness, _ file: String, key: String) async throws -> [String: Any] {
        let v = try await cli.run("verify", file, "--key", key, "--json")
        let ours = try #require(try json(v.stdout).first, "\(v.stdout)\(v.stderr)")
        let theirs = try await oracle(file, key: key)
        #expect(ours["result"] as? String == theirs["result"] as? String, "\(file): \(ours) vs \(theirs)")
        for k in ["provenCheckpoint", "signedFrames", "alteredFrames"] where theirs[k] != nil {
            #expect("\(ours[k] ?? "nil")" == "\(theirs[k] ?? "nil")", "\(file) \(k): \(ours) vs \(theirs)")
        }
        return ours
    }

    static func takePath(_ record: String) throws -> String {
        let report = try #require(try JSONSerialization.jsonObject(with: Data(record.utf8)) as? [String: Any])
        return try #require((report["take"] as? [String: Any])?["path"] as? String)
    }

    @Test("a recorded take is intact; one flipped bit is named by its frames; a cut file is intact up to its last whole checkpoint; a changed or replayed chain does not verify; another key is refused")
    func intactAlteredCut() async throws {
        let (cli, folder) = try Self.signing(signEvery: 2)
        let refused = try await cli.run("record", "-d", "1s", "--session", "Proof")
        #expect(refused.status == 66 && refused.stderr.contains("tapedeck keys init") && refused.stderr.contains("Nothing was recorded"), "\(refused.stderr)")
        let made = try await cli.run("keys", "init")
        try #require(made.status == 0, "\(made.stderr)")
        #expect(!made.stdout.contains("private") || made.stdout.contains("only you may read it"))
        let exported = try await cli.run("keys", "export")
        let publicKey = exported.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(publicKey.hasPrefix("ed25519:"), "\(exported.stdout)")
        let keyMode = try FileManager.default.attributesOfItem(atPath: folder.appendingPathComponent("signing-key").path)[.posixPermissions] as? Int
        #expect(keyMode == 0o600)
        #expect(try await cli.run("keys", "init").status == 73, "a key is never replaced")

        // Paced as a sound card: a checkpoint each second of the six, signed every second one.
        let r = try await cli.run("record", "-d", "6s", "--session", "Proof", "--json", "--set", "capture.null.signal=counter")
        try #require(r.status == 0, "\(r.stderr)")
        let audio = try Self.takePath(r.stdout)
        let chain = audio + ".chain"
        #expect(FileManager.default.fileExists(atPath: chain))
        let v = try await cli.run("verify", "last", "--key", publicKey, "--json")
        #expect(v.status == 0, "\(v.stdout)\(v.stderr)")
        let intact = try #require(try Self.json(v.stdout).first)
        #expect(intact["result"] as? String == "intact" && intact["keyGiven"] as? Bool == true && intact["fileFrames"] as? Int == 288_000, "\(intact)")
        let shown = try await cli.run("show", "last")
        #expect(shown.stdout.contains("Signed:    by ") && shown.stdout.split(separator: "\n").filter { $0.hasPrefix("Signed") }.allSatisfy { $0.count <= 80 }, "\(shown.stdout)")
        let checkpoints = try #require(intact["checkpoints"] as? Int)
        #expect(checkpoints >= 2)

        // A file and its chain, given to someone without the library.
        let given = folder.appendingPathComponent("given")
        try FileManager.default.createDirectory(at: given, withIntermediateDirectories: true)
        let copy = given.appendingPathComponent("take.wav").path
        try FileManager.default.copyItem(atPath: audio, toPath: copy)
        try FileManager.default.copyItem(atPath: chain, toPath: copy + ".chain")
        let keyFile = given.appendingPathComponent("studio.pub").path
        try (publicKey + "\n").write(toFile: keyFile, atomically: true, encoding: .utf8)
        var stranger = try CLIHarness()
        stranger.withoutConfig = true
        let alone = try await stranger.run("verify", copy, "--key", keyFile)
        #expect(alone.status == 0 && alone.stdout.contains("intact"), "\(alone.stdout)\(alone.stderr)")
        #expect(try await Self.agrees(stranger, copy, key: keyFile)["result"] as? String == "intact")

        // One bit flipped 2.5 s in: the checkpoint holding that frame is named.
        let flipped = given.appendingPathComponent("flipped.wav").path
        var bytes = try Data(contentsOf: URL(fileURLWithPath: copy))
        let dataStart = try #require(bytes.range(of: Data("data".utf8))).upperBound + 4
        let frame = 120_000
        bytes[dataStart + frame * 4] ^= 0x01
        try bytes.write(to: URL(fileURLWithPath: flipped))
        try FileManager.default.copyItem(atPath: chain, toPath: flipped + ".chain")
        let a = try await stranger.run("verify", flipped, "--key", keyFile, "--json")
        #expect(a.status == 65, "\(a.stdout)")
        let altered = try #require(try Self.json(a.stdout).first)
        let range = try #require(altered["alteredFrames"] as? [Int])
        #expect(altered["result"] as? String == "altered" && range[0] <= frame && frame < range[1] && range[1] - range[0] <= 96_000, "\(altered)")
        _ = try await Self.agrees(stranger, flipped, key: keyFile)

        // The file cut 3.3 s in: proven up to the last signed checkpoint it still holds whole.
        let cut = given.appendingPathComponent("cut.wav").path
        let original = try Data(contentsOf: URL(fileURLWithPath: copy))
        try original.prefix(dataStart + 158_400 * 4).write(to: URL(fileURLWithPath: cut))
        try FileManager.default.copyItem(atPath: chain, toPath: cut + ".chain")
        let c = try await stranger.run("verify", cut, "--key", keyFile, "--json")
        #expect(c.status == 1, "\(c.stdout)\(c.stderr)")
        let partial = try #require(try Self.json(c.stdout).first)
        #expect(partial["result"] as? String == "intact-up-to" && (partial["signedFrames"] as? Int ?? .max) <= 158_400
                && (partial["provenCheckpoint"] as? Int ?? 0) >= 1, "\(partial)")
        _ = try await Self.agrees(stranger, cut, key: keyFile)
        let cutText = try await stranger.run("verify", cut, "--key", keyFile)
        #expect(cutText.stdout.contains("cut short") && !cutText.stdout.contains("added"), "\(cutText.stdout)")

        // The chain changed (one hex digit of a hash), or an old signature replayed at its end.
        let text = try String(contentsOfFile: chain, encoding: .utf8)
        let changed = given.appendingPathComponent("changed.wav").path
        try FileManager.default.copyItem(atPath: copy, toPath: changed)
        var edited = text.split(separator: "\n").map(String.init)
        if let i = edited.firstIndex(where: { $0.contains("\"type\":\"checkpoint\"") }), let r = edited[i].range(of: "\"hash\":\"") {
            let digit = edited[i][r.upperBound]
            edited[i].replaceSubrange(r.upperBound...r.upperBound, with: digit == "0" ? "1" : "0")
        }
        try (edited.joined(separator: "\n") + "\n").write(toFile: changed + ".chain", atomically: true, encoding: .utf8)
        let b = try await stranger.run("verify", changed, "--key", keyFile)
        #expect(b.status == 65 && b.stdout.contains("does not verify"), "\(b.stdout)")
        _ = try await Self.agrees(stranger, changed, key: keyFile)
        let replayed = given.appendingPathComponent("replayed.wav").path
        try FileManager.default.copyItem(atPath: copy, toPath: replayed)
        let signatures = text.split(separator: "\n").filter { $0.contains("\"type\":\"signature\"") }
        try (text + "\(signatures.first ?? "")\n").write(toFile: replayed + ".chain", atomically: true, encoding: .utf8)
        let p = try await stranger.run("verify", replayed, "--key", keyFile)
        #expect(p.status == 65 && p.stdout.contains("does not verify"), "\(p.stdout)")
        _ = try await Self.agrees(stranger, replayed, key: keyFile)

        // Another machine's key.
        let (other, _) = try Self.signing()
        #expect(try await other.run("keys", "init").status == 0)
        let otherKey = try await other.run("keys", "export").stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let o = try await stranger.run("verify", copy, "--key", otherKey)
        #expect(o.status == 65 && o.stdout.contains("not the one given"), "\(o.stdout)")

        // An unsigned file: exit 2.
        let plain = given.appendingPathComponent("plain.wav").path
        try FileManager.default.copyItem(atPath: copy, toPath: plain)
        let u = try await stranger.run("verify", plain)
        #expect(u.status == 2 && u.stdout.contains("unsigned"), "\(u.stdout)")

        // The library keeps the chain with its take: doctor finds nothing, delete removes both.
        let doctor = try await cli.run("doctor")
        #expect(doctor.status == 0, "\(doctor.stdout)\(doctor.stderr)")
        #expect(try await cli.run("delete", "last", "--yes").status == 0)
        #expect(!FileManager.default.fileExists(atPath: chain) && !FileManager.default.fileExists(atPath: audio))
    }

    @Test("an export of a signed take carries a signed statement of what it was made from; a changed export or statement is caught")
    func exportStatement() async throws {
        let (cli, folder) = try Self.signing()
        #expect(try await cli.run("keys", "init").status == 0)
        let key = try await cli.run("keys", "export").stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let r = try await cli.run("record", "-d", "2s", "--session", "News", "--json")
        try #require(r.status == 0, "\(r.stderr)")
        let takeID = try #require((try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any]).flatMap { $0["take"] as? [String: Any] }?["id"] as? String)
        let out = folder.appendingPathComponent("out")
        try FileManager.default.createDirectory(at: out, withIntermediateDirectories: true)
        let e = try await cli.run("export", "last", "--format", "mp3", "-o", out.path, "--json")
        try #require(e.status == 0, "\(e.stderr)")
        let report = try #require(try Self.json(e.stdout).first)
        let mp3 = try #require(report["output"] as? String)
        let statement = try #require(report["statement"] as? String, "\(report)")
        #expect(statement == mp3 + ".statement" && FileManager.default.fileExists(atPath: statement))
        var stranger = try CLIHarness()
        stranger.withoutConfig = true
        let v = try await stranger.run("verify", mp3, "--key", key, "--json")
        #expect(v.status == 0, "\(v.stdout)\(v.stderr)")
        let verdict = try #require(try Self.json(v.stdout).first)
        let sources = try #require(verdict["exportedFrom"] as? [[String: Any]])
        #expect(verdict["result"] as? String == "exported" && sources.first?["take"] as? String == takeID && sources.first?["frames"] as? Int == 96_000, "\(verdict)")
        // The take itself, against the same key.
        #expect(try await cli.run("verify", "last", "--key", key).status == 0)
        // The export changed after the statement: caught.
        var bytes = try Data(contentsOf: URL(fileURLWithPath: mp3))
        bytes[bytes.count / 2] ^= 0x10
        try bytes.write(to: URL(fileURLWithPath: mp3))
        let changed = try await stranger.run("verify", mp3, "--key", key, "--json")
        #expect(changed.status == 65 && changed.stdout.contains("\"result\" : \"altered\""), "\(changed.stdout)")
        // The statement edited to name the changed bytes: its signature fails.
        let sha = try await CLIHarness.tool("sha256sum", [mp3])
        var text = try String(contentsOfFile: statement, encoding: .utf8)
        let old = try #require(text.range(of: "\"sha256\" : \"")).upperBound
        text.replaceSubrange(old..<text.index(old, offsetBy: 64), with: String(sha.stdout.prefix(64)))
        try text.write(toFile: statement, atomically: true, encoding: .utf8)
        let forged = try await stranger.run("verify", mp3, "--key", key)
        #expect(forged.status == 65 && forged.stdout.contains("signature does not verify"), "\(forged.stdout)")

        // The take's own audio changed in the library: an export of it gets no statement, and says why.
        let takeFile = try Self.takePath(r.stdout)
        var takeBytes = try Data(contentsOf: URL(fileURLWithPath: takeFile))
        takeBytes[takeBytes.count - 100] ^= 0x01
        try takeBytes.write(to: URL(fileURLWithPath: takeFile))
        let again = try await cli.run("export", "last", "--format", "flac", "-o", out.path, "--json")
        #expect(again.status == 0 && again.stderr.contains("no statement was signed"), "\(again.stderr)")
        #expect(try Self.json(again.stdout).first?["statement"] == nil)

        // A recording to a file outside the library is signed too; to stdout it cannot be, and is refused.
        let file = out.appendingPathComponent("direct.wav").path
        #expect(try await cli.run("record", "-d", "1s", "-o", file).status == 0)
        #expect(try await stranger.run("verify", file, "--key", key).status == 0)
        let piped = try await cli.run("record", "-d", "1s", "-o", "-")
        #expect(piped.status == 64 && piped.stderr.contains("provenance.sign=false"), "\(piped.stderr)")
    }

    @Test("a signed take's bundle copied with cp -r to another machine's library verifies there")
    func bundleTravels() async throws {
        var (cli, _) = try Self.signing()
        cli.extraEnvironment["TAPEDECK_STORAGE_BACKEND"] = "bundle"
        cli.extraEnvironment["TAPEDECK_STORAGE_BUNDLE_PATH"] = cli.library.path
        #expect(try await cli.run("keys", "init").status == 0)
        let key = try await cli.run("keys", "export").stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let r = try await cli.run("record", "-d", "2s", "--session", "Road")
        try #require(r.status == 0, "\(r.stderr)")
        let bundle = try #require(try FileManager.default.contentsOfDirectory(atPath: cli.library.path).first { $0.hasSuffix(".tapedeck") })
        let elsewhere = try CLIHarness(storage: "bundle")
        try FileManager.default.createDirectory(at: elsewhere.library, withIntermediateDirectories: true)
        #expect(try await CLIHarness.tool("cp", ["-r", cli.library.appendingPathComponent(bundle).path, elsewhere.library.path + "/"]).status == 0)
        let v = try await elsewhere.run("verify", "Road/Take 1", "--key", key)
        #expect(v.status == 0 && v.stdout.contains("intact"), "\(v.stdout)\(v.stderr)")
        #expect(try await elsewhere.run("doctor").status == 0, "the chain is its take's, not a stray file")
    }

    @Test("killed while recording: the recovered take is intact up to its last signed checkpoint, never altered", arguments: ["wav", "flac"])
    func killed(_ encoder: String) async throws {
        let (cli, _) = try Self.signing(signEvery: 2)
        #expect(try await cli.run("keys", "init").status == 0)
        let (p, _, _) = try cli.start(["record", "--session", "Killed", "--set", "encoder.name=\(encoder)", "--set", "capture.null.signal=counter"])
        // Past the second signature (every 2 checkpoints of 1 s), with room for a slow start.
        try await Task.sleep(for: .seconds(7))
        kill(p.processIdentifier, SIGKILL)
        p.waitUntilExit()
        let v = try await cli.run("verify", "last", "--json")
        #expect(v.stderr.contains("Recovered take"), "\(v.stderr)")
        #expect(v.status == 1, "\(v.stdout)\(v.stderr)")
        let report = try #require(try Self.json(v.stdout).first)
        let chain = try String(contentsOfFile: try #require(report["chain"] as? String), encoding: .utf8)
        let lastSigned = chain.split(separator: "\n").filter { $0.contains("\"type\":\"signature\"") }.compactMap { line -> Int? in
            guard let r = line.range(of: "\"k\":") else { return nil }
            return Int(line[r.upperBound...].prefix { $0.isNumber })
        }.max()
        #expect(report["result"] as? String == "intact-up-to" && report["provenCheckpoint"] as? Int == lastSigned && (lastSigned ?? 0) >= 1, "\(report)\n\(chain)")
        #expect(report["finished"] as? Bool == false)
        let theirs = try await Self.oracle(try #require(report["file"] as? String))
        #expect(theirs["result"] as? String == "intact-up-to" && theirs["provenCheckpoint"] as? Int == lastSigned, "\(theirs)")
    }
}

/// A signed take pushed to a real S3 server (rclone serve s3) and pulled by another machine:
/// the chain goes with it, named in the manifest, and the copy verifies as the original does.
@Suite("signed takes across machines", .endToEnd, .serialized)
struct ProvenanceFleetEndToEndTests {
    @Test("push sends the chain beside the audio and names it in the manifest; fleet pull brings it back and the copy verifies intact with the studio's key")
    func pushAndPull() async throws {
        let server = try await S3Server.startAsync(.rclone)
        defer { server.remove() }
        let (folder, file) = try FleetEndToEndTests.workspace(server)
        defer { try? FileManager.default.removeItem(at: folder) }
        var yaml = try String(contentsOf: file, encoding: .utf8)
        yaml = yaml.replacingOccurrences(of: "studio: {metadata: {tape: studio-a}}",
                                         with: "studio: {metadata: {tape: studio-a}, provenance: {sign: true, key: \"\(folder.path)/studio-key\"}}")
        try yaml.write(to: file, atomically: true, encoding: .utf8)
        let studio = FleetEndToEndTests.machine(file, server, folder: folder, name: "studio")
        let office = FleetEndToEndTests.machine(file, server, folder: folder, name: "office")
        #expect(try await studio.run("keys", "init", "--machine", "studio").status == 0)
        let key = try await studio.run("keys", "export", "--machine", "studio").stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let r = try await studio.run("record", "--machine", "studio", "--session", "Signed", "-d", "3", "--set", "capture.null.paced=true")
        try #require(r.status == 0, "\(r.stderr)")
        let push = try await studio.run("push", "--machine", "studio")
        #expect(push.status == 0, "\(push.stderr)")
        // On the server: the chain beside the audio, and the manifest naming it.
        let objects = server.dataDirectory.appendingPathComponent(server.bucket).appendingPathComponent("fleet/studio")
        let names = FileManager.default.enumerator(atPath: objects.path)?.allObjects as? [String] ?? []
        let manifestName = try #require(names.first { $0.hasSuffix(".json") })
        let manifest = try String(contentsOf: objects.appendingPathComponent(manifestName), encoding: .utf8)
        #expect(names.contains { $0.hasSuffix(".wav.chain") } && manifest.contains("\"chain\""), "\(names) \(manifest)")

        let pulled = try await office.run("fleet", "pull", "--machine", "office", "studio/Signed")
        #expect(pulled.status == 0 && !pulled.stderr.contains("does not prove"), "\(pulled.stdout)\(pulled.stderr)")
        let v = try await office.run("verify", "last", "--machine", "office", "--key", key, "--json")
        #expect(v.status == 0 && v.stdout.contains("\"result\" : \"intact\""), "\(v.stdout)\(v.stderr)")
        let doctor = try await office.run("fleet", "doctor", "--machine", "office")
        #expect(doctor.status == 0 && doctor.stdout.contains("no problems"), "\(doctor.stdout)\(doctor.stderr)")

        // Someone with write access changes the audio on the server and its manifest to match:
        // the pull's own checks pass, the chain does not.
        let audioName = try #require(names.first { $0.hasSuffix(".wav") })
        let fix = try await CLIHarness.tool("python3", ["-c", """
            import hashlib, json, sys
            audio, manifest = sys.argv[1], sys.argv[2]
            data = bytearray(open(audio, "rb").read())
            data[data.index(b"data") + 8 + 40000] ^= 1
            open(audio, "wb").write(data)
            m = json.load(open(manifest))
            m["audio"]["sha256"] = hashlib.sha256(data).hexdigest()
            json.dump(m, open(manifest, "w"), indent=2, sort_keys=True)
            """, objects.appendingPathComponent(audioName).path, objects.appendingPathComponent(manifestName).path])
        try #require(fix.status == 0, "\(fix.stderr)")
        let laptop = FleetEndToEndTests.machine(file, server, folder: folder, name: "laptop")
        let tampered = try await laptop.run("fleet", "pull", "--machine", "laptop", "studio/Signed")
        #expect(tampered.stderr.contains("does not prove") && tampered.stderr.contains("differs from what was signed"), "\(tampered.stdout)\(tampered.stderr)")
        #expect(try await laptop.run("verify", "last", "--machine", "laptop", "--key", key).status == 65)

        // The chain gone from the server: fleet doctor says so.
        let chainName = try #require(names.first { $0.hasSuffix(".wav.chain") })
        // Through the S3 API (the server caches its folder listings).
        let removed = try await CLIHarness.tool("python3", ["-c", """
            import boto3, sys
            s3 = boto3.client("s3", endpoint_url=sys.argv[1], aws_access_key_id=sys.argv[2], aws_secret_access_key=sys.argv[3], region_name="us-east-1")
            s3.delete_object(Bucket=sys.argv[4], Key=sys.argv[5])
            """, server.endpoint, server.accessKeyID, server.credentialEnvironment["AWS_SECRET_ACCESS_KEY"] ?? "", server.bucket, "fleet/studio/" + chainName])
        try #require(removed.status == 0, "\(removed.stderr)")
        let missing = try await office.run("fleet", "doctor", "--machine", "office")
        #expect(missing.status != 0 && missing.stdout.contains("signed chain") && missing.stdout.contains("is missing"), "\(missing.stdout)\(missing.stderr)")
    }
}
