import Foundation
import Logging
import TapedeckCore
@testable import TapedeckS3
import TapedeckTesting
import Testing

/// The S3 remote against two real S3 implementations started on loopback for each test:
/// `rclone serve s3` and `moto_server`.
@Suite(.serialized, .timeLimit(.minutes(10)))
struct S3RemoteTests {
    static let partSize = 5 * 1024 * 1024

    static func remote(_ server: S3Server, endpoint: String? = nil, secret: String? = nil, prefix: String = "fleet") throws -> S3Remote {
        var values: [String: SettingValue] = [
            "endpoint": .string(endpoint ?? server.endpoint), "bucket": .string(server.bucket), "path-style": .bool(true),
            "prefix": .string(prefix), "part-size-mib": .int(5), "concurrency": .int(2),
        ]
        for d in S3Settings.declarations where values[d.key] == nil {
            if case .success(let v) = d.parse(d.defaultValue) { values[d.key] = v }
        }
        return try S3Remote(settings: S3Settings(PluginSettings(values)),
                            credentials: S3Credentials(accessKeyID: server.accessKeyID, secretAccessKey: secret ?? server.secretAccessKey),
                            context: PluginContext(logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }), defaultLibraryURL: URL(fileURLWithPath: "/nonexistent"), section: "sync.s3"))
    }

    @Test("the remote conformance suite passes on rclone serve s3 and moto", arguments: S3Server.Kind.allCases, RemoteConformance.Area.allCases)
    func conformance(_ kind: S3Server.Kind, _ area: RemoteConformance.Area) async throws {
        let server = try await S3Server.startAsync(kind)
        defer { server.remove() }
        try await RemoteConformance.check(area, partSize: Self.partSize) { try Self.remote(server) }
    }

    @Test("a wrong secret is a configuration error that names the key id, never the secret")
    func wrongSecret() async throws {
        let server = try await S3Server.startAsync(.rclone)
        defer { server.remove() }
        let remote = try Self.remote(server, secret: "not-the-secret")
        defer { Task { await remote.shutdown() } }
        do {
            _ = try await remote.list(under: "")
            Issue.record("a wrong secret was accepted")
        } catch let error as TapedeckError {
            #expect(error.code == .configuration)
            #expect(error.message.contains(server.accessKeyID))
            #expect(!error.message.contains("not-the-secret"))
        }
    }

    @Test("a server that cannot be reached is remote-unavailable (exit 69), after retries")
    func unreachable() async throws {
        let port = try S3Server.freePort()
        let server = try await S3Server.startAsync(.rclone)
        defer { server.remove() }
        let remote = try Self.remote(server, endpoint: "http://127.0.0.1:\(port)")
        do {
            _ = try await remote.list(under: "")
            Issue.record("a closed port answered")
        } catch let error as TapedeckError {
            #expect(error.code == .remoteUnavailable)
            #expect(error.code.exitStatus == 69)
        }
        await remote.shutdown()
    }

    @Test("a proxy that returns a wrong ETag: the upload fails and nothing verifies", arguments: S3Server.Kind.allCases)
    func wrongChecksum(_ kind: S3Server.Kind) async throws {
        let server = try await S3Server.startAsync(kind)
        defer { server.remove() }
        let proxy = try await OwnThread.run { try ChecksumProxy(upstream: server.port) }
        defer { proxy.stop() }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-proxy-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        for (name, size) in [("small.wav", 50_000), ("long.wav", Self.partSize + 100)] {
            let url = folder.appendingPathComponent(name)
            try Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31) }).write(to: url)
            let key = try RemoteKey("m/s/" + name)
            let lying = try Self.remote(server, endpoint: proxy.endpoint)
            var verified = false
            do {
                _ = try await lying.upload(url, to: key, resuming: nil, options: UploadOptions(), started: { _ in }, progress: { _ in })
                if case .matches = try await lying.verify(key, against: url) { verified = true }
            } catch {}
            #expect(!verified, "\(name) verified through a proxy that changes ETags")
            await lying.shutdown()
        }
    }
}
