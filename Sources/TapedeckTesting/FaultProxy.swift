import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A proxy in front of a test S3 server that answers the requests its plan names with errors
/// (429, 5xx, 4xx, with `Retry-After` when asked, held for a while when asked) or plays a
/// hostile server for them (``Rule/Action``), and passes the rest through
/// (scripts/s3_fault_proxy.py, run with python3). It logs every request as it arrives, so a
/// test counts the retries. Starting blocks until it answers; ``stop()`` blocks until it is gone.
public final class FaultProxy: Sendable {
    /// One rule of the plan: requests with `method` whose path and query contain `path` are
    /// answered as `action` says (by default `status`), `times` times; then they pass.
    public struct Rule: Encodable, Sendable {
        /// What the proxy does with a request the rule takes.
        public enum Action: String, Encodable, Sendable {
            /// Answers `status` with an S3 error document.
            case fault
            /// A listing that never ends: IsTruncated with the same token each time (`newToken`
            /// false) or a new one, and the same one entry.
            case loop
            /// A 200 whose body never ends.
            case endless
            /// A 200 of `size` bytes sent one byte every `interval` seconds.
            case drip
            /// Passed through with every date in the listing set `days` back.
            case age
            /// Answers `status` with an S3 error whose message is `message`.
            case say
        }

        public var method: String
        public var path: String
        public var status: Int
        public var retryAfter: String?
        public var times = 1
        /// Seconds the answer is held back.
        public var hold: Double = 0
        public var action: Action = .fault
        /// `loop`: a new token on every page.
        public var newToken = false
        /// `drip`: seconds between bytes, and bytes in all.
        public var interval: Double = 20
        public var size = 1000
        /// `age`: how many days back.
        public var days: Double = 3
        /// `say`: the server's message.
        public var message = ""

        public init(method: String, path: String, status: Int = 200, retryAfter: String? = nil, times: Int = 1, hold: Double = 0,
                    action: Action = .fault, newToken: Bool = false, interval: Double = 20, size: Int = 1000, days: Double = 3,
                    message: String = "") {
            self.method = method
            self.path = path
            self.status = status
            self.retryAfter = retryAfter
            self.times = times
            self.hold = hold
            self.action = action
            self.newToken = newToken
            self.interval = interval
            self.size = size
            self.days = days
            self.message = message
        }

        enum CodingKeys: String, CodingKey {
            case method, path, status, times, hold, action, interval, size, days, message
            case retryAfter = "retry_after"
            case token
        }

        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(method, forKey: .method)
            try c.encode(path, forKey: .path)
            try c.encode(status, forKey: .status)
            try c.encodeIfPresent(retryAfter, forKey: .retryAfter)
            try c.encode(times, forKey: .times)
            try c.encode(hold, forKey: .hold)
            try c.encode(action, forKey: .action)
            try c.encode(newToken ? "new" : "same", forKey: .token)
            try c.encode(interval, forKey: .interval)
            try c.encode(size, forKey: .size)
            try c.encode(days, forKey: .days)
            try c.encode(message, forKey: .message)
        }
    }

    /// One request as it reached the proxy.
    public struct Arrival: Sendable {
        /// Seconds on a monotonic clock.
        public var time: Double
        public var method: String
        public var path: String
        /// `pass`, `fault-STATUS`, or the hostile action taken (`loop`, `endless`, …).
        public var action: String
        public var fault: Int? { action.hasPrefix("fault-") ? Int(action.dropFirst(6)) : nil }

        public func matches(_ rule: Rule) -> Bool { method == rule.method && path.contains(rule.path) }
    }

    public struct StartError: Error, CustomStringConvertible {
        public var description: String
    }

    public let port: Int
    public let endpoint: String
    private let pid: pid_t
    private let log: URL
    private let output: URL

    /// The proxy started on a thread of its own (starting blocks until it answers): a test task
    /// never holds one of Swift's cooperative threads meanwhile.
    /// - Thread: any task. Suspends until the proxy answers (at most 20 s).
    public static func startAsync(upstream: Int, plan: [Rule]) async throws -> FaultProxy {
        try await OwnThread.run { try FaultProxy(upstream: upstream, plan: plan) }
    }

    /// - Thread: any. Blocks until the proxy answers (at most 20 s).
    public init(upstream: Int, plan: [Rule]) throws {
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
    public var arrivals: [Arrival] {
        let text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { line in
            let f = line.split(separator: " ")
            guard f.count == 4, let t = Double(f[0]) else { return nil }
            return Arrival(time: t, method: String(f[1]), path: String(f[2]), action: String(f[3]))
        }
    }

    /// The requests `rule` matches (whether it answered them or they passed).
    public func arrivals(_ rule: Rule) -> [Arrival] { arrivals.filter { $0.matches(rule) } }

    /// - Thread: any. Blocks until the proxy is gone.
    public func stop() {
        _ = kill(pid, SIGKILL)
        var status: Int32 = 0
        _ = waitpid(pid, &status, 0)
        try? FileManager.default.removeItem(at: log)
        try? FileManager.default.removeItem(at: output)
    }
}
