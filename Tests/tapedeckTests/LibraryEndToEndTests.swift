import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Libraries shared by processes, copied between machines, and named by hostile users.
@Suite("libraries end to end", .endToEnd, .serialized)
struct LibraryEndToEndTests {
    /// Every file under `root` (relative path → bytes), for before/after comparisons.
    static func tree(_ root: URL) -> [String: Data] {
        var out: [String: Data] = [:]
        for sub in (try? FileManager.default.subpathsOfDirectory(atPath: root.path)) ?? [] {
            let url = root.appendingPathComponent(sub)
            var isDir: ObjCBool = false
            if FileManager.default.fileExists(atPath: url.path, isDirectory: &isDir), !isDir.boolValue {
                out[sub] = (try? Data(contentsOf: url)) ?? Data()
            }
        }
        return out
    }

    @Test("two processes recording 50 takes each into one session end with 100 listed, readable takes",
          arguments: ["directory", "bundle"])
    func concurrentWriters(storage: String) async throws {
        let cli = try CLIHarness(storage: storage)
        let failures = LockedList()
        await withTaskGroup(of: Void.self) { group in
            for writer in 0..<2 {
                group.addTask {
                    for i in 0..<50 {
                        do {
                            let r = try await cli.run("record", "--session", "Shared", "--name", "w\(writer)-\(i)", "--duration", "0.02s")
                            if r.status != 0 { failures.append("writer \(writer) take \(i): exit \(r.status): \(r.stderr)") }
                        } catch {
                            failures.append("writer \(writer) take \(i): \(error)")
                        }
                    }
                }
            }
        }
        #expect(failures.items.isEmpty, "\(failures.items.prefix(3))")
        let sessions = try await cli.listJSON()
        #expect(sessions.count == 1)
        let takes = try await cli.takes()
        #expect(takes.count == 100)
        #expect(Set(takes.compactMap { $0["name"] as? String }).count == 100)
        #expect(Set(takes.compactMap { $0["number"] as? Int }).count == 100, "take numbers are unique")
        let paths = takes.compactMap { $0["path"] as? String }
        #expect(paths.count == 100)
        // Every file is a WAV that python's wave reads with the frames the catalog lists.
        let script = """
            import sys, wave
            bad = 0
            for p in sys.argv[1:]:
                try:
                    with wave.open(p) as w:
                        if w.getnframes() != 960: bad += 1
                except Exception as e:
                    bad += 1
            print(bad)
            """
        let r = try await CLIHarness.tool("python3", ["-c", script] + paths)
        #expect(r.status == 0 && r.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "0", "\(r.stdout) \(r.stderr)")
    }

    @Test("renaming the session and another take while a recording runs in it loses nothing", arguments: ["directory", "bundle"])
    func renameDuringRecording(storage: String) async throws {
        let cli = try CLIHarness(storage: storage)
        #expect(try await cli.run("record", "--session", "Live", "--name", "Earlier", "--duration", "0.2s").status == 0)
        let (p, out, _) = try cli.start(["record", "--session", "Live", "--name", "Running", "--duration", "3s", "--json"])
        #expect(try await cli.waitForPendingFile())
        let renamedSession = try await cli.run("rename", "Live", "Studio A")
        #expect(renamedSession.status == 0, "\(renamedSession.stderr)")
        let renamedTake = try await cli.run("rename", "Studio A/Earlier", "Soundcheck")
        #expect(renamedTake.status == 0, "\(renamedTake.stderr)")
        try await CLIHarness.waitForExit(p)
        let report = (try? String(contentsOf: out, encoding: .utf8)) ?? ""
        #expect(p.terminationStatus == 0, "\(report)")
        let takes = try await cli.takes()
        #expect(takes.map { $0["name"] as? String } == ["Soundcheck", "Running"])
        #expect(takes.map { $0["session"] as? String } == ["Studio A", "Studio A"])
        #expect(takes.last?["frames"] as? Int == 144_000 && takes.last?["state"] as? String == "complete")
    }

