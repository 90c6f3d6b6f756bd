public import TapedeckCore
import Foundation
import Synchronization
import Testing

/// The contract every `TakeRemote` keeps, as one suite every remote's tests run, one test per
/// ``Area``: `@Test(arguments: RemoteConformance.Area.allCases) func conformance(_ area:)`
/// calling ``check(_:partSize:make:)``. Every member runs on any task; files are written to a
/// temporary folder and removed after.
public enum RemoteConformance {
    public enum Area: String, CaseIterable, Sendable {
        /// A file smaller than a part goes up whole; it reads back, lists and verifies; a download
        /// allowed fewer bytes than the object holds is refused; it carries Tapedeck's mark.
        case wholeFile
        /// A file of several parts goes up in parts and verifies.
        case parts
        /// An upload stopped after its first part resumes with its token, keeping that part.
        case resume
        /// A key that holds an object is never written again (upload and put).
        case neverReplaces
        /// Verification tells the file from a different one of the same size, and a missing key.
        case verification
        /// An abandoned upload is gone; removing objects; missing objects read as missing.
        case abandonAndRemove
        /// Keys are listed under a prefix, in order, with their sizes.
        case listing
    }

    /// Checks one area against a remote from `make`, whose multipart uploads use parts of
    /// `partSize` bytes (at least 5 MiB for S3) and send at most two at once, over keys under a
    /// fresh prefix.
    public static func check(_ area: Area, partSize: Int, make: () async throws -> any TakeRemote) async throws {
        let remote = try await make()
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-remote-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let base = "conformance-" + UUID().uuidString.prefix(8).lowercased()
        do {
            let context = Context(remote: remote, folder: folder, base: base, partSize: partSize)
            switch area {
            case .wholeFile: try await wholeFile(context)
            case .parts: try await parts(context)
            case .resume: try await resume(context)
            case .neverReplaces: try await neverReplaces(context)
            case .verification: try await verification(context)
            case .abandonAndRemove: try await abandonAndRemove(context)
            case .listing: try await listing(context)
            }
        } catch {
            await remote.shutdown()
            try? FileManager.default.removeItem(at: folder)
            throw error
        }
        await remote.shutdown()
        try? FileManager.default.removeItem(at: folder)
    }

    struct Context {
        let remote: any TakeRemote
        let folder: URL
        let base: String
        let partSize: Int

        func key(_ name: String) throws -> RemoteKey { try RemoteKey(base + "/" + name) }

        /// A file of `size` seeded bytes.
        func file(_ name: String, size: Int, seed: UInt64) throws -> URL {
            var state = seed &+ 0x9E37_79B9_7F4A_7C15
            var bytes = [UInt8](repeating: 0, count: size)
            for i in 0..<size {
                state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                bytes[i] = UInt8(truncatingIfNeeded: state >> 33)
            }
            let url = folder.appendingPathComponent(name)
            try Data(bytes).write(to: url)
            return url
        }

        func upload(_ url: URL, _ key: RemoteKey, resuming: String? = nil) async throws -> ContentDigest {
            try await remote.upload(url, to: key, resuming: resuming, options: UploadOptions(), started: { _ in }, progress: { _ in })
        }
    }

    static func sha256(_ url: URL) throws -> String {
        let (status, output) = try ChildProcess.run(["sha256sum", url.path])
        #expect(status == 0)
        return String(output.prefix(64))
    }

    static func wholeFile(_ c: Context) async throws {
        let url = try c.file("small.wav", size: 100_000, seed: 1)
        let key = try c.key("small.wav")
        #expect(try await c.remote.verify(key, against: url) == .missing)
        let digest = try await c.upload(url, key)
        #expect(digest == ContentDigest(size: 100_000, sha256: try sha256(url)))
        guard case .matches(let d, _) = try await c.remote.verify(key, against: url) else {
            Issue.record("a file just uploaded does not verify")
            return
        }
        #expect(d == digest)
        let back = c.folder.appendingPathComponent("back.wav")
        let got = try await c.remote.download(key, to: back, limit: 100_000, progress: { _ in })
        #expect(got == digest)
        #expect(try sha256(back) == digest.sha256)
        #expect(try await c.remote.get(key, limit: 1 << 20) == (try Data(contentsOf: url)))
        // One byte more than allowed: refused, and no more than the limit was written.
        let short = c.folder.appendingPathComponent("short.wav")
        do {
            _ = try await c.remote.download(key, to: short, limit: 99_999, progress: { _ in })
            Issue.record("a download larger than its limit was accepted")
        } catch let error as TapedeckError {
            #expect(error.code == .corruptFile, "\(error)")
        }
        let size = (try? FileManager.default.attributesOfItem(atPath: short.path)[.size] as? Int) ?? 0
        #expect(size <= 99_999)
        // Tapedeck's objects carry its mark; a key with no object has none.
        #expect(try await c.remote.sentByTapedeck(key))
        #expect(try await !c.remote.sentByTapedeck(try c.key("absent.wav")))
    }

