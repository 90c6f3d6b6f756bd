import Foundation
import TapedeckTesting
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `push` checking verified takes again: a remote copy that went missing or stale is sent again
/// (`--verify-remote`, or by itself for takes retention or `fleet doctor` could not confirm), and
/// `sync.keep-local` counts from when the library got a take. Against `rclone serve s3`, whose
/// objects are files the tests change behind its back.
@Suite("push checks verified takes again", .endToEnd, .serialized)
struct PushRecheckEndToEndTests {
    /// The files under the server's bucket folder (`fleet/...`) ending in `suffix`.
    static func objects(_ server: S3Server, suffix: String) -> [URL] {
        let root = server.dataDirectory.appendingPathComponent(server.bucket).appendingPathComponent("fleet")
        let found = FileManager.default.enumerator(atPath: root.path)?.allObjects.compactMap { $0 as? String } ?? []
        return found.filter { $0.hasSuffix(suffix) }.map { root.appendingPathComponent($0) }
    }

    static func results(_ r: CLIHarness.Result) -> [String] {
        FleetEndToEndTests.json(r.stdout).compactMap { $0["result"] as? String }
    }

    @Test("a verified take whose audio the remote lost: fleet doctor names push --verify-remote, which sends it again; a take fleet doctor found missing is sent by a plain push")
    func remoteCopyLost() async throws {
        let server = try await S3Server.startAsync(.rclone)
        defer { server.remove() }
        let (folder, file) = try FleetEndToEndTests.workspace(server)
        defer { try? FileManager.default.removeItem(at: folder) }
        let studio = FleetEndToEndTests.machine(file, server, folder: folder, name: "studio")
        #expect(try await studio.run("record", "--machine", "studio", "-d", "1", "--name", "lost").status == 0)
        #expect(try await studio.run("push", "--machine", "studio").status == 0)
        let local = try #require(try await studio.takes().first?["path"] as? String)

        // A lifecycle rule (or a person) removes the audio object; the manifest stays.
        let audio = try #require(Self.objects(server, suffix: ".wav").first)
        try FileManager.default.removeItem(at: audio)
        try await Task.sleep(for: .seconds(1.5))  // rclone's folder cache (--dir-cache-time 1s)
        let doctor = try await studio.run("fleet", "doctor", "--machine", "studio")
        #expect(doctor.status == 1, "\(doctor.stdout) \(doctor.stderr)")
        #expect(doctor.stdout.contains("`tapedeck push --verify-remote` on studio") && !doctor.stdout.contains("`tapedeck doctor`"), "\(doctor.stdout)")

        // The command fleet doctor names sends it again.
        let verify = try await studio.run("push", "--machine", "studio", "--verify-remote", "--json")
        #expect(verify.status == 0, "\(verify.stdout) \(verify.stderr)")
        #expect(Self.results(verify) == ["resent"], "\(verify.stdout)")
        #expect(FileManager.default.fileExists(atPath: audio.path))
        await #expect(try FleetEndToEndTests.sha256(audio.path) == (try FleetEndToEndTests.sha256(local)))
        // Checked again with everything there: confirmed, nothing sent.
        let again = try await studio.run("push", "--machine", "studio", "--verify-remote", "--json")
        #expect(again.status == 0 && Self.results(again) == ["confirmed"], "\(again.stdout) \(again.stderr)")

        // Lost again: fleet doctor, run in this library, marks the take, and a plain push sends it.
        try FileManager.default.removeItem(at: audio)
        try await Task.sleep(for: .seconds(1.5))
        #expect(try await studio.run("fleet", "doctor", "--machine", "studio").status == 1)
        let plain = try await studio.run("push", "--machine", "studio", "--json")
        #expect(plain.status == 0 && Self.results(plain) == ["resent"], "\(plain.stdout) \(plain.stderr)")
        try await Task.sleep(for: .seconds(1.5))
        let healthy = try await studio.run("fleet", "doctor", "--machine", "studio")
        #expect(healthy.status == 0 && healthy.stdout.contains("no problems"), "\(healthy.stdout) \(healthy.stderr)")
        #expect(try await studio.run("push", "--machine", "studio").stdout.contains("nothing to push"))
    }