    @Test("a bundle recorded in one library is copied with cp -r to another and listed, played and exported there")
    func bundleTravels() async throws {
        let first = try CLIHarness(storage: "bundle")
        let rec = try await first.run("record", "--session", "Road trip", "--name", "Campfire", "--duration", "1s")
        #expect(rec.status == 0, "\(rec.stderr)")
        let bundles = try FileManager.default.contentsOfDirectory(atPath: first.library.path).filter { $0.hasSuffix(".tapedeck") }
        #expect(bundles.count == 1)
        let bundle = try #require(bundles.first)

        let second = try CLIHarness(storage: "bundle")
        try FileManager.default.createDirectory(at: second.library, withIntermediateDirectories: true)
        let cp = try await CLIHarness.tool("cp", ["-r", first.library.appendingPathComponent(bundle).path, second.library.path + "/"])
        #expect(cp.status == 0, "\(cp.stderr)")
        let takes = try await second.takes()
        #expect(takes.count == 1)
        #expect(takes.first?["name"] as? String == "Campfire" && takes.first?["frames"] as? Int == 48_000)
        let path = try #require(takes.first?["path"] as? String)
        #expect(path.hasPrefix(second.library.path), "the copy's audio is the copy's own file")
        #expect(try await second.run("play", "Road trip/Campfire").status == 0)
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-export-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: out, withIntermediateDirectories: true)
        let export = try await second.run("export", "Road trip/Campfire", "--output", out.path)
        #expect(export.status == 0, "\(export.stderr)")
        let flacs = try FileManager.default.contentsOfDirectory(atPath: out.path).filter { $0.hasSuffix(".flac") }
        #expect(flacs.count == 1)
        let t = try await CLIHarness.tool("flac", ["-t", "-s", out.appendingPathComponent(flacs[0]).path])
        #expect(t.status == 0, "\(t.stderr)")

        // The same bundle opened in place, as a library of one session.
        let inPlace = try CLIHarness(storage: "bundle", library: second.library.appendingPathComponent(bundle))
        #expect(try await inPlace.takes().count == 1)
    }

    @Test("hostile session and take names never touch anything outside the library", arguments: ["directory", "bundle"])
    func hostileNamesStayInside(storage: String) async throws {
        let parent = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-hostile-\(UUID().uuidString)")
        let canary = parent.appendingPathComponent("canary")
        try FileManager.default.createDirectory(at: canary, withIntermediateDirectories: true)
        try Data("do not touch".utf8).write(to: canary.appendingPathComponent("keep.txt"))
        let before = Self.tree(canary)
        let cli = try CLIHarness(storage: storage, library: parent.appendingPathComponent("library"))
        let names = ["../canary", "../../canary/keep.txt", "/etc/passwd", ".", "..", ".hidden", "-rf", "--help",
                     String(repeating: "n", count: 300), "Caf\u{E9}", "a/b/c", "x\\y"]
        for (i, name) in names.enumerated() {
            let r = try await cli.run("record", "--session=\(name)", "--name=\(names[names.count - 1 - i])", "--duration", "0.02s")
            #expect(r.status == 0, "\(name): \(r.stderr)")
        }
        let nfd = try await cli.run("record", "--session", "Cafe\u{301}", "--name", "second", "--duration", "0.02s")
        #expect(nfd.status == 0, "NFD spelling records into the NFC session: \(nfd.stderr)")
        let sessions = try await cli.listJSON()
        #expect(sessions.count == names.count, "one session per name; NFC and NFD spellings are one session")
        #expect(Self.tree(canary) == before, "the canary folder changed")
        let outside = try FileManager.default.contentsOfDirectory(atPath: parent.path).sorted()
        #expect(outside == ["canary", "library"], "nothing was created beside the library: \(outside)")
        for take in try await cli.takes() {
            let path = try #require(take["path"] as? String)
            #expect(URL(fileURLWithPath: path).standardizedFileURL.path.hasPrefix(cli.library.path + "/"))
        }
    }
}

/// A list several threads append to.
final class LockedList: @unchecked Sendable {
    private let lock = NSLock()
    private var storage: [String] = []
    func append(_ s: String) { lock.lock(); storage.append(s); lock.unlock() }
    var items: [String] { lock.lock(); defer { lock.unlock() }; return storage }
}

