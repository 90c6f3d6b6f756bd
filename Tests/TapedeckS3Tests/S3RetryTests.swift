import Crypto
import Foundation
import TapedeckCore
@testable import TapedeckS3
import TapedeckTesting
import Testing

/// The S3 remote's retries end to end: a fault-injecting proxy (``FaultProxy``) in front of a real
/// S3 server answers chosen requests 429, 5xx or 4xx; its log of arrivals shows what was sent
/// again, and when.
@Suite(.serialized, .timeLimit(.minutes(10)))
struct S3RetryTests {
    typealias Rule = FaultProxy.Rule

    /// A folder with a file of `size` bytes of a fixed pattern.
    static func file(_ name: String, size: Int, in folder: URL) throws -> URL {
        let url = folder.appendingPathComponent(name)
        try Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ $0 >> 11) }).write(to: url)
        return url
    }

    static func folder() throws -> URL {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-retry-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return folder
    }

    static func sha256(_ url: URL) throws -> String {
        SigV4Signer.hex(SHA256.hash(data: try Data(contentsOf: url)))
    }

    /// Checks that each of `rule`'s faults was answered and then the request sent again, no
    /// sooner than its `Retry-After`, until it passed.
    static func expectRetried(_ rule: Rule, by proxy: FaultProxy, sourceLocation: SourceLocation = #_sourceLocation) {
        let seen = proxy.arrivals(rule)
        let faults = seen.indices.filter { seen[$0].fault == rule.status }
        #expect(faults.count == rule.times, "\(rule.method) \(rule.path): \(faults.count) answered \(rule.status), not \(rule.times): \(seen)",
                sourceLocation: sourceLocation)
        for i in faults {
            guard i + 1 < seen.count else {
                Issue.record("\(rule.method) \(rule.path) was not sent again after \(rule.status): \(seen)", sourceLocation: sourceLocation)
                continue
            }
            if let wait = rule.retryAfter.flatMap(Double.init) {
                let gap = seen[i + 1].time - seen[i].time
                #expect(gap >= wait - 0.05, "\(rule.method) \(rule.path) was sent again \(gap) s after a \(rule.status) with Retry-After: \(wait)",
                        sourceLocation: sourceLocation)
            }
        }
        #expect(seen.last?.action == "pass", "\(rule.method) \(rule.path) never passed: \(seen)", sourceLocation: sourceLocation)
    }

    @Test("429 and 503 with Retry-After, 502, 500 and 504 are retried, Retry-After honoured, and the upload verifies",
          arguments: S3Server.Kind.allCases)
    func retried(_ kind: S3Server.Kind) async throws {
        let server = try await S3Server.startAsync(kind)
        defer { server.remove() }
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        // Three parts of 5 MiB (the last short), sent two at a time.
        let long = try Self.file("long.wav", size: 2 * S3RemoteTests.partSize + 100, in: folder)
        let small = try Self.file("small.wav", size: 70_000, in: folder)
        let plan = [
            Rule(method: "HEAD", path: "long.wav", status: 503, retryAfter: "1"),
            Rule(method: "POST", path: "long.wav?uploads", status: 500),
            Rule(method: "PUT", path: "partNumber=1&", status: 429, retryAfter: "1"),
            // Two seconds: longer than any back-off before a first retry (at most 1 s), so only a
            // client that honours Retry-After waits that long.
            Rule(method: "PUT", path: "partNumber=2&", status: 503, retryAfter: "2"),
            Rule(method: "PUT", path: "partNumber=3&", status: 502, times: 2),
            Rule(method: "POST", path: "long.wav?uploadId=", status: 504),
            Rule(method: "PUT", path: "small.wav", status: 429, retryAfter: "1"),
            Rule(method: "GET", path: "long.wav", status: 503, retryAfter: "1"),
        ]
        let proxy = try await FaultProxy.startAsync(upstream: server.port, plan: plan)
        defer { proxy.stop() }
        let remote = try S3RemoteTests.remote(server, endpoint: proxy.endpoint)
        let longKey = try RemoteKey("m/s/long.wav")
        let smallKey = try RemoteKey("m/s/small.wav")

        let digest = try await remote.upload(long, to: longKey, resuming: nil, options: UploadOptions(), started: { _ in }, progress: { _ in })
        #expect(digest == ContentDigest(size: Int64(2 * S3RemoteTests.partSize + 100), sha256: try Self.sha256(long)))
        let smallDigest = try await remote.upload(small, to: smallKey, resuming: nil, options: UploadOptions(), started: { _ in }, progress: { _ in })
        #expect(smallDigest == ContentDigest(size: 70_000, sha256: try Self.sha256(small)))
        for (key, url) in [(longKey, long), (smallKey, small)] {
            guard case .matches = try await remote.verify(key, against: url) else {
                Issue.record("\(key) does not verify after the retries")
                continue
            }
        }
        // The download's GET is retried too (before its body starts), and brings the same bytes.
        let back = folder.appendingPathComponent("back.wav")
        #expect(try await remote.download(longKey, to: back, limit: digest.size, progress: { _ in }) == digest)
        await remote.shutdown()

        for rule in plan { Self.expectRetried(rule, by: proxy) }
        // Each part went through once its faults were used up: nothing sent more often than that.
        for rule in plan where rule.method == "PUT" || rule.method == "POST" {
            #expect(proxy.arrivals(rule).count == rule.times + 1, "\(rule.path): \(proxy.arrivals(rule))")
        }
        // Also checked by a fresh remote, which knows nothing of the upload but the server's answers.
        let fresh = try S3RemoteTests.remote(server)
        if case .matches = try await fresh.verify(longKey, against: long) {} else { Issue.record("long.wav does not verify on the server itself") }
        await fresh.shutdown()
    }

    @Test("a 400 and a 501 are final: answered once, not sent again, and the upload fails")
    func notRetried() async throws {
        let server = try await S3Server.startAsync(.rclone)
        defer { server.remove() }
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let first = try Self.file("first.wav", size: 10_000, in: folder)
        let second = try Self.file("second.wav", size: 2 * S3RemoteTests.partSize + 100, in: folder)
        let badRequest = Rule(method: "HEAD", path: "first.wav", status: 400)
        let notImplemented = Rule(method: "PUT", path: "partNumber=1&", status: 501)
        let proxy = try await FaultProxy.startAsync(upstream: server.port, plan: [badRequest, notImplemented])
        defer { proxy.stop() }
        let remote = try S3RemoteTests.remote(server, endpoint: proxy.endpoint)
        for (url, rule) in [(first, badRequest), (second, notImplemented)] {
            let key = try RemoteKey("m/s/" + url.lastPathComponent)
            do {
                _ = try await remote.upload(url, to: key, resuming: nil, options: UploadOptions(), started: { _ in }, progress: { _ in })
                Issue.record("\(url.lastPathComponent) was uploaded through a \(rule.status)")
            } catch let error as TapedeckError {
                #expect(error.code == .remoteUnavailable, "\(error)")
                #expect(error.message.contains("\(rule.status)"), "\(error.message)")
            }
            // Longer than a first retry's back-off (at most 1 s): a retry would have arrived by now.
            try await Task.sleep(for: .milliseconds(1500))
            let seen = proxy.arrivals(rule)
            #expect(seen.count == 1 && seen.first?.fault == rule.status, "\(rule.method) \(rule.path) was sent again: \(seen)")
        }
        await remote.shutdown()
    }

    @Test("a cancelled upload is not sent again: cancelling while the server holds its answer ends it at once")
    func cancelled() async throws {
        let server = try await S3Server.startAsync(.rclone)
        defer { server.remove() }
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let url = try Self.file("held.wav", size: 300_000, in: folder)
        // The answer (a 503 a retry would follow at once) comes only after 10 s.
        let held = Rule(method: "PUT", path: "held.wav", status: 503, retryAfter: "0", hold: 10)
        let proxy = try await FaultProxy.startAsync(upstream: server.port, plan: [held])
        defer { proxy.stop() }
        let remote = try S3RemoteTests.remote(server, endpoint: proxy.endpoint)
        let key = try RemoteKey("m/s/held.wav")
        let upload = Task {
            try await remote.upload(url, to: key, resuming: nil, options: UploadOptions(), started: { _ in }, progress: { _ in })
        }
        let deadline = ContinuousClock.now + .seconds(20)
        while proxy.arrivals(held).isEmpty && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        try #require(proxy.arrivals(held).count == 1, "the PUT never reached the proxy")
        let cancelled = ContinuousClock.now
        upload.cancel()
        let result = await upload.result
        #expect(ContinuousClock.now - cancelled < .seconds(5), "the upload waited for the held answer")
        switch result {
        case .success: Issue.record("a cancelled upload succeeded")
        case .failure(let error): #expect(error is CancellationError, "\(error)")
        }
        try await Task.sleep(for: .milliseconds(2500))
        #expect(proxy.arrivals(held).count == 1, "the cancelled PUT was sent again: \(proxy.arrivals(held))")
        await remote.shutdown()
    }
}
