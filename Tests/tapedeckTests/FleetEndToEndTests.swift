import Foundation
import TapedeckTesting
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `push` and `fleet` against real S3 servers started for each test (rclone serve s3, moto):
/// several machines' libraries, one bucket.
@Suite("many machines end to end", .endToEnd, .serialized)
struct FleetEndToEndTests {
    /// A fleet file: the null backend unpaced, the server as `sync:`, three machines.
    static func fleetFile(_ server: S3Server, in folder: URL, prefix: String = "fleet") throws -> URL {
        let yaml = """
            capture: {backend: null, null: {paced: false, signal: noise}}
            format: {sample-rate: 48000, channels: 2, sample-format: s16}
            encoder: {name: wav}
            storage: {backend: directory}
            sync:
              backend: s3
              s3: {endpoint: "\(server.endpoint)", bucket: \(server.bucket), prefix: "\(prefix)", path-style: true, part-size-mib: 5}
            machines:
              studio: {metadata: {tape: studio-a}}
              laptop: {encoder: {name: flac}}
              office: {metadata: {tape: office}}
              field: {format: {channels: 1}}
            """
        let url = folder.appendingPathComponent("fleet.yaml")
        try yaml.write(to: url, atomically: true, encoding: .utf8)
        return url
    }

    /// A temporary folder (the caller removes it) holding a fleet file for `server`.
    static func workspace(_ server: S3Server, prefix: String = "fleet") throws -> (folder: URL, file: URL) {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-fleet-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return (folder, try fleetFile(server, in: folder, prefix: prefix))
    }

    static func machine(_ file: URL, _ server: S3Server, folder: URL, name: String) -> CLIHarness {
        var cli = CLIHarness(configFile: file, library: folder.appendingPathComponent(name))
        cli.extraEnvironment = server.credentialEnvironment
        return cli
    }