@Suite("tapedeck doctor end to end", .endToEnd, .serialized)
struct DoctorEndToEndTests {
    static func report(_ r: CLIHarness.Result) throws -> [[String: Any]] {
        let object = try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any]
        return object?["findings"] as? [[String: Any]] ?? []
    }

    @Test("doctor finds every kind of planted damage, changes nothing without --repair, and repairs without losing audio",
          arguments: ["directory", "bundle"])
    func plantedDamage(storage: String) async throws {
        let cli = try CLIHarness(storage: storage)
        for name in ["Keep", "Gone", "Cut"] {
            let r = try await cli.run("record", "--session", "Damaged", "--name", name, "--duration", "0.5s")
            #expect(r.status == 0, "\(r.stderr)")
        }
        #expect(try await cli.run("doctor").status == 0, "a healthy library has no findings")
        let takes = try await cli.takes()
        func path(_ name: String) throws -> String { try #require(takes.first { $0["name"] as? String == name }?["path"] as? String) }
        let keep = try path("Keep"), gone = try path("Gone"), cut = try path("Cut")
        let keptBytes = try Data(contentsOf: URL(fileURLWithPath: keep))

        // Damage: audio removed, audio cut short (its header now claims more), a file no take names,
        // and a recording killed mid-take.
        try FileManager.default.removeItem(atPath: gone)
        let cutHandle = try FileHandle(forUpdating: URL(fileURLWithPath: cut))
        try cutHandle.truncate(atOffset: try cutHandle.seekToEnd() - 4000)
        try cutHandle.close()
        let folder = URL(fileURLWithPath: keep).deletingLastPathComponent()
        let stray = folder.appendingPathComponent("stray.wav")
        try keptBytes.prefix(5000).write(to: stray)
        if storage == "bundle" {
            // A bundle whose manifest does not parse: reported, and moved aside whole by --repair.
            let broken = cli.library.appendingPathComponent("broken.tapedeck")
            try FileManager.default.createDirectory(at: broken, withIntermediateDirectories: true)
            try Data("{ not json".utf8).write(to: broken.appendingPathComponent("manifest.json"))
            try keptBytes.prefix(3000).write(to: broken.appendingPathComponent("001-lost.wav"))
        }
        let (p, _, _) = try cli.start(["record", "--session", "Damaged", "--name", "Killed"])
        #expect(try await cli.waitForPendingFile())
        try await Task.sleep(for: .seconds(1.5))
        kill(p.processIdentifier, SIGKILL)
        try await CLIHarness.waitForExit(p)

        // Audio, manifests and everything else a user keeps; SQLite's own files, lock files and
        // the bundle summaries (a cache of the manifests, remade when one changed) change when
        // any process opens the library.
        func userFiles() -> [String: Data] {
            LibraryEndToEndTests.tree(cli.library).filter {
                !$0.key.contains("catalog.sqlite") && !$0.key.hasSuffix(".lock") && !$0.key.hasPrefix(".tapedeck-index/")
            }
        }
        let before = userFiles()
        let found = try await cli.run("doctor", "--json")
        #expect(found.status == 1, "problems found: exit 1 (\(found.stderr))")
        let findings = try Self.report(found)
        let kinds = Set(findings.compactMap { $0["kind"] as? String })
        let expected: Set<String> = storage == "bundle" ? ["missing-audio", "header-mismatch", "unknown-file", "interrupted", "damaged"]
                                                         : ["missing-audio", "header-mismatch", "unknown-file", "interrupted"]
        #expect(kinds == expected, "\(findings)")
        #expect(findings.allSatisfy { $0["repaired"] == nil })
        #expect(userFiles() == before, "doctor without --repair changes no file")
        let again = try await cli.run("doctor", "--json")
        #expect(try Self.report(again).count == findings.count, "and finds the same again")

        let repaired = try await cli.run("doctor", "--repair", "--json")
        #expect(repaired.status == 0, "everything repaired: exit 0 (\(repaired.stderr))")
        #expect(try Self.report(repaired).allSatisfy { $0["repaired"] is String })
        // Nothing lost: the stray file is in quarantine with its bytes, the kept take untouched.
        let quarantined = LibraryEndToEndTests.tree(cli.library).filter { $0.key.hasPrefix("quarantine/") }
        #expect(quarantined.count == (storage == "bundle" ? 3 : 1), "\(quarantined.keys.sorted())")
        #expect(quarantined.values.contains(keptBytes.prefix(5000)))
        if storage == "bundle" { #expect(quarantined.values.contains(keptBytes.prefix(3000)), "the broken bundle's audio is kept") }
        #expect(try Data(contentsOf: URL(fileURLWithPath: keep)) == keptBytes)
        let after = try await cli.takes()
        #expect(Set(after.compactMap { $0["name"] as? String }) == ["Keep", "Cut", "Killed"])
        let cutTake = try #require(after.first { $0["name"] as? String == "Cut" })
        #expect(cutTake["state"] as? String == "recovered")
        #expect(cutTake["frames"] as? Int == 24_000 - 1000)
        let wave = try await CLIHarness.tool("python3", ["-c", "import wave,sys; print(wave.open(sys.argv[1]).getnframes())", cut])
        #expect(wave.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "23000", "python's wave reads the repaired header: \(wave.stderr)")
        #expect(after.first { $0["name"] as? String == "Killed" }?["state"] as? String == "recovered")
        #expect(try await cli.run("doctor").status == 0, "nothing left to find")
    }
}

@Suite("tapedeck import end to end", .endToEnd, .serialized)
struct ImportEndToEndTests {
    static func temp(_ name: String) throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-import-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir.appendingPathComponent(name)
    }

    /// Samples of an audio file as raw s16 little-endian, decoded by sox.
    static func samples(_ path: String) async throws -> Data {
        let raw = try temp("samples.raw")
        let r = try await CLIHarness.tool("sox", [path, "-t", "raw", "-e", "signed", "-b", "16", "-L", raw.path])
        #expect(r.status == 0, "sox: \(r.stderr)")
        return try Data(contentsOf: raw)
    }

    @Test("WAV and FLAC are copied byte for byte, AIFF is stored with the library's encoder; sox reads the same samples")
    func importsFiles() async throws {
        let wav = try Self.temp("Morning.wav"), flac = try Self.temp("Noon.flac"), aiff = try Self.temp("Evening.aiff")
        for (url, extra) in [(wav, [String]()), (flac, []), (aiff, [])] {
            let r = try await CLIHarness.tool("sox", ["-n", "-r", "44100", "-b", "16", "-c", "2"] + extra + [url.path, "synth", "0.5", "sine", "330"])
            #expect(r.status == 0, "sox: \(r.stderr)")
        }
        let cli = try CLIHarness()
        let r = try await cli.run("import", wav.path, flac.path, aiff.path, "--session", "Imported", "--json")
        #expect(r.status == 0, "\(r.stderr)")
        let takes = try await cli.takes()
        #expect(takes.map { $0["name"] as? String } == ["Morning", "Noon", "Evening"])
        #expect(takes.allSatisfy { $0["frames"] as? Int == 22_050 && $0["state"] as? String == "complete" })
        #expect(takes.map { $0["encoding"] as? String } == ["wav", "flac", "wav"])
        let paths = takes.compactMap { $0["path"] as? String }
        #expect(try Data(contentsOf: URL(fileURLWithPath: paths[0])) == Data(contentsOf: wav), "WAV copied byte for byte")
        #expect(try Data(contentsOf: URL(fileURLWithPath: paths[1])) == Data(contentsOf: flac), "FLAC copied byte for byte")
        let stored = try await Self.samples(paths[2]), original = try await Self.samples(aiff.path)
        #expect(stored == original, "AIFF's samples kept")
        // The stored WAV's INFO tags number the take as the store does: the session's third.
        let track = try await CLIHarness.tool("python3", ["-c", """
            import sys
            data = open(sys.argv[1], 'rb').read(65536)
            at = data.find(b'ITRK')
            size = int.from_bytes(data[at + 4:at + 8], 'little')
            print(data[at + 8:at + 8 + size].rstrip(b'\\0').decode() if at >= 0 else 'none')
            """, paths[2]])
        #expect(track.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "3", "ITRK: \(track.stdout) \(track.stderr)")
        #expect(try await CLIHarness.tool("flac", ["-t", "-s", paths[1]]).status == 0)
    }

    @Test("a file that cannot be decoded is refused with the reader's reason and leaves nothing behind; the others are imported")
    func refusesDamaged() async throws {
        let good = try Self.temp("Good.wav"), bad = try Self.temp("Bad.wav"), cut = try Self.temp("Cut.flac")
        #expect(try await CLIHarness.tool("sox", ["-n", "-r", "48000", "-b", "16", "-c", "1", good.path, "synth", "0.2", "sine", "440"]).status == 0)
        try Data((0..<5000).map { UInt8(truncatingIfNeeded: $0 &* 31) }).write(to: bad)
        #expect(try await CLIHarness.tool("sox", ["-n", "-r", "48000", "-b", "16", "-c", "1", cut.path, "synth", "1", "sine", "440"]).status == 0)
        let whole = try Data(contentsOf: cut)
        try whole.prefix(whole.count / 2).write(to: cut)
        let cli = try CLIHarness()
        _ = try await cli.run("record", "--session", "Imported", "--duration", "0.1s")
        let r = try await cli.run("import", bad.path, good.path, cut.path, "--session", "Imported")
        #expect(r.status != 0, "a refused file makes the exit status non-zero")
        #expect(r.stderr.contains("Bad.wav") && r.stderr.contains("Cut.flac"), "\(r.stderr)")
        let names = try await cli.takes().compactMap { $0["name"] as? String }
        #expect(names == ["Take 1", "Good"])
        let leftovers = LibraryEndToEndTests.tree(cli.library).keys.filter { $0.contains(".import-") || $0.contains(".pending.") }
        #expect(leftovers.isEmpty, "\(leftovers)")
        #expect(try await cli.run("doctor").status == 0, "nothing half-imported remains")
    }

    @Test("a .tapedeck bundle is imported into a directory library with names, states and audio kept")
    func importsBundle() async throws {
        let bundleLibrary = try CLIHarness(storage: "bundle")
        #expect(try await bundleLibrary.run("record", "--session", "Field", "--name", "Birds", "--duration", "0.5s").status == 0)
        #expect(try await bundleLibrary.run("record", "--session", "Field", "--name", "Wind", "--duration", "0.3s").status == 0)
        let source = try await bundleLibrary.takes()
        let bundle = try #require(try FileManager.default.contentsOfDirectory(atPath: bundleLibrary.library.path).first { $0.hasSuffix(".tapedeck") })
        let cli = try CLIHarness()
        let r = try await cli.run("import", bundleLibrary.library.appendingPathComponent(bundle).path)
        #expect(r.status == 0, "\(r.stderr)")
        let sessions = try await cli.listJSON()
        #expect(sessions.map { $0["name"] as? String } == ["Field"])
        let takes = try await cli.takes()
        #expect(takes.map { $0["name"] as? String } == ["Birds", "Wind"])
        #expect(takes.map { $0["frames"] as? Int } == source.map { $0["frames"] as? Int })
        for (a, b) in zip(takes, source) {
            let pa = try #require(a["path"] as? String), pb = try #require(b["path"] as? String)
            #expect(try Data(contentsOf: URL(fileURLWithPath: pa)) == Data(contentsOf: URL(fileURLWithPath: pb)))
        }
        let again = try await cli.run("import", bundleLibrary.library.appendingPathComponent(bundle).path)
        #expect(again.status == 73, "a session of that name exists: \(again.stderr)")
    }
}