    @Test("a take changed here after its push: retention keeps it and names it, the next push replaces the stale remote copy, and retention then deletes it")
    func staleRemoteCopy() async throws {
        let server = try await S3Server.startAsync(.rclone)
        defer { server.remove() }
        let (folder, file) = try FleetEndToEndTests.workspace(server)
        defer { try? FileManager.default.removeItem(at: folder) }
        let studio = FleetEndToEndTests.machine(file, server, folder: folder, name: "studio")
        #expect(try await studio.run("record", "--machine", "studio", "-d", "1", "--name", "kept").status == 0)
        #expect(try await studio.run("push", "--machine", "studio").status == 0)
        let take = try #require(try await studio.takes().first)
        let path = try #require(take["path"] as? String)
        let shortID = String(try #require(take["id"] as? String).prefix(8))

        // The take's file changes here after the push (as `tapedeck loudness` rewrites its metadata).
        try await Task.sleep(for: .seconds(2.5))
        let handle = try #require(FileHandle(forUpdatingAtPath: path))
        let size = try handle.seekToEnd()
        try handle.seek(toOffset: size - 64)
        try handle.write(contentsOf: Data(repeating: 0x55, count: 64))
        try handle.close()
        try await Task.sleep(for: .seconds(2.5))

        let kept = try await studio.run("push", "--machine", "studio", "--set", "sync.keep-local=2s")
        #expect(kept.status == 0, "\(kept.stderr)")
        #expect(kept.stderr.contains("Kept Session 1/kept [\(shortID)]") && kept.stderr.contains("tapedeck push"), "\(kept.stderr)")
        #expect(try await studio.takes().count == 1, "a take whose remote copy is stale is kept")
        let doctor = try await studio.run("doctor", "--machine", "studio")
        #expect(doctor.stdout.contains("could not be confirmed"), "\(doctor.stdout)")

        // The next push, without a flag, checks it again and replaces the stale copy.
        let push = try await studio.run("push", "--machine", "studio", "--json")
        #expect(push.status == 0 && Self.results(push) == ["resent"], "\(push.stdout) \(push.stderr)")
        let listed = FleetEndToEndTests.json(try await studio.run("fleet", "list", "--machine", "studio", "--json").stdout)
        await #expect(listed.first?["sha256"] as? String == (try FleetEndToEndTests.sha256(path)), "the remote holds the take as it is now")
        let remote = try #require(Self.objects(server, suffix: ".wav").first)
        await #expect(try FleetEndToEndTests.sha256(remote.path) == (try FleetEndToEndTests.sha256(path)))

        // Confirmed now: retention deletes it.
        let pruned = try await studio.run("push", "--machine", "studio", "--set", "sync.keep-local=2s")
        #expect(pruned.status == 0 && pruned.stdout.contains("deleted locally"), "\(pruned.stdout) \(pruned.stderr)")
        #expect(try await studio.takes().isEmpty)
    }

    @Test("keep-local counts from when the library got a take: a file dated 2024, imported now, is kept after its first push")
    func keepLocalCountsFromImport() async throws {
        let server = try await S3Server.startAsync(.rclone)
        defer { server.remove() }
        let (folder, file) = try FleetEndToEndTests.workspace(server)
        defer { try? FileManager.default.removeItem(at: folder) }
        let studio = FleetEndToEndTests.machine(file, server, folder: folder, name: "studio")
        let old = folder.appendingPathComponent("old.wav")
        let made = try await CLIHarness.tool("sox", ["-n", "-r", "48000", "-c", "2", "-b", "16", old.path, "synth", "1", "sine", "440"])
        try #require(made.status == 0, "\(made.stderr)")
        try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSince1970: 1_704_067_200)], ofItemAtPath: old.path)  // 2024-01-01
        let imported = try await studio.run("import", "--machine", "studio", old.path)
        #expect(imported.status == 0, "\(imported.stderr)")

        let first = try await studio.run("push", "--machine", "studio", "--set", "sync.keep-local=1h", "--json")
        #expect(first.status == 0 && Self.results(first) == ["uploaded"], "\(first.stdout) \(first.stderr)")
        #expect(try await studio.takes().count == 1, "imported a moment ago: kept for an hour, whatever the file's date")

        // Its age in the library counts: older than the limit, it goes.
        try await Task.sleep(for: .seconds(2.5))
        let later = try await studio.run("push", "--machine", "studio", "--set", "sync.keep-local=2s")
        #expect(later.status == 0 && later.stdout.contains("deleted locally"), "\(later.stdout) \(later.stderr)")
        #expect(try await studio.takes().isEmpty)
    }
}
