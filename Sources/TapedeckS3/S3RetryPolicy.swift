import AsyncHTTPClient
import Foundation
import TapedeckCore

/// When ``S3Client`` sends a request again, and how long it waits first: the retry the AWS SDKs
/// and other S3 clients do.
///
/// - What is retried: the answers `429 Too Many Requests` and every `5xx` except
///   `501 Not Implemented` (which will not change), and failures to reach the server or to hear
///   from it (a refused or closed connection, a timeout). Everything else (4xx, a cancelled task,
///   Tapedeck's own errors) is final at once.
/// - How long it waits: exponential back-off with full jitter (AWS's "Exponential Backoff and
///   Jitter"): before retry `n` (1, 2, …) a random time in `0 ... min(maxDelay, baseDelay × 2^(n-1))`.
///   When the answer carries `Retry-After` (seconds, or an HTTP-date) the wait is at least that,
///   capped at ``maxRetryAfter`` so that one answer cannot stall a push for long.
/// - How often: at most ``maxAttempts`` sends of one request in all; two when the server answers
///   too slowly (``slowAttempts``).
///
/// A pure value: no clock and no randomness of its own (``jitter`` and the `now` arguments are
/// given), so it is tested without waiting. Every member runs on any thread and never blocks.
struct S3RetryPolicy: Sendable {
    /// Sends of one request in all, the first included.
    var maxAttempts: Int
    /// The ceiling of the first retry's wait; it doubles with each retry after that.
    var baseDelay: Duration
    /// The highest ceiling of a back-off wait.
    var maxDelay: Duration
    /// The longest wait a `Retry-After` can ask for; a longer one is cut to this.
    var maxRetryAfter: Duration
    /// A number in `0...1` for each wait: the share of the ceiling waited (full jitter).
    var jitter: @Sendable () -> Double

    /// What Tapedeck uses: 5 attempts, waits up to 1, 2, 4 and 8 s (never more than 20 s),
    /// `Retry-After` honoured up to 60 s.
    static let standard = S3RetryPolicy(maxAttempts: 5, baseDelay: .seconds(1), maxDelay: .seconds(20), maxRetryAfter: .seconds(60),
                                        jitter: { Double.random(in: 0...1) })

    /// Whether an answer with `status` is worth sending the request again for: 429 and 5xx but 501.
    static func isRetryable(status: Int) -> Bool {
        status == 429 || ((500...599).contains(status) && status != 501)
    }

    /// Whether a request that failed with `error` (no answer) is worth sending again: a
    /// connection refused, reset or closed, or a timeout. Never a cancellation
    /// (`CancellationError`, `HTTPClientError.cancelled`) nor an error Tapedeck raised itself.
    static func isRetryable(error: any Error) -> Bool {
        if isCancellation(error) || error is TapedeckError { return false }
        if let error = error as? HTTPClientError {
            return error == .remoteConnectionClosed || error == .readTimeout || error == .connectTimeout || error == .deadlineExceeded
                || error == .writeTimeout || error == .getConnectionFromPoolTimeout
        }
        // Connection refused and other channel errors come from NIO itself.
        return true
    }

    /// Whether `error` is a cancellation: `CancellationError`, or async-http-client's
    /// `HTTPClientError.cancelled` (a request whose task was cancelled).
    static func isCancellation(_ error: any Error) -> Bool {
        if error is CancellationError { return true }
        if let error = error as? HTTPClientError, error == .cancelled { return true }
        return false
    }

    /// The back-off wait before retry `retry` (1 for the first): full jitter under the ceiling
    /// `min(maxDelay, baseDelay × 2^(retry-1))`.
    func backoff(retry: Int) -> Duration {
        let ceiling = min(maxDelay.inSeconds, baseDelay.inSeconds * Double(1 << min(max(retry - 1, 0), 30)))
        return .seconds(ceiling * min(max(jitter(), 0), 1))
    }

    /// How long a `Retry-After` value asks to wait, measured from `now`, at most
    /// ``maxRetryAfter``; `nil` when there is none or it cannot be read. A date already past
    /// asks for no wait.
    func retryAfter(_ value: String?, now: Date) -> Duration? {
        guard let value = value?.trimmingCharacters(in: .whitespaces), !value.isEmpty else { return nil }
        let seconds: Double
        if value.allSatisfy({ $0.isASCII && $0.isNumber }) {
            guard let n = Double(value) else { return nil }
            seconds = n
        } else if let date = Self.httpDate(value) {
            seconds = max(0, date.timeIntervalSince(now))
        } else {
            return nil
        }
        return .seconds(min(seconds, maxRetryAfter.inSeconds))
    }

    /// The wait before sending again a request whose attempt `attempt` (1 for the first) was
    /// answered with `status`; `nil` when it is not to be sent again (a final answer, or no
    /// attempts left).
    func delay(afterAttempt attempt: Int, status: Int, retryAfter value: String?, now: Date = Date()) -> Duration? {
        guard attempt < maxAttempts, Self.isRetryable(status: status) else { return nil }
        let backoff = backoff(retry: attempt)
        guard let asked = retryAfter(value, now: now) else { return backoff }
        return max(asked, backoff)
    }

    /// The wait before sending again a request whose attempt `attempt` failed with `error`;
    /// `nil` when it is not to be sent again.
    /// A server that answers too slowly (an answer that stalls, or drips on past its time) is
    /// given one more try, not ``maxAttempts``: each such attempt costs a whole timeout, and a
    /// server that dripped once mostly drips again (five would hold a command for 5 minutes).
    func delay(afterAttempt attempt: Int, error: any Error) -> Duration? {
        guard attempt < maxAttempts, Self.isRetryable(error: error) else { return nil }
        if Self.isSlowness(error), attempt >= Self.slowAttempts { return nil }
        return backoff(retry: attempt)
    }

    /// Sends in all of a request whose answers are too slow.
    static let slowAttempts = 2

    /// Whether `error` says the server was reached but answered too slowly: no byte for the
    /// idle timeout, or not the whole answer within its time.
    static func isSlowness(_ error: any Error) -> Bool {
        if error is S3Client.SlowAnswer { return true }
        if let error = error as? HTTPClientError { return error == .readTimeout || error == .deadlineExceeded }
        return false
    }

    /// An HTTP-date (RFC 9110 §5.6.7) in its preferred form, `Sun, 06 Nov 1994 08:49:37 GMT`;
    /// `nil` for anything else.
    static func httpDate(_ text: String) -> Date? {
        let fields = text.split(separator: " ", omittingEmptySubsequences: true)
        guard fields.count == 6, fields[0].hasSuffix(","), fields[5] == "GMT",
              let day = Int(fields[1]), (1...31).contains(day),
              let month = months.firstIndex(of: String(fields[2])).map({ $0 + 1 }),
              fields[3].count == 4, let year = Int(fields[3]), year >= 1970 else { return nil }
        let time = fields[4].split(separator: ":")
        guard time.count == 3, let h = Int(time[0]), let m = Int(time[1]), let s = Int(time[2]),
              (0..<24).contains(h), (0..<60).contains(m), (0...60).contains(s) else { return nil }
        // Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil).
        let y = month <= 2 ? year - 1 : year
        let era = y / 400
        let yoe = y - era * 400
        let doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        let days = era * 146_097 + doe - 719_468
        return Date(timeIntervalSince1970: Double(days * 86_400 + h * 3600 + m * 60 + s))
    }

    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
}

extension Duration {
    /// The duration in seconds.
    var inSeconds: Double {
        let c = components
        return Double(c.seconds) + Double(c.attoseconds) * 1e-18
    }
}