extension DoctorEndToEndTests {
    @Test("doctor --repair during a recording leaves the live take alone", arguments: ["directory", "bundle"])
    func doctorDuringRecording(storage: String) async throws {
        let cli = try CLIHarness(storage: storage)
        #expect(try await cli.run("record", "--session", "Live", "--duration", "0.2s").status == 0)
        let (p, _, _) = try cli.start(["record", "--session", "Live", "--name", "Running", "--duration", "2s"])
        #expect(try await cli.waitForPendingFile())
        let doctor = try await cli.run("doctor", "--repair", "--json")
        #expect(doctor.status == 0, "\(doctor.stdout) \(doctor.stderr)")
        #expect(try Self.report(doctor).isEmpty, "a live recording is not damage")
        try await CLIHarness.waitForExit(p)
        #expect(p.terminationStatus == 0)
        let running = try #require(try await cli.takes().first { $0["name"] as? String == "Running" })
        #expect(running["state"] as? String == "complete" && running["frames"] as? Int == 96_000)
    }
}

@Suite("tapedeck config end to end", .endToEnd, .serialized)
struct ConfigEndToEndTests {
    @Test("config check --offline passes for every file in Configuration/, and checks devices when online")
    func shippedFiles() async throws {
        let folder = CLIHarness.packageRoot.appendingPathComponent("Configuration")
        let files = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".yaml") }.sorted()
        #expect(files.contains("fleet.yaml") && files.contains("ci.yaml") && files.contains("tapedeck.yaml"))
        let cli = try CLIHarness()
        for name in files {
            let r = try await cli.run("config", "check", "--offline", "--config", folder.appendingPathComponent(name).path)
            #expect(r.status == 0, "\(name): \(r.stdout) \(r.stderr)")
        }
        for machine in ["studio-pi", "laptop", "ci"] {
            let r = try await cli.run("config", "check", "--offline", "--config", folder.appendingPathComponent("fleet.yaml").path, "--machine", machine)
            #expect(r.status == 0, "fleet.yaml --machine \(machine): \(r.stdout)")
        }
        // Online: the null backends open.
        #expect(try await cli.run("config", "check").status == 0)
        // A PulseAudio server that is not there is a device problem, not a usable configuration.
        let dead = try await cli.run("config", "check", "--set", "capture.backend=pulse", "--set", "capture.pulse.server=unix:/nonexistent/native", "--json")
        #expect(dead.status == 78)
        let report = try JSONSerialization.jsonObject(with: Data(dead.stdout.utf8)) as? [String: Any]
        #expect(report?["usable"] as? Bool == false)
        let first = (report?["problems"] as? [[String: Any]])?.first
        #expect((first?["message"] as? String)?.hasPrefix("capture.backend pulse:") == true && first?["key"] as? String == "capture.backend", "\(dead.stdout)")
    }

    @Test("config check lists every problem with file, line and key, and exits 78")
    func badFile() async throws {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-bad-\(UUID().uuidString).yaml")
        try Data("capture:\n  backend: null\nformat:\n  chanels: 2\nstorage:\n  checkpoint-second: 2\n".utf8).write(to: url)
        let r = try await CLIHarness().run("config", "check", "--offline", "--config", url.path)
        #expect(r.status == 78)
        let lines = r.stdout.split(separator: "\n").map(String.init)
        #expect(lines == [
            "\(url.path):4: format.chanels: unknown setting (did you mean \"format.channels\"?). Accepted here: channels, sample-format, sample-rate.",
            "\(url.path):6: storage.checkpoint-second: unknown setting (did you mean \"storage.checkpoint-seconds\"?). Accepted here: backend, checkpoint-seconds, warn-free-minutes.",
        ], "\(r.stdout)")
    }

    @Test("a file with five problems: config check lists them in the file's order, a command counts the other four, and a plugin's typo is guessed from its own settings only")
    func problemsInOrder() async throws {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-bad-\(UUID().uuidString).yaml")
        defer { try? FileManager.default.removeItem(at: url) }
        try Data("capture:\n  backend: nul\nformat:\n  sample-rate: abc\n  channels: 0\nencoder:\n  name: wav\n  wav:\n    levl: 3\nstorage:\n  directory:\n    pth: /x\n".utf8).write(to: url)
        let check = try await CLIHarness().run("config", "check", "--offline", "--config", url.path)
        #expect(check.status == 78)
        let lines = check.stdout.split(separator: "\n").map(String.init)
        let numbers = lines.compactMap { Int($0.dropFirst(url.path.count + 1).prefix { $0.isNumber }) }
        #expect(numbers == [2, 4, 5, 9, 12], "\(check.stdout)")
        let wav = try #require(lines.first { $0.contains("encoder.wav.levl") })
        #expect(!wav.contains("flac") && wav.contains("encoder.wav has no settings"), "\(wav)")
        let listed = try await CLIHarness().run("list", "--config", url.path)
        #expect(listed.status == 78 && listed.stderr.contains("(4 more: run `tapedeck config check`"), "\(listed.stderr)")
        // As JSON: each problem is an object with its file, line and key.
        let json = try await CLIHarness().run("config", "check", "--offline", "--config", url.path, "--json")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        let problems = try #require(report["problems"] as? [[String: Any]])
        #expect(problems.compactMap { $0["line"] as? Int } == [2, 4, 5, 9, 12], "\(json.stdout)")
        #expect(problems.allSatisfy { $0["file"] as? String == url.path && ($0["message"] as? String)?.isEmpty == false })
        #expect(problems.compactMap { $0["key"] as? String } == ["capture.backend", "format.sample-rate", "format.channels", "encoder.wav.levl", "storage.directory.pth"], "\(json.stdout)")
        let flagged = try await CLIHarness().run("config", "check", "--offline", "--set", "format.chanels=2", "--json")
        #expect((flagged.stdout.contains(#""key" : "format.chanels""#)), "\(flagged.stdout)")
    }

    @Test("config show --json names the plugin in each role and where every setting came from")
    func show() async throws {
        var cli = try CLIHarness()
        cli.extraEnvironment["TAPEDECK_FORMAT_CHANNELS"] = "1"
        let r = try await cli.run("config", "show", "--json", "--set", "format.sample-rate=44100")
        #expect(r.status == 0, "\(r.stderr)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        let roles = try #require(report["roles"] as? [String: Any])
        #expect(roles["capture"] as? String == "null" && roles["storage"] as? String == "directory" && roles["encoder"] as? String == "wav")
        let settings = try #require(report["settings"] as? [[String: Any]])
        func layer(_ key: String) -> String? { settings.first { $0["key"] as? String == key }?["layer"] as? String }
        #expect(layer("format.sample-rate") == "flag")
        #expect(layer("format.channels") == "environment")
        #expect(layer("capture.backend") == "file")
        #expect(layer("capture.buffer-seconds") == "default")
        #expect(layer("storage.directory.path") == "environment", "the harness sets the library by environment")

        let fleet = CLIHarness.packageRoot.appendingPathComponent("Configuration/fleet.yaml").path
        let m = try await CLIHarness().run("config", "show", "--json", "--config", fleet, "--machine", "laptop")
        let mr = try #require(try JSONSerialization.jsonObject(with: Data(m.stdout.utf8)) as? [String: Any])
        #expect(mr["machine"] as? String == "laptop")
        let ms = try #require(mr["settings"] as? [[String: Any]])
        #expect(ms.first { $0["key"] as? String == "capture.backend" }?["layer"] as? String == "machine")
        #expect(ms.first { $0["key"] as? String == "format.sample-rate" }?["layer"] as? String == "file")
    }
}

