import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A proxy in front of a test S3 server that passes requests through and lies in every
/// answer's ETag and `x-amz-checksum-*` headers (scripts/s3_checksum_proxy.py, run with
/// python3). Starting blocks until it answers; ``stop()`` blocks until it is gone.
public final class ChecksumProxy: Sendable {
    public let port: Int
    public let endpoint: String
    private let pid: pid_t

    public init(upstream: Int) throws {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("scripts/s3_checksum_proxy.py")
        port = try S3Server.freePort()
        endpoint = "http://127.0.0.1:\(port)"
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-proxy-\(port).log")
        pid = try ChildProcess.start(["python3", script.path, String(upstream), String(port)],
                                     environment: ProcessInfo.processInfo.environment, output: log.path)
        let deadline = Date().addingTimeInterval(20)
        while !S3Server.answers(port) {
            guard Date() < deadline else {
                stop()
                throw S3ServerError(description: "The checksum proxy did not start: \((try? String(contentsOf: log, encoding: .utf8)) ?? "")")
            }
            Thread.sleep(forTimeInterval: 0.05)
        }
    }

    public func stop() {
        _ = kill(pid, SIGKILL)
        var status: Int32 = 0
        _ = waitpid(pid, &status, 0)
    }
}
