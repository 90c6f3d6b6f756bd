import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A recording that fills the disk, on a real (small) file system: a tmpfs mounted for the test,
/// which needs root (as CI runs). The library lives on it, so the catalog is on the full disk too.
@Suite("disk full", .endToEnd, .serialized, .enabled(if: getuid() == 0, "mounting a tmpfs needs root"))
struct DiskFullEndToEndTests {
    static let verifier = CLIHarness.packageRoot.appendingPathComponent("Tests/tapedeckTests/verify_wav.py").path

    /// Checks `record --json`'s report of a take the full disk cut short (kept as `truncated`,
    /// more than a second long); returns its frames and path.
    static func truncatedTake(report json: Data) throws -> (frames: Int, path: String) {
        let report = try #require(try JSONSerialization.jsonObject(with: json) as? [String: Any])
        #expect(report["end"] as? String == "write-failed")
        let take = try #require(report["take"] as? [String: Any])
        #expect(take["state"] as? String == "truncated")
        let frames = try #require(take["frames"] as? Int)
        #expect(frames > 48_000, "only \(frames) frames were kept")
        return (frames, try #require(take["path"] as? String))
    }

    @Test("another program fills the disk: list, show, doctor, rename and delete still work, and delete makes room", arguments: ["directory", "bundle"])
    func fullDiskLibrary(storage: String) async throws {
        try await withSmallDisk(megabytes: 8) { library in
            let cli = try CLIHarness(storage: storage, library: library)
            #expect(try await cli.run("record", "-d", "2", "--name", "A").status == 0)
            #expect(try await cli.run("record", "-d", "2", "--name", "B").status == 0)
            // Another program fills what is left.
            let filler = library.deletingLastPathComponent().appendingPathComponent("filler")
            _ = try await CLIHarness.tool("dd", ["if=/dev/zero", "of=\(filler.path)", "bs=64k"])
            var info = statvfs()
            #expect(statvfs(library.path, &info) == 0 && info.f_bavail == 0, "the disk is full")
            for args in [["list"], ["show", "Session 1/A"], ["doctor"]] {
                let r = try await cli.run(args)
                #expect(r.status == 0, "\(storage) \(args): \(r.stderr)")
            }
            let delete = try await cli.run("delete", "Session 1/B", "--yes")
            #expect(delete.status == 0, "\(storage) delete: \(delete.stderr)")
            #expect(try await cli.takes().map { $0["name"] as? String } == ["A"])
            let recorded = try await cli.run("record", "-d", "60")
            #expect(recorded.status == 5 || recorded.status == 74, "\(recorded.stderr)")
            if recorded.status == 74 { #expect(recorded.stderr.contains("full"), "\(recorded.stderr)") }
        }
    }

    @Test("a full disk and a catalog whose -shm and -wal another SQLite client removed: list, show, doctor and delete still work")
    func fullDiskWithoutWALIndex() async throws {
        try await withSmallDisk(megabytes: 8) { library in
            let cli = try CLIHarness(storage: "directory", library: library)
            #expect(try await cli.run("record", "-d", "2", "--name", "A").status == 0)
            #expect(try await cli.run("record", "-d", "2", "--name", "B").status == 0)
            // Another SQLite client (here Python's) closes the catalog last: SQLite checkpoints the
            // log and removes the catalog's -wal and -shm, as the sqlite3 shell or a backup tool would.
            let catalog = library.appendingPathComponent("catalog.sqlite").path
            let reader = try await CLIHarness.tool("python3", ["-c", "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute('SELECT count(*) FROM take').fetchall(); c.close()", catalog])
            #expect(reader.status == 0, "\(reader.stderr)")
            for side in ["-shm", "-wal"] {
                try? FileManager.default.removeItem(atPath: catalog + side)
                #expect(!FileManager.default.fileExists(atPath: catalog + side))
            }
            let filler = library.deletingLastPathComponent().appendingPathComponent("filler")
            _ = try await CLIHarness.tool("dd", ["if=/dev/zero", "of=\(filler.path)", "bs=64k"])
            var info = statvfs()
            #expect(statvfs(library.path, &info) == 0 && info.f_bavail == 0, "the disk is full")
            for args in [["list"], ["show", "Session 1/A"], ["doctor"]] {
                let r = try await cli.run(args)
                #expect(r.status == 0, "\(args): \(r.stderr)")
                #expect(!r.stderr.contains("disk I/O error"), "\(args): \(r.stderr)")
            }
            let delete = try await cli.run("delete", "Session 1/B", "--yes")
            #expect(delete.status == 0, "delete: \(delete.stderr)")
            let names = try await cli.takes().map { $0["name"] as? String }
            #expect(names == ["A"], "\(names)")
            // With room again, the catalog opens as usual, its WAL index back on disk.
            try FileManager.default.removeItem(at: filler)
            #expect(try await cli.run("list").status == 0)
        }
    }

    /// Mounts a tmpfs of `megabytes` for the duration of `body`.
    func withSmallDisk(megabytes: Int, _ body: (URL) async throws -> Void) async throws {
        let mountPoint = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-full-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: mountPoint, withIntermediateDirectories: true)
        let mounted = try await CLIHarness.tool("mount", ["-t", "tmpfs", "-o", "size=\(megabytes)m,mode=700", "tmpfs", mountPoint.path])
        try #require(mounted.status == 0, "could not mount a tmpfs: \(mounted.stderr)")
        // What a defer did: unmount and remove, whether `body` threw or not (umount is awaited).
        func unmount() async {
            _ = try? await CLIHarness.tool("umount", [mountPoint.path])
            try? FileManager.default.removeItem(at: mountPoint)
        }
        do {
            try await body(mountPoint.appendingPathComponent("library"))
        } catch {
            await unmount()
            throw error
        }
        await unmount()
    }

    @Test("the audio fills the disk: the take is kept as truncated with a matching header, exit 5, and earlier takes are intact",
          arguments: ["directory", "bundle"])
    func recordingFillsTheDisk(storage: String) async throws {
        try await withSmallDisk(megabytes: 4) { library in
            let cli = try CLIHarness(storage: storage, library: library)
            let first = try await cli.run("record", "--name", "before", "--duration", "1s", "--set", "capture.null.signal=counter", "--json")
            #expect(first.status == 0, "\(first.stderr)")

            // Unpaced null audio fills the rest of the disk at once.
            let r = try await cli.run("record", "--name", "filler", "--json", "--set", "capture.null.signal=counter",
                                      "--set", "capture.null.paced=false")
            #expect(r.status == 5, "exit \(r.status): \(r.stderr)")
            #expect(r.stderr.contains("full"), "\(r.stderr)")
            let (frames, path) = try Self.truncatedTake(report: Data(r.stdout.utf8))

            // Independent readers accept it: the header matches the audio, which is the signal's prefix.
            let py = try await CLIHarness.tool("python3", [Self.verifier, path, "counter"])
            #expect(py.status == 0, "python's wave refused the truncated take: \(py.stderr)")
            let fields = py.stdout.split(separator: " ").map(String.init)
            #expect(Int(fields.first ?? "") == frames)
            #expect(fields.count > 3 && fields[3] == "-1", "the kept audio is not the counter's prefix: \(py.stdout)")
            #expect(py.stdout.contains("header-ok"))
            let soxi = try await CLIHarness.tool("soxi", ["-s", path])
            #expect(Int(soxi.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) == frames && soxi.stderr.isEmpty)

            // The catalog agrees, the first take is untouched, and nothing is left recording.
            let takes = try await cli.takes()
            #expect(takes.count == 2)
            #expect(takes.first { $0["name"] as? String == "before" }?["state"] as? String == "complete")
            #expect(takes.first { $0["name"] as? String == "filler" }?["state"] as? String == "truncated")
            #expect(takes.first { $0["name"] as? String == "filler" }?["frames"] as? Int == frames)

            // Recording again on the full disk harms nothing: it is refused before anything is
            // written (74, with advice), or it records into the space the finished take (or the
            // library's catalog reserve, given back on a full disk) freed, kept as truncated (5)
            // or whole (0). Either way every earlier take is as it was.
            let again = try await cli.run("record", "--name", "again", "--duration", "2s", "--set", "capture.null.signal=counter")
            #expect(again.status == 74 || again.status == 5 || again.status == 0, "exit \(again.status): \(again.stderr)")
            if again.status == 74 { #expect(again.stderr.contains("Free some space"), "\(again.stderr)") }
            let after = try await cli.takes()
            #expect(!after.contains { $0["state"] as? String == "recording" })
            #expect(after.first { $0["name"] as? String == "before" }?["state"] as? String == "complete")
            #expect(after.first { $0["name"] as? String == "before" }?["frames"] as? Int == 48_000)
            #expect(after.first { $0["name"] as? String == "filler" }?["frames"] as? Int == frames)
            #expect(try await CLIHarness.tool("python3", [Self.verifier, path, "counter"]).stdout == py.stdout)
        }
    }

    @Test("a disk with too little room is warned about before recording, and a disk running low while recording once")
    func lowSpaceWarnings() async throws {
        try await withSmallDisk(megabytes: 16) { library in
            let cli = try CLIHarness(library: library)
            // 16 MiB hold about a minute of 48 kHz stereo s16: ask for ten, and hear about it first.
            let early = try await cli.run("record", "--duration", "0.5s", "--set", "storage.warn-free-minutes=10")
            #expect(early.status == 0, "\(early.stderr)")
            #expect(early.stderr.contains("has room for about 1 minute of 48000 Hz, 2 ch, s16 audio"), "\(early.stderr)")
            #expect(early.stderr.hasPrefix("tapedeck: warning: "), "a warning is a plain sentence: \(early.stderr)")

            // Now a limit the disk crosses about 3 s into a 6 s take (192 000 bytes a second, after
            // the take's 2 MiB reserve): one warning while recording, none before.
            var info = statvfs()
            try #require(statvfs(library.path, &info) == 0)
            let free = Double(info.f_bavail) * Double(info.f_frsize)
            let minutes = (free - 2_097_152 - 3 * 192_000) / (60 * 192_000)
            // --log-level debug: the developer format names the module that warned.
            let r = try await cli.run("record", "--duration", "6s", "--set", "storage.warn-free-minutes=\(minutes)", "--log-level", "debug")
            #expect(r.status == 0, "\(r.stderr)")
            #expect(r.stderr.components(separatedBy: "has room for").count == 2, "expected one warning: \(r.stderr)")
            #expect(r.stderr.contains("[TapedeckCore] The disk holding"), "the warning comes from the writer while recording: \(r.stderr)")

            // 0 turns the warnings off.
            let quiet = try await cli.run("record", "--duration", "0.5s", "--set", "storage.warn-free-minutes=0")
            #expect(quiet.status == 0 && !quiet.stderr.contains("has room for"), "\(quiet.stderr)")
        }
    }
}

/// A recording that fills the disk on any file system, without root: the quota shim
/// (`libTapedeckQuotaShim.so`, loaded with LD_PRELOAD) gives the library 4 MiB of free space and
/// fails writes past it with ENOSPC, catalog writes included.
@Suite("disk full through a byte quota", .endToEnd)
struct ByteQuotaEndToEndTests {
    static var shim: String { (try? CLIHarness.binary.deletingLastPathComponent().appendingPathComponent("libTapedeckQuotaShim.so").path) ?? "" }

    static func monotonicNanoseconds() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
    }

    /// Whether `raw` (little-endian 16-bit samples) is the frame counter's prefix.
    static func isCounterPrefix(_ raw: Data) -> Bool {
        raw.withUnsafeBytes { bytes in
            let samples = bytes.bindMemory(to: Int16.self)
            for (k, v) in samples.enumerated() where v != Int16(truncatingIfNeeded: k) { return false }
            return true
        }
    }

    @Test("--split-size on a disk with too little room for the next take: no file passes the size, the run waits for room, and says so")
    func splitSizeOnAFullDisk() async throws {
        try #require(FileManager.default.fileExists(atPath: Self.shim), "build the package first: \(Self.shim) is missing")
        var cli = try CLIHarness()
        defer { try? FileManager.default.removeItem(at: cli.library) }
        // The library and its catalog reserve exist before the quota applies.
        #expect(try await cli.run("record", "--name", "before", "--duration", "0.2s").status == 0)
        // 3.5 MiB: the first take's 2 MiB reserve, and 1.5 MiB left, under the 2 MiB the next
        // take's reserve needs (a disk with under 2 MiB free), but more than the first take's
        // 1 MiB (about 5 s of 48 kHz stereo s16). Once the first take has ended at its limit
        // and given its reserve back, the second can begin; it records until the disk is full.
        cli.extraEnvironment = ["LD_PRELOAD": Self.shim, "QUOTA_SHIM_DIR": cli.library.path, "QUOTA_SHIM_BYTES": String(3_670_016)]
        let r = try await cli.run("record", "--session", "Split", "--split-size", "1M", "--duration", "120s", "--json",
                            "--set", "capture.null.paced=false", "--set", "capture.null.signal=counter")
        cli.extraEnvironment = [:]
        #expect(r.status == 0 || r.status == 5, "exit \(r.status): \(r.stderr)")
        #expect(r.stderr.contains("reached --split-size, which no file passes"), "\(r.stderr)")
        let takes = try await cli.takes().filter { ($0["run"] as? [String: Any]) != nil }
        #expect(takes.count >= 2, "\(takes.count) takes")
        for take in takes {
            let path = try #require(take["path"] as? String)
            let size = try #require(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int)
            #expect(size <= 1_048_576, "\(take["name"] ?? "") holds \(size) bytes, more than --split-size 1M")
        }
        let report = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        let events = (report["events"] as? [[String: Any]]) ?? []
        #expect(events.contains { $0["kind"] as? String == "no-room" }, "\(events)")
    }

    @Test("the audio reaches the quota: stopped within 1 s of the first ENOSPC, exit 5, kept as truncated with a matching header",
          arguments: ["directory", "bundle"], ["wav", "flac"])
    func quotaFills(storage: String, encoder: String) async throws {
        try #require(FileManager.default.fileExists(atPath: Self.shim), "build the package first: \(Self.shim) is missing")
        var cli = try CLIHarness(storage: storage)
        defer { try? FileManager.default.removeItem(at: cli.library) }
        try FileManager.default.createDirectory(at: cli.library, withIntermediateDirectories: true)
        let first = try await cli.run("record", "--name", "before", "--duration", "1s", "--set", "capture.null.signal=counter",
                                      "--set", "encoder.name=\(encoder)")
        #expect(first.status == 0, "\(first.stderr)")

        let log = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-quota-\(UUID().uuidString).log")
        defer { try? FileManager.default.removeItem(at: log) }
        cli.extraEnvironment = ["LD_PRELOAD": Self.shim, "QUOTA_SHIM_DIR": cli.library.path,
                                "QUOTA_SHIM_BYTES": String(4 << 20), "QUOTA_SHIM_LOG": log.path]
        let (p, out, err) = try cli.start(["record", "--name", "filler", "--json", "--set", "capture.null.signal=counter",
                                           "--set", "capture.null.paced=false", "--set", "encoder.name=\(encoder)"])
        try await CLIHarness.waitForExit(p)
        let exited = Self.monotonicNanoseconds()
        cli.extraEnvironment = [:]
        let stderr = try String(contentsOf: err, encoding: .utf8)
        #expect(p.terminationStatus == 5, "exit \(p.terminationStatus): \(stderr)")
        #expect(stderr.contains("No space left") && stderr.contains("Free some space"), "\(stderr)")
        let logged = try String(contentsOf: log, encoding: .utf8)
        let refused = try #require(Int64(logged.split(separator: " ").last?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""))
        let stopping = Double(exited - refused) / 1e9
        #expect(stopping >= 0 && stopping < 1.0, "exited \(stopping) s after the first ENOSPC")

        let (frames, path) = try DiskFullEndToEndTests.truncatedTake(report: Data(contentsOf: out))

        // Independent readers: the header matches the audio, which is the counter's prefix.
        let raw: Data
        if encoder == "wav" {
            let py = try await CLIHarness.tool("python3", [DiskFullEndToEndTests.verifier, path, "counter"])
            #expect(py.status == 0 && py.stdout.contains("header-ok"), "python's wave: \(py.stdout) \(py.stderr)")
            #expect(Int(py.stdout.split(separator: " ").first ?? "") == frames)
            raw = try Data(contentsOf: URL(fileURLWithPath: path)).suffix(frames * 4)
        } else {
            let test = try await CLIHarness.tool("flac", ["-t", "-s", path])
            #expect(test.status == 0 && test.stderr.isEmpty, "flac -t: \(test.stderr)")
            let total = try await CLIHarness.tool("metaflac", ["--show-total-samples", path])
            #expect(Int(total.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) == frames)
            let decoded = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-quota-\(UUID().uuidString).raw")
            defer { try? FileManager.default.removeItem(at: decoded) }
            let d = try await CLIHarness.tool("flac", ["-d", "-s", "--force-raw-format", "--endian=little", "--sign=signed", "-o", decoded.path, path])
            #expect(d.status == 0, "\(d.stderr)")
            raw = try Data(contentsOf: decoded)
        }
        #expect(raw.count == frames * 4)
        #expect(Self.isCounterPrefix(raw), "the kept audio is not the counter's prefix")

        // The catalog agrees and the earlier take is intact.
        let takes = try await cli.takes()
        #expect(takes.count == 2)
        #expect(takes.first { $0["name"] as? String == "before" }?["state"] as? String == "complete")
        #expect(takes.first { $0["name"] as? String == "before" }?["frames"] as? Int == 48_000)
        #expect(takes.first { $0["name"] as? String == "filler" }?["frames"] as? Int == frames)
        #expect(!takes.contains { $0["state"] as? String == "recording" })
    }
}

extension ByteQuotaEndToEndTests {
    @Test("exports asked of the page leave the recording its room: refused 507 when the disk cannot hold them and ten minutes of recording, and the recording goes on")
    func exportsLeaveRoomForRecording() async throws {
        try #require(FileManager.default.fileExists(atPath: Self.shim), "build the package first: \(Self.shim) is missing")
        var cli = try CLIHarness()
        defer { try? FileManager.default.removeItem(at: cli.library) }
        #expect(try await cli.run("record", "--session", "Old", "-d", "30s", "--set", "capture.null.paced=false").status == 0)
        let temporary = cli.library.appendingPathComponent("tmp")
        try FileManager.default.createDirectory(at: temporary, withIntermediateDirectories: true)
        // 60 MB free for the library and the server's exports (one disk, as on a small recorder).
        cli.extraEnvironment = ["LD_PRELOAD": Self.shim, "QUOTA_SHIM_DIR": cli.library.path, "QUOTA_SHIM_BYTES": "60000000",
                                "TMPDIR": temporary.path, "XDG_RUNTIME_DIR": cli.library.path + "-run"]
        let (server, served, _) = try cli.start(["serve", "--listen", "127.0.0.1:0"])
        defer { kill(server.processIdentifier, SIGTERM) }
        let base = try await RecorderControlEndToEndTests.servedAddress(served)
        let old = try #require(try await cli.takes().first?["id"] as? String)
        #expect(try await RecorderControlEndToEndTests.http("POST", base + "api/record", #"{"session": "Live"}"#).status == 202)
        for format in ["wav", "aiff", "flac"] {
            let asked = try await RecorderControlEndToEndTests.http("POST", base + "api/takes/\(old)/exports", #"{"format": "\#(format)"}"#)
            #expect(asked.status == 507 && asked.body.contains("insufficient-storage") && asked.body.contains("stay free for recording"), "\(format): \(asked)")
        }
        try await Task.sleep(for: .seconds(1))
        #expect(try await RecorderControlEndToEndTests.http("POST", base + "api/stop").status == 202)
        _ = try await CLIHarness.wait(timeout: 20) {
            let body = (try? await RecorderControlEndToEndTests.http("GET", base + "api/state").body) ?? ""
            return body.contains(#""recording":false"#)
        }
        cli.extraEnvironment = [:]
        let live = try await cli.takes().filter { ($0["path"] as? String)?.contains("/live-") == true }
        #expect(live.count == 1 && live.first?["state"] as? String == "complete", "\(live)")
    }
}