@Suite("Opus export end to end", .endToEnd)
struct OpusExportEndToEndTests {
    @Test("export --format opus writes an Ogg Opus file that opusdec decodes to the take's length, tagged")
    func exportOpus() async throws {
        let cli = try CLIHarness()
        #expect(try await cli.run("record", "--session", "Demo", "--name", "Hook", "--duration", "1.5s").status == 0)
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-opus-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: out, withIntermediateDirectories: true)
        let r = try await cli.run("export", "Demo/Hook", "--format", "opus", "--output", out.path, "--json")
        #expect(r.status == 0, "\(r.stderr)")
        let file = out.appendingPathComponent("Demo - Hook.opus")
        let wav = out.appendingPathComponent("decoded.wav")
        let dec = try await CLIHarness.tool("opusdec", ["--quiet", file.path, wav.path])
        #expect(dec.status == 0, "\(dec.stderr)")
        let soxi = try await CLIHarness.tool("soxi", ["-D", wav.path])
        #expect(soxi.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "1.500000", "\(soxi.stdout)")
        let info = try await CLIHarness.tool("opusinfo", [file.path])
        #expect(info.stdout.contains("TITLE=Hook") && info.stdout.contains("ALBUM=Demo"), "\(info.stdout)")
    }
}

extension ImportEndToEndTests {
    @Test("MP3, Ogg Opus and Ogg Vorbis are kept byte for byte (not decoded into 32-bit float WAV), and export and show read them")
    func importsLossyAsTheyAre() async throws {
        let wav = try Self.temp("source.wav")
        #expect(try await CLIHarness.tool("sox", ["-n", "-r", "48000", "-b", "16", "-c", "2", wav.path, "synth", "2", "sine", "440"]).status == 0)
        let mp3 = wav.deletingLastPathComponent().appendingPathComponent("Talk.mp3")
        let opus = wav.deletingLastPathComponent().appendingPathComponent("Song.opus")
        let ogg = wav.deletingLastPathComponent().appendingPathComponent("Birds.ogg")
        for (out, codec) in [(mp3, "libmp3lame"), (opus, "libopus"), (ogg, "libvorbis")] {
            let r = try await CLIHarness.tool("ffmpeg", ["-v", "error", "-i", wav.path, "-c:a", codec, out.path])
            #expect(r.status == 0, "ffmpeg \(codec): \(r.stderr)")
        }
        let cli = try CLIHarness()
        let r = try await cli.run("import", mp3.path, opus.path, ogg.path, "--session", "Lossy")
        #expect(r.status == 0, "\(r.stderr)")
        let takes = try await cli.takes()
        #expect(takes.map { $0["encoding"] as? String } == ["mp3", "opus", "vorbis"], "\(takes)")
        for (take, source) in zip(takes, [mp3, opus, ogg]) {
            let path = try #require(take["path"] as? String)
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == Data(contentsOf: source), "\(source.lastPathComponent) kept as it is")
            #expect(abs((take["seconds"] as? Double ?? 0) - 2) < 0.1, "\(take)")
        }
        let folder = wav.deletingLastPathComponent().appendingPathComponent("out")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let exported = try await cli.run("export", "Lossy/Talk", "-o", folder.path)
        #expect(exported.status == 0, "\(exported.stderr)")
        #expect(try await CLIHarness.tool("flac", ["-t", "-s", folder.appendingPathComponent("Lossy - Talk.flac").path]).status == 0)
    }
}