    static func parts(_ c: Context) async throws {
        let size = c.partSize * 2 + 12_345
        let url = try c.file("long.wav", size: size, seed: 2)
        let key = try c.key("long.wav")
        let seen = Mutex<[Int64]>([])
        let digest = try await c.remote.upload(url, to: key, resuming: nil, options: UploadOptions(), started: { _ in },
                                               progress: { n in seen.withLock { $0.append(n) } })
        #expect(digest == ContentDigest(size: Int64(size), sha256: try sha256(url)))
        #expect(seen.withLock { $0.max() } == Int64(size), "progress reaches the file's size")
        guard case .matches = try await c.remote.verify(key, against: url) else {
            Issue.record("a file uploaded in parts does not verify")
            return
        }
        let back = c.folder.appendingPathComponent("back.wav")
        #expect(try await c.remote.download(key, to: back, limit: Int64(size), progress: { _ in }) == digest)
        #expect(try await c.remote.sentByTapedeck(key), "an object uploaded in parts carries Tapedeck's mark")
    }

    static func resume(_ c: Context) async throws {
        let size = c.partSize * 6 + 999
        let url = try c.file("resumed.wav", size: size, seed: 3)
        let key = try c.key("resumed.wav")
        let token = Mutex<String?>(nil)
        let sentOnce = Mutex<Int64>(0)
        // The upload is slowed to one part's size a second.
        let task = Task {
            try await c.remote.upload(url, to: key, resuming: nil, options: UploadOptions(bytesPerSecond: Int64(c.partSize)), started: { t in
                token.withLock { $0 = t }
            }, progress: { n in sentOnce.withLock { $0 = max($0, n) } })
        }
        // Two parts go at once, sharing the rate: once both are handed over, a second more lets
        // their answers come back (the next parts wait for the rate), then the upload is stopped.
        let deadline = Date().addingTimeInterval(60)
        while sentOnce.withLock({ $0 }) < Int64(2 * c.partSize) && Date() < deadline { try await Task.sleep(for: .milliseconds(20)) }
        try await Task.sleep(for: .seconds(1))
        task.cancel()
        _ = try? await task.value
        let resumeToken = try #require(token.withLock { $0 }, "a multipart upload gives its token before sending")
        #expect(sentOnce.withLock { $0 } < Int64(size), "the first upload was stopped before its end")
        #expect(try await c.remote.verify(key, against: url) == .missing, "an unfinished upload is not an object")
        let first = Mutex<Int64?>(nil)
        let digest = try await c.remote.upload(url, to: key, resuming: resumeToken, options: UploadOptions(), started: { _ in
            Issue.record("a resumable upload was begun anew instead of resumed")
        }, progress: { n in first.withLock { if $0 == nil { $0 = n } } })
        #expect(digest == ContentDigest(size: Int64(size), sha256: try sha256(url)))
        #expect((first.withLock { $0 } ?? 0) >= Int64(c.partSize), "the part sent before the stop is kept")
        // The digest says how much was already there: whole parts, fewer than all of them.
        let resumed = try #require(digest.resumedBytes, "a resumed upload says how many bytes were already there")
        #expect(resumed >= Int64(c.partSize) && resumed < Int64(size) && resumed % Int64(c.partSize) == 0, "resumed \(resumed) of \(size)")
        guard case .matches = try await c.remote.verify(key, against: url) else {
            Issue.record("a resumed upload does not verify")
            return
        }
        #expect(try await c.remote.unfinishedUploads(under: c.base).isEmpty)
    }

