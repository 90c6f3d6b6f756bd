import Foundation
import Logging
import NIOCore
import TapedeckCore
@testable import TapedeckS3
import TapedeckTesting
import Testing

/// The S3 remote against a hostile server: a proxy (``FaultProxy``) in front of `rclone serve s3`
/// plays listings that never end, bodies that never end, answers dripped a byte at a time and
/// error messages that forge lines. Each ends in seconds with an error naming the server.
@Suite(.serialized, .timeLimit(.minutes(5)))
struct S3HostileServerTests {
    typealias Rule = FaultProxy.Rule

    /// A server, a proxy in front of it playing `plan`, and a remote through the proxy.
    static func hostile(_ plan: [Rule]) async throws -> (S3Server, FaultProxy, S3Remote) {
        let server = try await S3Server.startAsync(.rclone)
        let proxy = try await FaultProxy.startAsync(upstream: server.port, plan: plan)
        return (server, proxy, try S3RemoteTests.remote(server, endpoint: proxy.endpoint))
    }

    /// Runs `body`, which must fail with `.remoteUnavailable` (exit 69) naming `proxy`, in under
    /// `seconds`.
    static func expectStopped(by proxy: FaultProxy, within seconds: Int = 20, sourceLocation: SourceLocation = #_sourceLocation,
                              _ body: () async throws -> Void) async {
        let start = ContinuousClock.now
        do {
            try await body()
            Issue.record("a hostile listing ended without an error", sourceLocation: sourceLocation)
        } catch let error as TapedeckError {
            #expect(error.code == .remoteUnavailable && error.code.exitStatus == 69, "\(error)", sourceLocation: sourceLocation)
            #expect(error.message.contains(proxy.endpoint), "the message names the server: \(error.message)", sourceLocation: sourceLocation)
        } catch {
            Issue.record("\(error)", sourceLocation: sourceLocation)
        }
        #expect(ContinuousClock.now - start < .seconds(seconds), sourceLocation: sourceLocation)
    }

    @Test("a listing that repeats its continuation token, or pages on with nothing new, ends with exit 69", arguments: [false, true])
    func endlessObjectListing(_ newToken: Bool) async throws {
        let rule = Rule(method: "GET", path: "list-type=2", times: 1000, action: .loop, newToken: newToken)
        let (server, proxy, remote) = try await Self.hostile([rule])
        defer {
            proxy.stop()
            server.remove()
        }
        await Self.expectStopped(by: proxy) { _ = try await remote.list(under: "") }
        #expect(proxy.arrivals(rule).count <= 3, "the listing went on: \(proxy.arrivals(rule).count) pages")
        await remote.shutdown()
    }

    @Test("ListParts and ListMultipartUploads that never end are stopped too", arguments: [false, true])
    func endlessPartAndUploadListings(_ newToken: Bool) async throws {
        let parts = Rule(method: "GET", path: "uploadId=", times: 1000, action: .loop, newToken: newToken)
        let uploads = Rule(method: "GET", path: "?uploads", times: 1000, action: .loop, newToken: newToken)
        let (server, proxy, remote) = try await Self.hostile([parts, uploads])
        defer {
            proxy.stop()
            server.remove()
        }
        let folder = try S3RetryTests.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let file = try S3RetryTests.file("resumed.wav", size: 10_000, in: folder)
        // Resuming an upload asks the server for its parts first.
        await Self.expectStopped(by: proxy) {
            _ = try await remote.upload(file, to: try RemoteKey("m/s/resumed.wav"), resuming: "an-upload", options: UploadOptions(),
                                        started: { _ in }, progress: { _ in })
        }
        await Self.expectStopped(by: proxy) { _ = try await remote.unfinishedUploads(under: "") }
        #expect(proxy.arrivals(parts).count <= 3 && proxy.arrivals(uploads).count <= 3)
        await remote.shutdown()
    }

