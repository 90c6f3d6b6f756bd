import Foundation
import TapedeckTesting
#if canImport(Glibc)
import Glibc
#endif

/// A proxy in front of a test S3 server that answers the requests its plan names with errors
/// (429, 5xx, 4xx, with `Retry-After` when asked, held for a while when asked) and passes the
/// rest through (scripts/s3_fault_proxy.py, run with python3). It logs every request as it
/// arrives, so a test counts the retries. Starting blocks until it answers; ``stop()`` blocks
/// until it is gone.
final class FaultProxy: Sendable {
    /// One rule of the plan: requests with `method` whose path and query contain `path` are
    /// answered `status`, `times` times; then they pass.
    struct Rule: Encodable, Sendable {
        var method: String
        var path: String
        var status: Int
        var retryAfter: String?
        var times = 1
        /// Seconds the answer is held back.
        var hold: Double = 0

        enum CodingKeys: String, CodingKey {
            case method, path, status, times, hold
            case retryAfter = "retry_after"
        }
    }

    /// One request as it reached the proxy.
    struct Arrival: Sendable {
        /// Seconds on a monotonic clock.
        var time: Double
        var method: String
        var path: String
        /// `pass`, or `fault-STATUS`.
        var action: String
        var fault: Int? { action.hasPrefix("fault-") ? Int(action.dropFirst(6)) : nil }

        func matches(_ rule: Rule) -> Bool { method == rule.method && path.contains(rule.path) }
    }

    struct StartError: Error, CustomStringConvertible {
        var description: String
    }

    let port: Int
    let endpoint: String
    private let pid: pid_t
    private let log: URL
    private let output: URL

    /// - Thread: any. Blocks until the proxy answers (at most 20 s).
    init(upstream: Int, plan: [Rule]) throws {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("scripts/s3_fault_proxy.py")
        port = try S3Server.freePort()
        endpoint = "http://127.0.0.1:\(port)"
        log = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-fault-proxy-\(port).log")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        output = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-fault-proxy-\(port).out")
        let planText = String(decoding: try JSONEncoder().encode(plan), as: UTF8.self)
        pid = try ChildProcess.start(["python3", script.path, String(upstream), String(port), planText, log.path],
                                     environment: ProcessInfo.processInfo.environment, output: output.path)
        let deadline = Date().addingTimeInterval(20)
        while !S3Server.answers(port) {
            guard Date() < deadline else {
                stop()
                throw StartError(description: "The fault proxy did not start: \((try? String(contentsOf: output, encoding: .utf8)) ?? "")")
            }
            Thread.sleep(forTimeInterval: 0.05)
        }
    }

    /// The requests so far, in the order they arrived.
    /// - Thread: any. Reads the proxy's log file.
    var arrivals: [Arrival] {
        let text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { line in
            let f = line.split(separator: " ")
            guard f.count == 4, let t = Double(f[0]) else { return nil }
            return Arrival(time: t, method: String(f[1]), path: String(f[2]), action: String(f[3]))
        }
    }

    /// The requests `rule` matches (whether it answered them or they passed).
    func arrivals(_ rule: Rule) -> [Arrival] { arrivals.filter { $0.matches(rule) } }

    /// - Thread: any. Blocks until the proxy is gone.
    func stop() {
        _ = kill(pid, SIGKILL)
        var status: Int32 = 0
        _ = waitpid(pid, &status, 0)
        try? FileManager.default.removeItem(at: log)
        try? FileManager.default.removeItem(at: output)
    }
}
