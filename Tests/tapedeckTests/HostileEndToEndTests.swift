import Foundation
import TapedeckTesting
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Regressions found by hostile testing: each test failed before its fix.
@Suite("hostile inputs end to end", .endToEnd, .serialized)
struct HostileEndToEndTests {
    @Test("the full id --json prints, and any unique prefix of it (dashes, any case), names a take")
    func fullIDs() async throws {
        let cli = try CLIHarness()
        #expect(try await cli.run("record", "0.2").status == 0)
        let id = try #require(try await cli.takes().first?["id"] as? String)
        for reference in [id, id.uppercased(), String(id.prefix(13)), String(id.prefix(4))] {
            let r = try await cli.run("show", reference, "--json")
            #expect(r.status == 0, "\(reference): \(r.stderr)")
        }
        #expect(try await cli.run("rename", id, "Renamed").status == 0)
        #expect(try await cli.takes().first?["name"] as? String == "Renamed")
    }

    @Test("a take with no audio exports to every format (Opus aborted the process), and a session export keeps the others")
    func zeroFrameExports() async throws {
        let cli = try CLIHarness()
        // A device lost at frame 0: a take with no audio, as Tapedeck makes them itself.
        #expect(try await cli.run("record", "-d", "1", "--session", "S", "--set", "capture.null.device-loss-at-frame=0").status == 4)
        #expect(try await cli.takes().first?["frames"] as? Int == 0)
        #expect(try await cli.run("record", "-d", "0.00001s").status == 64, "shorter than one frame is refused")
        #expect(try await cli.run("record", "-d", "0.5", "--session", "S").status == 0)
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-zero-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: out, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: out) }
        for format in ["opus", "flac", "wav"] {
            let r = try await cli.run("export", "--session", "S", "--format", format, "-o", out.path)
            #expect(r.status == 0, "\(format): \(r.stderr)")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: out.path).count == 6)
        #expect(try await cli.run("record", "-d", "1", "-o", out.appendingPathComponent("empty.opus").path,
                                  "--set", "capture.null.device-loss-at-frame=0").status == 4)
        #expect(try await CLIHarness.tool("opusinfo", [out.appendingPathComponent("empty.opus").path]).status == 0)
    }

    @Test("a YAML alias bomb is refused at once, as is an oversized config; a huge value is not echoed whole")
    func configBombs() async throws {
        let cli = try CLIHarness()
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-bomb-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let bomb = CLIHarness.packageRoot.appendingPathComponent("Fuzz/Seeds/config/alias-bomb.yaml")
        let copy = folder.appendingPathComponent("bomb.yaml")
        try FileManager.default.copyItem(at: bomb, to: copy)
        chmod(copy.path, 0o644)
        let start = Date()
        let r = try await cli.run("list", "--config", copy.path)
        #expect(r.status == 78 && r.stderr.contains("aliases") && Date().timeIntervalSince(start) < 10, "\(r.stderr)")
        let big = folder.appendingPathComponent("big.yaml")
        try Data(("format:\n  channels: " + String(repeating: "9", count: 200_000) + "\n").utf8).write(to: big)
        chmod(big.path, 0o644)
        let value = try await cli.run("list", "--config", big.path)
        #expect(value.status == 78 && value.stderr.count < 1000, "\(value.stderr.prefix(300))")
        let huge = folder.appendingPathComponent("huge.yaml")
        try Data(repeating: UInt8(ascii: "#"), count: 2 << 20).write(to: huge)
        chmod(huge.path, 0o644)
        let size = try await cli.run("list", "--config", huge.path)
        #expect(size.status == 78 && size.stderr.contains("at most"), "\(size.stderr.prefix(300))")
    }

    @Test("export to a file system without hard links (FAT, exFAT: link fails with EPERM) still puts the file in place")
    func exportWithoutHardLinks() async throws {
        var cli = try CLIHarness()
        #expect(try await cli.run("record", "0.5").status == 0)
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-fat-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: out, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: out) }
        cli.launcher = ["strace", "-f", "-o", "/dev/null", "-e", "trace=link,linkat", "-e", "inject=link,linkat:error=EPERM"]
        let r = try await cli.run("export", "last", "-o", out.path)
        #expect(r.status == 0, "\(r.stderr)")
        let files = try FileManager.default.contentsOfDirectory(atPath: out.path)
        #expect(files == ["Session 1 - Take 1.flac"], "\(files)")
        #expect(try await CLIHarness.tool("flac", ["-t", "-s", out.appendingPathComponent("Session 1 - Take 1.flac").path]).status == 0)
        // Never over an existing file, links or not.
        let again = try await cli.run("export", "last", "-o", out.path)
        #expect(again.status == 73, "\(again.stderr)")
    }

    @Test("doctor --repair makes nothing outside the library when LIBRARY/quarantine is a symbolic link")
    func quarantineLink() async throws {
        let cli = try CLIHarness()
        #expect(try await cli.run("record", "0.2").status == 0)
        let outside = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-outside-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: outside, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: outside) }
        try FileManager.default.createSymbolicLink(at: cli.library.appendingPathComponent("quarantine"), withDestinationURL: outside)
        let sessions = cli.library.appendingPathComponent("sessions")
        let folder = try #require(try FileManager.default.contentsOfDirectory(at: sessions, includingPropertiesForKeys: nil).first)
        try Data("stray".utf8).write(to: folder.appendingPathComponent("stray.wav"))
        let r = try await cli.run("doctor", "--repair")
        #expect(r.status != 0 && (r.stdout + r.stderr).contains("symbolic link"), "\(r.stdout) \(r.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: outside.path).isEmpty, "folders made outside the library")
        #expect(FileManager.default.fileExists(atPath: folder.appendingPathComponent("stray.wav").path))
    }

    @Test("import normalizes WAVs with an appended ID3 tag, placeholder sizes or a truncated end; doctor --repair never turns trailing bytes into audio")
    func wavHeadersOnImport() async throws {
        let cli = try CLIHarness()
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-wavs-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let tagged = dir.appendingPathComponent("tagged.wav")
        #expect(try await CLIHarness.tool("sox", ["-n", "-r", "48000", "-c", "2", "-b", "16", tagged.path, "synth", "1", "sine", "440", "vol", "0.3"]).status == 0)
        var tag = Data("TAG".utf8) + Data(repeating: 0x41, count: 125)
        tag[127] = 12
        let handle = try FileHandle(forWritingTo: tagged)
        try handle.seekToEnd()
        try handle.write(contentsOf: tag)
        try handle.close()
        // A WAV written to a pipe (sizes 0xFFFFFFFF), and one cut short (its header promises more).
        let piped = dir.appendingPathComponent("piped.wav")
        let binary = try CLIHarness.binary.path
        #expect(try await ChildProcess.runAsync(["sh", "-c", "'\(binary)' record 1 -o - | cat > '\(piped.path)'"], environment: cli.environment).status == 0)
        let cut = dir.appendingPathComponent("cut.wav")
        #expect(try await CLIHarness.tool("sox", ["-n", "-r", "48000", "-c", "2", "-b", "16", cut.path, "synth", "2", "sine", "440"]).status == 0)
        #expect(truncate(cut.path, 44 + 48_000 * 4) == 0)
        let r = try await cli.run("import", tagged.path, piped.path, cut.path)
        #expect(r.status == 0, "\(r.stderr)")
        let frames = Dictionary(uniqueKeysWithValues: try await cli.takes().map { ($0["name"] as? String ?? "", $0["frames"] as? Int ?? -1) })
        #expect(frames == ["tagged": 48_000, "piped": 48_000, "cut": 48_000], "\(frames)")
        let doctor = try await cli.run("doctor")
        #expect(doctor.status == 0 && doctor.stdout.contains("No problems found"), "\(doctor.stdout)")
        #expect(try await cli.run("doctor", "--repair").status == 0)
        let path = try #require(try await cli.takes().first { $0["name"] as? String == "tagged" }?["path"] as? String)
        let stat = try await CLIHarness.tool("sox", [path, "-n", "stat"])
        let peak = stat.stderr.split(separator: "\n").first { $0.hasPrefix("Maximum amplitude") }.flatMap { Double($0.split(separator: " ").last ?? "") }
        #expect(peak.map { $0 < 0.31 } == true, "\(stat.stderr)")
    }

    @Test("a catalog row with a wrong-typed or impossible value is reported by doctor, never a crash; a newer catalog is refused")
    func damagedRows() async throws {
        let cli = try CLIHarness()
        #expect(try await cli.run("record", "0.2").status == 0)
        #expect(try await cli.run("record", "0.2").status == 0)
        let catalog = cli.library.appendingPathComponent("catalog.sqlite").path
        for (sql, column) in [("UPDATE take SET sampleRate = 'abc' WHERE number = 1", "sampleRate"),
                              ("UPDATE take SET sampleRate = 0 WHERE number = 1", "sampleRate"),
                              ("UPDATE take SET state = 'paused' WHERE number = 1", "state")] {
            #expect(try await CLIHarness.tool("python3", ["-c", "import sqlite3; db = sqlite3.connect('\(catalog)'); db.execute(\"\(sql)\"); db.commit()"]).status == 0)
            let list = try await cli.run("list")
            #expect(list.status == 0 && list.stdout.contains("Take 2") && !list.stdout.contains("Take 1"), "\(list.stdout) \(list.stderr)")
            let doctor = try await cli.run("doctor")
            #expect(doctor.status == 1 && doctor.stdout.contains("damaged") && doctor.stdout.contains(column), "\(doctor.stdout) \(doctor.stderr)")
            #expect(try await cli.run("doctor", "--json").status == 1)
        }
        #expect(try await CLIHarness.tool("python3", ["-c", "import sqlite3; db = sqlite3.connect('\(catalog)'); db.execute(\"INSERT INTO grdb_migrations VALUES ('v9: from the future')\"); db.commit()"]).status == 0)
        let newer = try await cli.run("list")
        #expect(newer.status == 78 && newer.stderr.contains("newer version"), "\(newer.stderr)")
    }

    @Test("a catalog damaged beyond reading: list and doctor say to rebuild it; --rebuild-catalog keeps what reads and makes entries for the audio files")
    func rebuildCatalog() async throws {
        let cli = try CLIHarness()
        #expect(try await cli.run("record", "0.2", "--session", "Gig Night", "--name", "opener").status == 0)
        #expect(try await cli.run("record", "0.3", "--session", "Gig Night").status == 0)
        #expect(try await cli.run("record", "0.4", "--session", "Rehearsal").status == 0)
        #expect(try await cli.run("tag", "last", "MOOD=calm").status == 0)
        let before = try await cli.takes()
        let catalog = cli.library.appendingPathComponent("catalog.sqlite").path
        func shortIDs(_ takes: [[String: Any]]) -> [String: Int] {
            Dictionary(uniqueKeysWithValues: takes.map { ($0["shortID"] as? String ?? "", $0["frames"] as? Int ?? -1) })
        }

        // One row with an impossible value: the others keep their entries (tags and all); the
        // damaged one is made again from its file.
        #expect(try await CLIHarness.tool("python3", ["-c", "import sqlite3; db = sqlite3.connect('\(catalog)'); db.execute(\"UPDATE take SET sampleRate = 'abc' WHERE number = 2\"); db.commit()"]).status == 0)
        let hint = try await cli.run("doctor")
        #expect(hint.status == 1 && hint.stdout.contains("--rebuild-catalog"), "\(hint.stdout)")
        let rebuilt = try await cli.run("doctor", "--rebuild-catalog")
        #expect(rebuilt.status == 0 && rebuilt.stdout.contains("No problems found"), "\(rebuilt.stdout) \(rebuilt.stderr)")
        let rebuiltTakes = try await cli.takes()
        #expect(shortIDs(rebuiltTakes) == shortIDs(before))
        #expect(try await cli.takes().contains { ($0["tags"] as? [String: String])?["MOOD"] == "calm" })

        // The whole catalog unreadable (its header overwritten, its log gone).
        try Data(repeating: 0x5A, count: 8192).write(to: URL(fileURLWithPath: catalog))
        unlink(catalog + "-wal")
        unlink(catalog + "-shm")
        let list = try await cli.run("list")
        #expect(list.status == 74 && list.stderr.contains("--rebuild-catalog"), "\(list.stderr)")
        let doctor = try await cli.run("doctor")
        #expect(doctor.status == 1 && doctor.stdout.contains("--rebuild-catalog"), "\(doctor.stdout) \(doctor.stderr)")
        let again = try await cli.run("doctor", "--rebuild-catalog", "--json")
        #expect(again.status == 0, "\(again.stdout) \(again.stderr)")
        let takes = try await cli.takes()
        #expect(shortIDs(takes) == shortIDs(before), "\(takes)")
        let sessions = try await cli.listJSON()
        #expect(Set(sessions.compactMap { $0["name"] as? String }) == ["gig night", "rehearsal"])
        #expect(takes.contains { $0["name"] as? String == "opener" })
        #expect(try await cli.run("doctor").status == 0)
        // The old catalog is kept, byte for byte.
        let quarantine = cli.library.appendingPathComponent("quarantine")
        let kept = try FileManager.default.subpathsOfDirectory(atPath: quarantine.path).filter { $0.hasSuffix("catalog.sqlite") }
        #expect(kept.count == 2)
        // Recording goes on into the rebuilt library.
        #expect(try await cli.run("record", "0.2", "--session", "gig night").status == 0)
    }

    @Test("doctor lists every take behind a symbolic link (not only the first); deleting a linked session refuses before removing anything")
    func linkedFolders() async throws {
        let cli = try CLIHarness()
        #expect(try await cli.run("record", "0.2", "--session", "A").status == 0)
        #expect(try await cli.run("record", "0.2", "--session", "B").status == 0)
        #expect(try await cli.run("record", "0.2", "--session", "C").status == 0)
        let sessions = cli.library.appendingPathComponent("sessions")
        let outside = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-outside-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: outside, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: outside) }
        // Two session folders moved out of the library and replaced by links to where they went.
        for name in try FileManager.default.contentsOfDirectory(atPath: sessions.path) where !name.hasPrefix("c-") {
            try FileManager.default.moveItem(at: sessions.appendingPathComponent(name), to: outside.appendingPathComponent(name))
            try FileManager.default.createSymbolicLink(at: sessions.appendingPathComponent(name), withDestinationURL: outside.appendingPathComponent(name))
        }
        let doctor = try await cli.run("doctor")
        #expect(doctor.status == 1, "\(doctor.stdout) \(doctor.stderr)")
        #expect(doctor.stdout.contains("A/Take 1") && doctor.stdout.contains("B/Take 1") && doctor.stdout.contains("symbolic link"), "\(doctor.stdout)")
        let delete = try await cli.run("delete", "A", "--yes")
        #expect(delete.status == 74 && delete.stderr.contains("symbolic link"), "\(delete.stderr)")
        #expect(try await cli.listJSON().count == 3, "nothing was removed")
        #expect(try FileManager.default.contentsOfDirectory(atPath: outside.path).count == 2)
    }

    @Test("doctor reports and --repair removes lock files of finished takes and empty session folders no session names")
    func leftovers() async throws {
        let cli = try CLIHarness()
        #expect(try await cli.run("record", "0.2", "--session", "Keep").status == 0)
        let sessions = cli.library.appendingPathComponent("sessions")
        let folder = try #require(try FileManager.default.contentsOfDirectory(atPath: sessions.path).first)
        let take = try #require(try await cli.takes().first?["id"] as? String)
        let lock = sessions.appendingPathComponent(folder).appendingPathComponent(".\(take).lock")
        #expect(FileManager.default.createFile(atPath: lock.path, contents: Data()))
        let ghost = sessions.appendingPathComponent("ghost-12345678")
        try FileManager.default.createDirectory(at: ghost, withIntermediateDirectories: false)
        for path in [lock.path, ghost.path] {
            #expect(try await CLIHarness.tool("touch", ["-d", "2 minutes ago", path]).status == 0)
        }
        let doctor = try await cli.run("doctor")
        #expect(doctor.status == 1 && doctor.stdout.contains("stale-lock") && doctor.stdout.contains("empty-folder"), "\(doctor.stdout)")
        #expect(try await cli.run("doctor", "--repair").status == 0)
        #expect(!FileManager.default.fileExists(atPath: lock.path) && !FileManager.default.fileExists(atPath: ghost.path))
        #expect(try await cli.run("doctor").status == 0)
        #expect(try await cli.takes().count == 1)
    }

    @Test("names that export cuts get the take's id, so two such takes never share a file; a lost catalog is not 'No sessions yet' alone")
    func exportNamesAndLostCatalog() async throws {
        let cli = try CLIHarness()
        let long = String(repeating: "é", count: 120)
        #expect(try await cli.run("record", "0.2", "--session", long + " one").status == 0)
        #expect(try await cli.run("record", "0.2", "--session", long + " two").status == 0)
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-names-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: out, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: out) }
        for session in [long + " one", long + " two"] {
            let r = try await cli.run("export", "--session", session, "--force", "-o", out.path)
            #expect(r.status == 0, "\(r.stderr)")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: out.path).count == 2)

        unlink(cli.library.appendingPathComponent("catalog.sqlite").path)
        unlink(cli.library.appendingPathComponent("catalog.sqlite-wal").path)
        unlink(cli.library.appendingPathComponent("catalog.sqlite-shm").path)
        let list = try await cli.run("list")
        #expect(list.status == 0 && list.stderr.contains("no take names") && list.stderr.contains("--rebuild-catalog"), "\(list.stderr)")
    }

    @Test("a library this user may only read (another user's) is listed, shown, examined and exported; a write says why it fails",
          .enabled(if: getuid() == 0, "needs root, to run tapedeck as the user nobody"))
    func readOnlyLibrary() async throws {
        var cli = try CLIHarness()
        #expect(try await cli.run("record", "0.2").status == 0)
        #expect(try await cli.run("record", "0.2", "--set", "encoder.name=flac").status == 0)
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-ro-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: out, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: out) }
        chmod(out.path, 0o777)
        let before = LibraryEndToEndTests.tree(cli.library)
        cli.launcher = ["runuser", "-u", "nobody", "--"]
        cli.extraEnvironment["HOME"] = out.path
        for args in [["list"], ["show", "last"], ["doctor"], ["export", "last", "-o", out.path], ["list", "--json"]] {
            let r = try await cli.run(args)
            #expect(r.status == 0, "\(args): \(r.stderr)")
        }
        let record = try await cli.run("record", "0.2")
        #expect(record.status == 74 && record.stderr.contains("Permission denied"), "\(record.stderr)")
        cli.launcher = []
        #expect(LibraryEndToEndTests.tree(cli.library) == before, "nothing in the library changed")
    }

    @Test("a take that cannot be finished (moving its file into place fails) says its audio is safe, still prints --json, and the next command recovers it")
    func unfinishedTake() async throws {
        var cli = try CLIHarness()
        #expect(try await cli.run("record", "0.1").status == 0)
        cli.launcher = ["strace", "-f", "-o", "/dev/null", "-e", "trace=link,linkat", "-e", "inject=link,linkat:error=EIO"]
        let r = try await cli.run("record", "0.3", "--json")
        cli.launcher = []
        #expect(r.status == 74 && r.stderr.contains("The recording itself is safe"), "\(r.stderr)")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any], "\(r.stdout)")
        #expect(json["end"] as? String == "unfinished")
        #expect((json["take"] as? [String: Any])?["frames"] as? Int == 14_400)
        let takes = try await cli.takes()
        #expect(takes.count == 2 && takes.last?["state"] as? String == "recovered" && takes.last?["frames"] as? Int == 14_400, "\(takes)")
    }

    @Test("--config /dev/null is an empty config; a config in a folder others may write, or a folder, is refused")
    func configPaths() async throws {
        let cli = try CLIHarness()
        let empty = try await cli.run("list", "--config", "/dev/null")
        #expect(empty.status == 0, "\(empty.stderr)")
        #expect(!empty.stderr.contains("chmod"))
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-cfg-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        chmod(folder.path, 0o777)
        let file = folder.appendingPathComponent("config.yaml")
        try Data("format: { channels: 1 }\n".utf8).write(to: file)
        chmod(file.path, 0o644)
        let open = try await cli.run("list", "--config", file.path)
        #expect(open.status == 78 && open.stderr.contains("its folder"), "\(open.stderr)")
        chmod(folder.path, 0o755)
        #expect(try await cli.run("list", "--config", file.path).status == 0)
        let notFile = try await cli.run("list", "--config", folder.path)
        #expect(notFile.status == 78 && notFile.stderr.contains("not a regular file"), "\(notFile.stderr)")
    }
}