    static func json(_ text: String) -> [[String: Any]] {
        (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [[String: Any]] ?? []
    }

    static func sha256(_ path: String) async throws -> String {
        let r = try await CLIHarness.tool("sha256sum", [path])
        return String(r.stdout.prefix(64))
    }

    /// ``sha256(_:)`` of each file, one after the other.
    static func sha256s(_ paths: [String]) async throws -> Set<String> {
        var sums = Set<String>()
        for path in paths { sums.insert(try await sha256(path)) }
        return sums
    }

    @Test("two machines push, a third lists both and pulls a session back bit for bit", arguments: S3Server.Kind.allCases)
    func twoMachinesAndAThird(_ kind: S3Server.Kind) async throws {
        let server = try await S3Server.startAsync(kind)
        defer { server.remove() }
        let (folder, file) = try Self.workspace(server)
        defer { try? FileManager.default.removeItem(at: folder) }
        let studio = Self.machine(file, server, folder: folder, name: "studio")
        let laptop = Self.machine(file, server, folder: folder, name: "laptop")
        let office = Self.machine(file, server, folder: folder, name: "office")

        // A 70 s take (13 MB: three parts of 5 MiB) and a short one on the studio; one on the laptop.
        for (cli, machine, args) in [(studio, "studio", ["--session", "Concert", "-d", "70"]), (studio, "studio", ["--session", "Concert", "-d", "2"]),
                                     (laptop, "laptop", ["--session", "Field", "-d", "3"])] {
            let r = try await cli.run(["record", "--machine", machine] + args)
            #expect(r.status == 0, "\(r.stderr)")
        }
        let dry = try await studio.run("push", "--machine", "studio", "--dry-run")
        #expect(dry.status == 0 && dry.stdout.contains("2 takes") && dry.stdout.contains("would go to"), "\(dry.stdout) \(dry.stderr)")
        for (cli, machine, count) in [(studio, "studio", 2), (laptop, "laptop", 1)] {
            let r = try await cli.run("push", "--machine", machine, "--json")
            #expect(r.status == 0, "\(r.stderr)")
            let results = Self.json(r.stdout)
            #expect(results.count == count && results.allSatisfy { $0["result"] as? String == "uploaded" }, "\(r.stdout)")
            // Nothing is sent again.
            let again = try await cli.run("push", "--machine", machine)
            #expect(again.status == 0 && again.stdout.contains("nothing to push"), "\(again.stdout) \(again.stderr)")
        }

        let listed = try await office.run("fleet", "list", "--machine", "office", "--json")
        #expect(listed.status == 0, "\(listed.stderr)")
        let takes = Self.json(listed.stdout)
        #expect(Set(takes.compactMap { $0["machine"] as? String }) == ["studio", "laptop"], "\(listed.stdout)")
        #expect(takes.count == 3 && takes.allSatisfy { $0["audioPresent"] as? Bool == true })
        let text = try await office.run("fleet", "list", "--machine", "office")
        #expect(text.stdout.contains("studio/Concert") && text.stdout.contains("laptop/Field"), "\(text.stdout)")

        let pulled = try await office.run("fleet", "pull", "--machine", "office", "studio/Concert")
        #expect(pulled.status == 0, "\(pulled.stderr)")
        let originals = try await studio.takes().compactMap { $0["path"] as? String }.sorted { $0 < $1 }
        let copies = try await office.takes().compactMap { $0["path"] as? String }
        #expect(copies.count == 2)
        let originalSums = try await Self.sha256s(originals), copySums = try await Self.sha256s(copies)
        #expect(originalSums == copySums, "the pulled takes are the studio's, bit for bit")
        let officeTakes = try await office.takes()
        #expect(Set(officeTakes.compactMap { $0["name"] as? String }) == ["Take 1", "Take 2"])
        // The id `fleet list` shows (the studio's) names the office's copy too.
        let studioLong = try #require(takes.first { $0["machine"] as? String == "studio" && ($0["take"] as? String) == "Take 1" }?["takeID"] as? String, "\(listed.stdout)")
        let shown = try await office.run("show", String(studioLong.prefix(8)), "--json", "--machine", "office")
        #expect(shown.status == 0 && shown.stdout.contains("\"name\" : \"Take 1\""), "\(shown.stdout) \(shown.stderr)")
        // Pulled once: again skips; and the copies are not pushed as the office's own.
        let twice = try await office.run("fleet", "pull", "--machine", "office", "studio/Concert")
        #expect(twice.status == 0 && twice.stdout.contains("already in"), "\(twice.stdout) \(twice.stderr)")
        let officePush = try await office.run("push", "--machine", "office")
        #expect(officePush.status == 0 && officePush.stdout.contains("nothing to push"), "\(officePush.stdout) \(officePush.stderr)")

        let doctor = try await office.run("fleet", "doctor", "--machine", "office")
        #expect(doctor.status == 0 && doctor.stdout.contains("no problems"), "\(doctor.stdout) \(doctor.stderr)")
        if kind == .rclone {
            // The objects are plain files under the server's data folder: the audio is the take's.
            let object = server.dataDirectory.appendingPathComponent(server.bucket).appendingPathComponent("fleet/studio")
            let files = (FileManager.default.enumerator(atPath: object.path)?.allObjects as? [String] ?? []).filter { $0.hasSuffix(".wav") }
            let objectSums = try await Self.sha256s(files.map { object.appendingPathComponent($0).path })
            let studioSums = try await Self.sha256s(originals)
            #expect(objectSums == studioSums)
        }
    }

    @Test("push --watch sends takes as they finish and stops cleanly on Ctrl-C; keep-local deletes only verified takes")
    func watchAndRetention() async throws {
        let server = try await S3Server.startAsync(.rclone)
        defer { server.remove() }
        let (folder, file) = try Self.workspace(server)
        defer { try? FileManager.default.removeItem(at: folder) }
        let studio = Self.machine(file, server, folder: folder, name: "studio")
        let (watcher, out, err) = try studio.start(["push", "--machine", "studio", "--watch", "--interval", "1"])
        defer {
            if watcher.isRunning { kill(watcher.processIdentifier, SIGKILL) }
            try? FileManager.default.removeItem(at: out)
            try? FileManager.default.removeItem(at: err)
        }
        for i in 1...2 {
            #expect(try await studio.run("record", "--machine", "studio", "-d", "1", "--name", "w\(i)").status == 0)
        }
        func verified() -> Int {
            guard let data = FileManager.default.contents(atPath: studio.library.appendingPathComponent("uploads.json").path),
                  let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
                  let remotes = object["remotes"] as? [String: [String: [String: Any]]] else { return 0 }
            return remotes.values.flatMap(\.values).filter { $0["state"] as? String == "verified" }.count
        }
        #expect(try await CLIHarness.wait(timeout: 60) { verified() == 2 }, "the watcher verified both takes")
        kill(watcher.processIdentifier, SIGINT)
        try await CLIHarness.waitForExit(watcher, limit: 30)
        #expect(watcher.terminationStatus == 0, "\((try? String(contentsOf: err, encoding: .utf8)) ?? "")")
        let doctor = try await studio.run("doctor", "--machine", "studio")
        #expect(doctor.stdout.contains("2 verified, 0 pending"), "\(doctor.stdout)")

        // keep-local: a verified take older than the age goes; a take never pushed stays.
        #expect(try await studio.run("record", "--machine", "studio", "-d", "1", "--name", "kept").status == 0)
        try await Task.sleep(for: .seconds(2.5))
        let broken = try await studio.run("push", "--machine", "studio", "--set", "sync.keep-local=2s",
                                          "--set", "sync.s3.endpoint=http://127.0.0.1:\(try S3Server.freePort())")
        #expect(broken.status == 69, "\(broken.stderr)")
        #expect(try await studio.takes().count == 3, "nothing is deleted when the remote cannot confirm")
        // A pushed take noted since: the remote's manifest has the old notes, so it stays here.
        let noted = try #require(try await studio.takes().first { $0["name"] as? String != "kept" })
        let notedID = try #require(noted["id"] as? String)
        #expect(try await studio.run("note", notedID, "the mic was broken").status == 0)
        let pruned = try await studio.run("push", "--machine", "studio", "--set", "sync.keep-local=2s", "last")
        #expect(pruned.status == 0, "\(pruned.stderr)")
        #expect(pruned.stdout.contains("deleted locally"), "\(pruned.stdout)")
        #expect(pruned.stderr.contains("changed since it was pushed"), "\(pruned.stderr)")
        let left = try await studio.takes()
        #expect(left.map { $0["id"] as? String } == [notedID], "every other take is verified and older than 2 s: \(left.map { $0["name"] ?? "" })")
        #expect(left.first?["notes"] as? String == "the mic was broken")
        let listed = Self.json(try await studio.run("fleet", "list", "--machine", "studio", "--json").stdout)
        #expect(listed.count == 3, "the remote keeps every take")
    }

    @Test("a hostile bucket: damaged and absurd manifests are reported, never trusted; doctor --repair removes nothing Tapedeck did not send")
    func hostileBucket() async throws {
        let server = try await S3Server.startAsync(.rclone)
        defer { server.remove() }
        let (folder, file) = try Self.workspace(server)
        defer { try? FileManager.default.removeItem(at: folder) }
        let studio = Self.machine(file, server, folder: folder, name: "studio")
        #expect(try await studio.run("record", "--machine", "studio", "-d", "1").status == 0)
        #expect(try await studio.run("push", "--machine", "studio").status == 0)
        // rclone serves its folder: objects are written there behind its back, as another client would.
        let root = server.dataDirectory.appendingPathComponent(server.bucket).appendingPathComponent("fleet")
        let manifest = try #require(FileManager.default.enumerator(atPath: root.path)?.allObjects.compactMap { $0 as? String }.first { $0.hasSuffix(".json") })
        let good = try Data(contentsOf: root.appendingPathComponent(manifest))
        var object = try #require(try JSONSerialization.jsonObject(with: good) as? [String: Any])
        var take = try #require(object["take"] as? [String: Any])
        var format = try #require(take["format"] as? [String: Any])
        format["sampleRate"] = 0
        take["format"] = format
        take["state"] = "recording"
        let evilSession = UUID().uuidString.lowercased(), evilTake = UUID().uuidString.lowercased()
        take["id"] = evilTake
        take["sessionID"] = evilSession
        object["take"] = take
        object["machine"] = "evil"
        var session = try #require(object["session"] as? [String: Any])
        session["id"] = evilSession
        object["session"] = session
        var audio = try #require(object["audio"] as? [String: Any])
        audio["key"] = "evil/\(evilSession)/\(evilTake).wav"
        object["audio"] = audio
        let evil = root.appendingPathComponent("evil/\(evilSession)")
        try FileManager.default.createDirectory(at: evil, withIntermediateDirectories: true)
        try JSONSerialization.data(withJSONObject: object).write(to: evil.appendingPathComponent("\(evilTake).json"))
        try Data("{\"schema\": 1, \u{1B}[2J".utf8).write(to: evil.appendingPathComponent("\(UUID().uuidString.lowercased()).json"))
        // Stale: a Tapedeck-shaped audio object with no manifest (written behind the server's back,
        // so without Tapedeck's mark), and someone else's file, both a day old.
        let orphan = evil.appendingPathComponent("\(UUID().uuidString.lowercased()).wav")
        try Data(repeating: 1, count: 1000).write(to: orphan)
        let foreign = root.appendingPathComponent("backup.tar")
        try Data(repeating: 2, count: 1000).write(to: foreign)
        let old = Date().addingTimeInterval(-3 * 86_400)
        for url in [orphan, foreign] { try FileManager.default.setAttributes([.modificationDate: old], ofItemAtPath: url.path) }
        try await Task.sleep(for: .seconds(1.5))  // rclone's folder cache (--dir-cache-time 1s)

        let list = try await studio.run("fleet", "list", "--machine", "studio")
        #expect(list.status == 0 && list.stdout.contains("studio/") && !list.stdout.contains("evil/"), "\(list.stdout) \(list.stderr)")
        #expect(list.stderr.contains("is not a take Tapedeck pushed") && list.stderr.contains("not a Tapedeck manifest"), "\(list.stderr)")
        #expect(!list.stderr.contains("\u{1B}"), "no escape sequence reaches the terminal")
        let pull = try await studio.run("fleet", "pull", "--machine", "studio", "evil/\(evilSession)")
        #expect(pull.status == 66, "\(pull.stderr)")
        let doctor = try await studio.run("fleet", "doctor", "--machine", "studio")
        #expect(doctor.status == 1 && doctor.stdout.contains(orphan.lastPathComponent) && !doctor.stdout.contains("backup.tar"), "\(doctor.stdout) \(doctor.stderr)")
        let repair = try await studio.run("fleet", "doctor", "--machine", "studio", "--repair")
        #expect(repair.status == 1 && !repair.stdout.contains("(removed)") && repair.stdout.contains("left alone"), "\(repair.stdout) \(repair.stderr)")
        #expect(FileManager.default.fileExists(atPath: orphan.path), "audio Tapedeck did not send is never removed")
        #expect(FileManager.default.fileExists(atPath: foreign.path), "another application's object is left alone")
        #expect(try await studio.run("push", "--machine", "studio").stdout.contains("nothing to push"))
    }

    @Test("a take the remote holds other audio for is refused (exit 73), and nothing is overwritten")
    func conflict() async throws {
        let server = try await S3Server.startAsync(.moto)
        defer { server.remove() }
        let (folder, file) = try Self.workspace(server)
        defer { try? FileManager.default.removeItem(at: folder) }
        let studio = Self.machine(file, server, folder: folder, name: "studio")
        #expect(try await studio.run("record", "--machine", "studio", "-d", "1").status == 0)
        #expect(try await studio.run("push", "--machine", "studio").status == 0)
        // A copy of the library (same take ids) whose take's audio differs, pushed as the same machine.
        let copy = Self.machine(file, server, folder: folder, name: "copy")
        try FileManager.default.copyItem(at: studio.library, to: copy.library)
        try? FileManager.default.removeItem(at: copy.library.appendingPathComponent("uploads.json"))
        let path = try #require(try await copy.takes().first?["path"] as? String)
        let handle = try #require(FileHandle(forUpdatingAtPath: path))
        try handle.seek(toOffset: 1000)
        try handle.write(contentsOf: Data(repeating: 0x55, count: 64))
        try handle.close()
        let r = try await copy.run("push", "--machine", "studio")
        #expect(r.status == 73, "\(r.stdout) \(r.stderr)")
        #expect(r.stderr.contains("already holds other audio") && r.stderr.contains("--machine"), "\(r.stderr)")
        let listed = Self.json(try await studio.run("fleet", "list", "--machine", "studio", "--json").stdout)
        let original = try #require(try await studio.takes().first?["path"] as? String)
        let originalSum = try await Self.sha256(original)
        #expect(listed.first?["sha256"] as? String == originalSum, "the first push's audio stays")
    }

    @Test("no sync section, bad credentials, an unreachable server: each says what to do, with its exit status")
    func configurationErrors() async throws {
        let cli = try CLIHarness()
        let none = try await cli.run("push")
        #expect(none.status == 78 && none.stderr.contains("sync:") && none.stderr.contains("--set sync.backend="), "\(none.stderr)")
        let server = try await S3Server.startAsync(.rclone)
        defer { server.remove() }
        let (folder, file) = try Self.workspace(server)
        defer { try? FileManager.default.removeItem(at: folder) }
        var studio = Self.machine(file, server, folder: folder, name: "studio")
        #expect(try await studio.run("record", "--machine", "studio", "-d", "1").status == 0)
        #expect(try await studio.run("record", "--machine", "studio", "-d", "1").status == 0)
        let goodKeys = studio.extraEnvironment
        studio.extraEnvironment = [:]
        let noKeys = try await studio.run("push", "--machine", "studio")
        #expect(noKeys.status == 78 && noKeys.stderr.contains("AWS_ACCESS_KEY_ID") && noKeys.stderr.contains("credentials-file"), "\(noKeys.stderr)")
        studio.extraEnvironment = ["AWS_ACCESS_KEY_ID": server.accessKeyID, "AWS_SECRET_ACCESS_KEY": "wrong-secret-value"]
        let wrong = try await studio.run("push", "--machine", "studio")
        #expect(wrong.status == 78 && !wrong.stderr.contains("wrong-secret-value") && wrong.stderr.contains("credentials"), "\(wrong.stderr)")
        // Said once, not once per take: the first refusal stops the push.
        #expect(wrong.stderr.components(separatedBy: "refused to").count - 1 == 1, "\(wrong.stderr)")
        #expect(wrong.stdout.contains("1 not tried"), "\(wrong.stdout)")
        // A dry run asks the server too (as rclone sync --dry-run): wrong keys are found now.
        let dryWrong = try await studio.run("push", "--machine", "studio", "--dry-run")
        #expect(dryWrong.status == 78 && dryWrong.stderr.contains("credentials") && !dryWrong.stdout.contains("would go"), "\(dryWrong.stdout) \(dryWrong.stderr)")
        studio.extraEnvironment = goodKeys
        let dryGood = try await studio.run("push", "--machine", "studio", "--dry-run")
        #expect(dryGood.status == 0 && dryGood.stdout.contains("2 takes") && dryGood.stdout.contains("would go"), "\(dryGood.stdout) \(dryGood.stderr)")
        let dryAway = try await studio.run("push", "--machine", "studio", "--dry-run", "--set", "sync.s3.endpoint=http://127.0.0.1:\(try S3Server.freePort())")
        #expect(dryAway.status == 69 && dryAway.stderr.contains("connection refused"), "\(dryAway.stderr)")
        // A credentials file others may read is refused; chmod 600 makes it good.
        let credentials = folder.appendingPathComponent("credentials")
        try "[default]\naws_access_key_id = \(server.accessKeyID)\naws_secret_access_key = \(server.secretAccessKey)\n".write(to: credentials, atomically: true, encoding: .utf8)
        chmod(credentials.path, 0o644)
        studio.extraEnvironment = [:]
        let open = try await studio.run("push", "--machine", "studio", "--set", "sync.s3.credentials-file=\(credentials.path)")
        #expect(open.status == 78 && open.stderr.contains("chmod 600"), "\(open.stderr)")
        chmod(credentials.path, 0o600)
        let good = try await studio.run("push", "--machine", "studio", "--set", "sync.s3.credentials-file=\(credentials.path)")
        #expect(good.status == 0, "\(good.stderr)")
        let port = try S3Server.freePort()
        let away = try await studio.run("push", "--machine", "studio", "--set", "sync.s3.endpoint=http://127.0.0.1:\(port)", "--set", "sync.s3.credentials-file=\(credentials.path)")
        #expect(away.status == 69 && away.stderr.contains("connection refused") && away.stderr.contains("sync.s3.endpoint"), "\(away.stderr)")
        let list = try await studio.run("fleet", "list", "--machine", "studio", "--set", "sync.s3.endpoint=http://127.0.0.1:\(port)", "--set", "sync.s3.credentials-file=\(credentials.path)")
        #expect(list.status == 69 && list.stderr.contains("connection refused") && list.stderr.contains("sync.s3.endpoint"), "\(list.stderr)")
    }
}
