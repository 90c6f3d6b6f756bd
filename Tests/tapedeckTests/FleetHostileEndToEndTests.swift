import Foundation
import TapedeckTesting
import Testing

/// `fleet` against a hostile server and a hostile, shared bucket: a private `rclone serve s3`
/// whose objects are files the test writes behind its back, and a proxy (``FaultProxy``) in
/// front of it that plays listings that never end, bodies that never end, and old dates.
@Suite("fleet against hostile servers and buckets", .endToEnd, .serialized)
struct FleetHostileEndToEndTests {
    typealias Rule = FaultProxy.Rule

    static func uuid() -> String { UUID().uuidString.lowercased() }

    /// The bucket's folder on disk (rclone serves it).
    static func bucket(_ server: S3Server) -> URL { server.dataDirectory.appendingPathComponent(server.bucket) }

    /// Records a take on `cli` (machine `machine`) into `session` and pushes it.
    static func recordAndPush(_ cli: CLIHarness, machine: String, session: String, name: String? = nil) async throws {
        let r = try await cli.run(["record", "--machine", machine, "--session", session, "-d", "1"] + (name.map { ["--name", $0] } ?? []))
        #expect(r.status == 0, "\(r.stderr)")
        let p = try await cli.run("push", "--machine", machine)
        #expect(p.status == 0, "\(p.stderr)")
    }

    /// A private `rclone serve s3` and two machines sharing one config: `pusher` has recorded a
    /// take into `session` and pushed it; `puller` has nothing yet. Removed after `body`.
    static func withFleet(pushing pusher: String, session: String, puller: String,
                          _ body: (CLIHarness, CLIHarness, S3Server) async throws -> Void) async throws {
        let server = try await S3Server.startAsync(.rclone)
        defer { server.remove() }
        let (folder, file) = try FleetEndToEndTests.workspace(server)
        defer { try? FileManager.default.removeItem(at: folder) }
        let source = FleetEndToEndTests.machine(file, server, folder: folder, name: pusher)
        let target = FleetEndToEndTests.machine(file, server, folder: folder, name: puller)
        try await recordAndPush(source, machine: pusher, session: session)
        try await body(source, target, server)
    }