    @Test("a download stops as soon as the body passes the size expected, whether announced or not")
    func endlessBody() async throws {
        let endless = Rule(method: "GET", path: "endless.wav", action: .endless)
        let (server, proxy, remote) = try await Self.hostile([endless])
        defer {
            proxy.stop()
            server.remove()
        }
        let folder = try S3RetryTests.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let small = try S3RetryTests.file("endless.wav", size: 100_000, in: folder)
        let key = try RemoteKey("m/s/endless.wav")
        _ = try await remote.upload(small, to: key, resuming: nil, options: UploadOptions(), started: { _ in }, progress: { _ in })
        let target = folder.appendingPathComponent("back.wav")
        let start = ContinuousClock.now
        do {
            _ = try await remote.download(key, to: target, limit: 100_000, progress: { _ in })
            Issue.record("an endless body was taken")
        } catch let error as TapedeckError {
            #expect(error.code == .corruptFile, "\(error)")
            #expect(error.message.contains("100000"), "\(error.message)")
        }
        #expect(ContinuousClock.now - start < .seconds(10))
        let written = (try FileManager.default.attributesOfItem(atPath: target.path)[.size] as? Int) ?? -1
        #expect(written <= 100_000, "\(written) bytes written for a take of 100000")
        await remote.shutdown()
    }

    @Test("an answer dripped a byte at a time is given up after its deadline and tried once more, not five times")
    func drippedAnswer() async throws {
        let drip = Rule(method: "GET", path: "list-type=2", times: 10, action: .drip, interval: 0.3, size: 1000)
        let server = try await S3Server.startAsync(.rclone)
        defer { server.remove() }
        let proxy = try await FaultProxy.startAsync(upstream: server.port, plan: [drip])
        defer { proxy.stop() }
        let retry = S3RetryPolicy(maxAttempts: 5, baseDelay: .milliseconds(10), maxDelay: .milliseconds(10), maxRetryAfter: .seconds(1),
                                  jitter: { 0 })
        let timeouts = S3Client.Timeouts(connect: .seconds(5), idle: .seconds(5), write: .seconds(5), answer: .seconds(1), completion: .seconds(1))
        let client = try S3Client(endpoint: proxy.endpoint, bucket: server.bucket, region: "us-east-1", pathStyle: true,
                                  credentials: S3Credentials(accessKeyID: server.accessKeyID, secretAccessKey: server.secretAccessKey),
                                  logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }), endpointKey: "sync.s3.endpoint",
                                  retry: retry, timeouts: timeouts)
        let start = ContinuousClock.now
        do {
            _ = try await client.send(.GET, key: "", query: [("list-type", "2")])
            Issue.record("a dripped answer was waited for to its end")
        } catch let error as TapedeckError {
            #expect(error.code == .remoteUnavailable, "\(error)")
            #expect(error.message.contains(proxy.endpoint) && error.message.contains("within 1 s"), "\(error.message)")
        }
        // Two attempts of about a second each; the drip alone would take 300 s. (The bound leaves
        // room for a loaded machine: it tells a deadline that fired from one that did not.)
        #expect(ContinuousClock.now - start < .seconds(60))
        #expect(proxy.arrivals(drip).count == 2, "\(proxy.arrivals(drip))")
        await client.shutdown()
    }

    @Test("a server's error message cannot forge a line or drive the terminal: control characters come out escaped")
    func serverTextEscaped() async throws {
        let say = Rule(method: "GET", path: "list-type=2", status: 400, action: .say,
                       message: "Bad\ntapedeck: everything is fine\u{1B}[2J\u{202E}")
        let (server, proxy, remote) = try await Self.hostile([say])
        defer {
            proxy.stop()
            server.remove()
        }
        do {
            _ = try await remote.list(under: "")
            Issue.record("an error answer was taken as a listing")
        } catch let error as TapedeckError {
            #expect(!error.message.unicodeScalars.contains { $0.value < 0x20 || $0 == "\u{202E}" }, "\(error.message)")
            #expect(error.message.contains("Bad\\ntapedeck: everything is fine\\e[2J"), "\(error.message)")
        }
        await remote.shutdown()
    }

    @Test("Tapedeck's objects carry its mark; another program's object in the same bucket does not")
    func mark() async throws {
        let server = try await S3Server.startAsync(.rclone)
        defer { server.remove() }
        let remote = try S3RemoteTests.remote(server, prefix: "")
        let folder = try S3RetryTests.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let ours = try RemoteKey("m/s/ours.wav")
        _ = try await remote.upload(try S3RetryTests.file("ours.wav", size: 1000, in: folder), to: ours, resuming: nil,
                                    options: UploadOptions(), started: { _ in }, progress: { _ in })
        // Another program writes with its own client: no mark.
        let response = try await remote.client.send(.PUT, key: "invoices/1.pdf", body: ByteBuffer(string: "%PDF-1.4"))
        #expect((200..<300).contains(response.status))
        #expect(try await remote.sentByTapedeck(ours))
        #expect(try await !remote.sentByTapedeck(try RemoteKey("invoices/1.pdf")))
        await remote.shutdown()
    }
}