extension DoctorEndToEndTests {
    @Test("a WAV dropped into a session folder: doctor says `tapedeck import` makes it a take, --repair moves it aside saying where, and that import works")
    func droppedWAV() async throws {
        let cli = try CLIHarness()
        #expect(try await cli.run("record", "-d", "0.2", "--session", "Field").status == 0)
        let path = try #require(try await cli.takes().first?["path"] as? String)
        let dropped = URL(fileURLWithPath: path).deletingLastPathComponent().appendingPathComponent("by hand.wav")
        #expect(try await CLIHarness.tool("sox", ["-n", "-r", "48000", "-b", "16", "-c", "2", dropped.path, "synth", "0.3", "sine", "440"]).status == 0)
        let found = try await cli.run("doctor")
        #expect(found.status == 1 && found.stdout.contains("by hand.wav' --session Field`"), "\(found.stdout)")
        let repaired = try await cli.run("doctor", "--repair", "--json")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(repaired.stdout.utf8)) as? [String: Any])
        let findings = try #require(report["findings"] as? [[String: Any]])
        let moved = try #require(findings.first { $0["kind"] as? String == "unknown-file" }?["repaired"] as? String, "\(findings)")
        let command = try #require(moved.range(of: #"`tapedeck import '[^']+' --session Field`"#, options: .regularExpression)
            .map { String(moved[$0].dropFirst(18).dropLast(18)) }, "\(moved)")
        #expect(FileManager.default.fileExists(atPath: command), "\(moved)")
        let imported = try await cli.run("import", command, "--session", "Field")
        #expect(imported.status == 0, "\(imported.stderr)")
        #expect(try await cli.takes().contains { $0["name"] as? String == "by hand" })
    }
}