    /// The manifest (as JSON) and audio bytes of the one take `machine` pushed under `root`.
    static func pushed(under root: URL, machine: String) throws -> (manifest: [String: Any], audio: Data) {
        let folder = root.appendingPathComponent(machine)
        let name = try #require(FileManager.default.enumerator(atPath: folder.path)?.allObjects.compactMap { $0 as? String }.first { $0.hasSuffix(".json") })
        let manifest = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: folder.appendingPathComponent(name))) as? [String: Any])
        let key = try #require((manifest["audio"] as? [String: Any])?["key"] as? String)
        return (manifest, try Data(contentsOf: root.appendingPathComponent(key)))
    }

    /// Writes, behind the server's back, a take of `machine` in a new session `session`: the
    /// manifest `base` given new ids, changed by `change`, and `audio` as its audio object.
    static func forge(_ base: [String: Any], machine: String, session: String, audio: Data, extension ext: String = "wav", under root: URL,
                      change: (inout [String: Any]) -> Void = { _ in }) async throws {
        let (sid, tid) = (uuid(), uuid())
        var object = base
        var take = try #require(object["take"] as? [String: Any])
        take["id"] = tid
        take["sessionID"] = sid
        take["file"] = "001-take-\(tid.prefix(8)).\(ext)"
        var sessionSummary = try #require(object["session"] as? [String: Any])
        sessionSummary["id"] = sid
        sessionSummary["name"] = session
        object["take"] = take
        object["session"] = sessionSummary
        object["machine"] = machine
        let key = "\(machine)/\(sid)/\(tid).\(ext)"
        let digest = try await sha256(audio)
        let audioEntry: [String: Any] = ["key": key, "size": audio.count, "sha256": digest]
        object["audio"] = audioEntry
        change(&object)
        let folder = root.appendingPathComponent("\(machine)/\(sid)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try audio.write(to: root.appendingPathComponent(key))
        try JSONSerialization.data(withJSONObject: object).write(to: folder.appendingPathComponent("\(tid).json"))
        try await Task.sleep(for: .seconds(1.5))  // rclone's folder cache (--dir-cache-time 1s) then serves it
    }

    static func sha256(_ data: Data) async throws -> String {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("sha-\(uuid())")
        try data.write(to: url)
        defer { try? FileManager.default.removeItem(at: url) }
        return try await FleetEndToEndTests.sha256(url.path)
    }

    /// Runs `tapedeck ARGS` on `cli`, killing it (a recorded failure) after `limit` seconds: a
    /// command that would read a hostile server's answer forever must not hold the suite.
    static func run(_ cli: CLIHarness, _ args: [String], limit: Double = 30) async throws -> CLIHarness.Result {
        let (p, out, err) = try cli.start(args)
        try await CLIHarness.waitForExit(p, limit: limit)
        defer {
            try? FileManager.default.removeItem(at: out)
            try? FileManager.default.removeItem(at: err)
        }
        return CLIHarness.Result(status: p.terminationStatus, stdout: try String(contentsOf: out, encoding: .utf8),
                                 stderr: try String(contentsOf: err, encoding: .utf8))
    }

    /// The names of the sessions in `cli`'s library.
    static func sessions(_ cli: CLIHarness) async throws -> [String] {
        try await cli.listJSON().compactMap { $0["name"] as? String }
    }

    @Test("doctor --repair in a shared bucket (empty prefix): other programs' objects and audio Tapedeck did not send are left alone; its own stale audio goes")
    func sharedBucket() async throws {
        let server = try await S3Server.startAsync(.rclone)
        defer { server.remove() }
        let (folder, file) = try FleetEndToEndTests.workspace(server, prefix: "")
        defer { try? FileManager.default.removeItem(at: folder) }
        let studio = FleetEndToEndTests.machine(file, server, folder: folder, name: "studio")
        for name in ["kept", "orphaned"] {
            #expect(try await studio.run("record", "--machine", "studio", "-d", "1", "--name", name).status == 0)
        }
        #expect(try await studio.run("push", "--machine", "studio").status == 0)
        let bucket = Self.bucket(server)
        // One manifest goes, as if its push had stopped before writing it: its audio, which
        // Tapedeck sent, is an upload that did not finish.
        let listed = FleetEndToEndTests.json(try await studio.run("fleet", "list", "--machine", "studio", "--json").stdout)
        let audioKey = try #require(listed.first { $0["take"] as? String == "orphaned" }?["key"] as? String)
        try FileManager.default.removeItem(at: bucket.appendingPathComponent((audioKey as NSString).deletingPathExtension + ".json"))
        // Other programs' files, laid out as Tapedeck lays out its own, and an audio file of
        // Tapedeck's shape that Tapedeck did not send.
        let others = ["invoices/\(Self.uuid())/\(Self.uuid()).pdf", "backups/\(Self.uuid())/\(Self.uuid()).tar.gz",
                      "photos/\(Self.uuid())/\(Self.uuid()).jpg"]
        let unmarked = "studio/\(Self.uuid())/\(Self.uuid()).wav"
        for key in others + [unmarked] {
            let url = bucket.appendingPathComponent(key)
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try Data(repeating: 7, count: 1000).write(to: url)
        }
        try await Task.sleep(for: .seconds(1.5))  // rclone's folder cache (--dir-cache-time 1s)
        // Through the proxy every object and upload looks three days old: old enough to repair.
        let proxy = try await FaultProxy.startAsync(upstream: server.port, plan: [Rule(method: "GET", path: "list-type=2", times: 1000, action: .age),
                                                                 Rule(method: "GET", path: "?uploads", times: 1000, action: .age)])
        defer { proxy.stop() }
        let repair = try await studio.run("fleet", "doctor", "--machine", "studio", "--repair", "--set", "sync.s3.endpoint=\(proxy.endpoint)")
        #expect(repair.stdout.contains("\(audioKey): audio without a manifest") && repair.stdout.contains("(removed)"), "\(repair.stdout) \(repair.stderr)")
        #expect(!FileManager.default.fileExists(atPath: bucket.appendingPathComponent(audioKey).path), "Tapedeck's own stale audio is removed")
        #expect(repair.stdout.contains(unmarked) && repair.stdout.contains("left alone"), "\(repair.stdout)")
        #expect(FileManager.default.fileExists(atPath: bucket.appendingPathComponent(unmarked).path), "audio Tapedeck did not send stays")
        #expect(repair.status == 1, "a finding is left: \(repair.stdout)")
        #expect(repair.stdout.contains("3 other objects"), "\(repair.stdout)")
        for key in others {
            #expect(FileManager.default.fileExists(atPath: bucket.appendingPathComponent(key).path), "\(key) is another program's")
            #expect(!repair.stdout.contains(key), "\(key) is not Tapedeck's to judge: \(repair.stdout)")
        }
        let after = FleetEndToEndTests.json(try await studio.run("fleet", "list", "--machine", "studio", "--json").stdout)
        #expect(after.count == 1 && after.first?["take"] as? String == "kept" && after.first?["audioPresent"] as? Bool == true, "\(after)")
    }

    @Test("fleet pull stops as soon as the body passes the manifest's size: nothing kept, no session made")
    func endlessBody() async throws {
        try await Self.withFleet(pushing: "studio", session: "Concert", puller: "office") { studio, office, server in
            let proxy = try await FaultProxy.startAsync(upstream: server.port, plan: [Rule(method: "GET", path: ".wav", action: .endless)])
            defer { proxy.stop() }
            let start = Date()
            let r = try await Self.run(office, ["fleet", "pull", "--machine", "office", "studio/Concert", "--set", "sync.s3.endpoint=\(proxy.endpoint)"])
            #expect(r.status == 74 && r.stderr.contains("more than"), "\(r.stdout) \(r.stderr)")
            #expect(Date().timeIntervalSince(start) < 30, "the pull read on")
            await #expect(try Self.sessions(office).isEmpty, "no session is left behind")
            let left = (try? FileManager.default.subpathsOfDirectory(atPath: office.library.path)) ?? []
            #expect(!left.contains { $0.contains(".partial") }, "\(left)")
            // Straight from the server, the take comes.
            let good = try await office.run("fleet", "pull", "--machine", "office", "studio/Concert")
            #expect(good.status == 0 && good.stdout.contains("pulled"), "\(good.stderr)")
        }
    }

    @Test("fleet pull checks the library's free space first: a take that cannot fit is refused before a byte is fetched")
    func noRoom() async throws {
        try await Self.withFleet(pushing: "studio", session: "Concert", puller: "office") { studio, office, server in
            let root = Self.bucket(server).appendingPathComponent("fleet")
            let (manifest, audio) = try Self.pushed(under: root, machine: "studio")
            // A take of a pebibyte, by its manifest.
            try await Self.forge(manifest, machine: "big", session: "Huge", audio: audio, under: root) { object in
                var a = object["audio"] as? [String: Any] ?? [:]
                a["size"] = 1 << 50
                object["audio"] = a
            }
            let proxy = try await FaultProxy.startAsync(upstream: server.port, plan: [])
            defer { proxy.stop() }
            let r = try await office.run("fleet", "pull", "--machine", "office", "big/Huge", "--set", "sync.s3.endpoint=\(proxy.endpoint)")
            #expect(r.status == 74 && r.stderr.contains("free"), "\(r.stdout) \(r.stderr)")
            #expect(!proxy.arrivals.contains { $0.method == "GET" && $0.path.contains(".wav") }, "the audio was fetched: \(proxy.arrivals)")
            await #expect(try Self.sessions(office).isEmpty)
        }
    }

    @Test("\"already pulled\" compares ids and hashes: another machine's take with the same name, length and start is pulled")
    func samePropertiesOtherTake() async throws {
        try await Self.withFleet(pushing: "studio", session: "Concert", puller: "office") { studio, office, server in
            #expect(try await office.run("fleet", "pull", "--machine", "office", "studio/Concert").status == 0)
            // The laptop's take: the studio's name, length and start, other ids, other bytes.
            let root = Self.bucket(server).appendingPathComponent("fleet")
            let (manifest, audio) = try Self.pushed(under: root, machine: "studio")
            var other = audio
            other[other.count / 2] ^= 0x5A
            try await Self.forge(manifest, machine: "laptop", session: "Concert", audio: other, under: root)
            let r = try await office.run("fleet", "pull", "--machine", "office", "laptop/Concert")
            #expect(r.status == 0 && r.stdout.contains("pulled, SHA-256 checked") && !r.stdout.contains("already in"), "\(r.stdout) \(r.stderr)")
            #expect(try await office.takes().count == 2)
            let again = try await office.run("fleet", "pull", "--machine", "office", "studio/Concert")
            #expect(again.status == 0 && again.stdout.contains("already in"), "\(again.stdout) \(again.stderr)")
        }
    }

    @Test("a manifest saying wav over FLAC bytes is refused, and the pull leaves no session behind")
    func formatLie() async throws {
        try await Self.withFleet(pushing: "laptop", session: "Field", puller: "office") { laptop, office, server in
            let root = Self.bucket(server).appendingPathComponent("fleet")
            let (manifest, flac) = try Self.pushed(under: root, machine: "laptop")
            #expect(flac.prefix(4) == Data("fLaC".utf8))
            try await Self.forge(manifest, machine: "laptop", session: "Forged", audio: flac, under: root) { object in
                var take = object["take"] as? [String: Any] ?? [:]
                take["encoding"] = "wav"
                object["take"] = take
            }
            let r = try await office.run("fleet", "pull", "--machine", "office", "laptop/Forged")
            #expect(r.status == 74 && r.stderr.contains("flac"), "\(r.stdout) \(r.stderr)")
            await #expect(try Self.sessions(office).isEmpty, "the session made for the take is removed again")
        }
    }

    @Test("a take whose name a library refuses is refused before a session is made for it")
    func hostileName() async throws {
        try await Self.withFleet(pushing: "studio", session: "Concert", puller: "office") { studio, office, server in
            let root = Self.bucket(server).appendingPathComponent("fleet")
            let (manifest, audio) = try Self.pushed(under: root, machine: "studio")
            try await Self.forge(manifest, machine: "studio", session: "Hostile", audio: audio, under: root) { object in
                var take = object["take"] as? [String: Any] ?? [:]
                take["name"] = "\u{2003}\u{2003}"  // blank: no library keeps a take of that name
                object["take"] = take
            }
            let r = try await office.run("fleet", "pull", "--machine", "office", "studio/Hostile")
            #expect(r.status != 0, "\(r.stdout)")
            await #expect(try !Self.sessions(office).contains("Hostile"), "an empty session was left behind")
        }
    }

    @Test("a second fleet list reads only the manifests whose ETag changed; a damaged cache file is read from the remote again")
    func manifestCache() async throws {
        try await Self.withFleet(pushing: "studio", session: "Concert", puller: "office") { _, office, server in
            let root = Self.bucket(server).appendingPathComponent("fleet")
            let (manifest, audio) = try Self.pushed(under: root, machine: "studio")
            try await Self.forge(manifest, machine: "field", session: "Dawn", audio: audio, under: root)
            let proxy = try await FaultProxy.startAsync(upstream: server.port, plan: [])
            defer { proxy.stop() }
            let gets = { proxy.arrivals.filter { $0.method == "GET" && $0.path.contains(".json") }.count }
            func list() async throws -> String {
                let r = try await Self.run(office, ["fleet", "list", "--json", "--set", "sync.s3.endpoint=\(proxy.endpoint)"])
                #expect(r.status == 0, "\(r.stderr)")
                return r.stdout
            }
            let first = try await list()
            #expect(gets() == 2 && FleetEndToEndTests.json(first).count == 2, "\(first)")
            #expect(try await list() == first && gets() == 2, "nothing changed, nothing is read again")
            // The field take's manifest changes behind the server's back: its ETag with it.
            let field = root.appendingPathComponent("field")
            let file = try #require(FileManager.default.enumerator(atPath: field.path)?.allObjects.compactMap { $0 as? String }.first { $0.hasSuffix(".json") })
            let changed = try String(contentsOf: field.appendingPathComponent(file), encoding: .utf8).replacingOccurrences(of: "\"Dawn\"", with: "\"Dusk\"")
            try changed.write(to: field.appendingPathComponent(file), atomically: true, encoding: .utf8)
            try await Task.sleep(for: .seconds(1.5))  // rclone's folder cache
            let third = try await list()
            #expect(gets() == 3 && third.contains("Dusk") && !third.contains("Dawn"), "\(third)")
            // Damaged cache files are never trusted: both manifests come from the remote again.
            let cache = office.cacheHome.appendingPathComponent("tapedeck/manifests")
            let files = (FileManager.default.enumerator(atPath: cache.path)?.allObjects as? [String] ?? []).filter { $0.hasSuffix(".manifest") }
            #expect(files.count == 2, "\(files)")
            for name in files { try Data("tapedeck-manifest-cache 1\nnot a manifest".utf8).write(to: cache.appendingPathComponent(name)) }
            #expect(try await list() == third && gets() == 5)
        }
    }

    @Test("a server that repeats its continuation token: fleet list and doctor end with exit 69 naming the server")
    func endlessListing() async throws {
        let server = try await S3Server.startAsync(.rclone)
        defer { server.remove() }
        let (folder, file) = try FleetEndToEndTests.workspace(server)
        defer { try? FileManager.default.removeItem(at: folder) }
        let office = FleetEndToEndTests.machine(file, server, folder: folder, name: "office")
        let proxy = try await FaultProxy.startAsync(upstream: server.port, plan: [Rule(method: "GET", path: "list-type=2", times: 1000, action: .loop)])
        defer { proxy.stop() }
        for command in [["fleet", "list"], ["fleet", "doctor"]] {
            let start = Date()
            let r = try await Self.run(office, command + ["--machine", "office", "--set", "sync.s3.endpoint=\(proxy.endpoint)"])
            #expect(r.status == 69 && r.stderr.contains(proxy.endpoint), "\(command): \(r.stdout) \(r.stderr)")
            #expect(Date().timeIntervalSince(start) < 20)
        }
        #expect(proxy.arrivals.count < 10, "\(proxy.arrivals.count) pages")
    }
}