    static func neverReplaces(_ c: Context) async throws {
        let a = try c.file("a.wav", size: 5_000, seed: 4)
        let b = try c.file("b.wav", size: c.partSize + 10, seed: 5)
        let key = try c.key("one.wav")
        _ = try await c.upload(a, key)
        for file in [a, b] {
            do {
                _ = try await c.upload(file, key)
                Issue.record("an upload replaced an object")
            } catch let error as TapedeckError {
                #expect(error.code == .alreadyExists, "\(error)")
            }
        }
        guard case .matches = try await c.remote.verify(key, against: a) else {
            Issue.record("the first object was changed")
            return
        }
        let manifest = try c.key("one.json")
        #expect(try await c.remote.put(Data("first".utf8), at: manifest))
        #expect(try await !c.remote.put(Data("second".utf8), at: manifest))
        #expect(try await c.remote.get(manifest, limit: 100) == Data("first".utf8))
        #expect(try await c.remote.sentByTapedeck(manifest), "a manifest carries Tapedeck's mark")
    }

    static func verification(_ c: Context) async throws {
        for (name, size) in [("v-small.wav", 40_000), ("v-long.wav", c.partSize * 2 + 1)] {
            let good = try c.file(name, size: size, seed: 6)
            let other = try c.file("other-" + name, size: size, seed: 7)
            let shorter = try c.file("short-" + name, size: size - 1, seed: 6)
            let key = try c.key(name)
            _ = try await c.upload(good, key)
            guard case .matches = try await c.remote.verify(key, against: good) else {
                Issue.record("\(name) does not verify")
                continue
            }
            guard case .differs = try await c.remote.verify(key, against: other) else {
                Issue.record("\(name): other bytes of the same size verified")
                continue
            }
            guard case .differs = try await c.remote.verify(key, against: shorter) else {
                Issue.record("\(name): a shorter file verified")
                continue
            }
        }
        #expect(try await c.remote.verify(try c.key("absent.wav"), against: try c.file("x", size: 10, seed: 8)) == .missing)
    }

    static func abandonAndRemove(_ c: Context) async throws {
        let url = try c.file("left.wav", size: c.partSize * 2 + 5, seed: 9)
        let key = try c.key("left.wav")
        let token = Mutex<String?>(nil)
        let task = Task {
            try await c.remote.upload(url, to: key, resuming: nil, options: UploadOptions(bytesPerSecond: 1_000_000), started: { t in
                token.withLock { $0 = t }
            }, progress: { _ in })
        }
        let deadline = Date().addingTimeInterval(30)
        while token.withLock({ $0 }) == nil && Date() < deadline { try await Task.sleep(for: .milliseconds(20)) }
        task.cancel()
        _ = try? await task.value
        let begun = try #require(token.withLock { $0 })
        #expect(try await c.remote.unfinishedUploads(under: c.base).contains { $0.token == begun && $0.key == key.rawValue })
        try await c.remote.abandon(begun, key: key)
        #expect(try await !c.remote.unfinishedUploads(under: c.base).contains { $0.token == begun })
        try await c.remote.abandon(begun, key: key)  // gone already: not an error
        let small = try c.file("gone.wav", size: 1_000, seed: 10)
        let goneKey = try c.key("gone.wav")
        _ = try await c.upload(small, goneKey)
        try await c.remote.remove(goneKey)
        try await c.remote.remove(goneKey)
        #expect(try await c.remote.verify(goneKey, against: small) == .missing)
        #expect(try await c.remote.get(goneKey, limit: 10_000) == nil)
        do {
            _ = try await c.remote.download(goneKey, to: c.folder.appendingPathComponent("nothing"), limit: 1 << 20, progress: { _ in })
            Issue.record("a missing object downloaded")
        } catch let error as TapedeckError {
            #expect(error.code == .notFound)
        }
    }

    static func listing(_ c: Context) async throws {
        let names = ["m1/s1/b.json", "m1/s1/a.wav", "m2/s9/z.flac", "m1/s2/c.wav"]
        for (i, name) in names.enumerated() {
            _ = try await c.upload(try c.file("f\(i)", size: 100 + i, seed: UInt64(20 + i)), try c.key(name))
        }
        let all = try await c.remote.list(under: c.base + "/")
        #expect(all.map(\.key) == names.map { c.base + "/" + $0 }.sorted())
        #expect(all.first { $0.key.hasSuffix("z.flac") }?.size == 102)
        let m1 = try await c.remote.list(under: c.base + "/m1/")
        #expect(m1.count == 3)
        #expect(try await c.remote.list(under: c.base + "/m3/").isEmpty)
    }
}
