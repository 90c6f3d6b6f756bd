import AsyncHTTPClient
import Foundation
import NIOCore
import TapedeckCore
@testable import TapedeckS3
import Testing

/// The retry policy on its own: which answers and errors are retried, the back-off, `Retry-After`.
/// Deterministic: the jitter is given.
struct S3RetryPolicyTests {
    static func policy(jitter: Double) -> S3RetryPolicy {
        var p = S3RetryPolicy.standard
        p.jitter = { jitter }
        return p
    }

    @Test("429 and every 5xx but 501 are retried; 501 and 4xx are not")
    func statuses() {
        for status in [429, 500, 502, 503, 504, 507, 599] {
            #expect(S3RetryPolicy.isRetryable(status: status), "\(status)")
        }
        for status in [200, 204, 301, 400, 401, 403, 404, 409, 412, 416, 501, 600] {
            #expect(!S3RetryPolicy.isRetryable(status: status), "\(status)")
        }
    }

    @Test("connection failures and timeouts are retried; a cancellation and Tapedeck's own errors never")
    func errors() {
        for error: any Error in [HTTPClientError.remoteConnectionClosed, HTTPClientError.readTimeout, HTTPClientError.connectTimeout,
                                 HTTPClientError.writeTimeout, HTTPClientError.deadlineExceeded, HTTPClientError.getConnectionFromPoolTimeout,
                                 IOError(errnoCode: ECONNREFUSED, reason: "connect")] {
            #expect(S3RetryPolicy.isRetryable(error: error), "\(error)")
            #expect(Self.policy(jitter: 1).delay(afterAttempt: 1, error: error) != nil, "\(error)")
        }
        for error: any Error in [CancellationError(), HTTPClientError.cancelled, TapedeckError(.remoteUnavailable, "no"),
                                 HTTPClientError.invalidURL] {
            #expect(!S3RetryPolicy.isRetryable(error: error), "\(error)")
            #expect(Self.policy(jitter: 1).delay(afterAttempt: 1, error: error) == nil, "\(error)")
        }
        #expect(S3RetryPolicy.isCancellation(CancellationError()) && S3RetryPolicy.isCancellation(HTTPClientError.cancelled))
        #expect(!S3RetryPolicy.isCancellation(HTTPClientError.readTimeout))
    }

    @Test("the back-off: full jitter under a ceiling that doubles from 1 s up to 20 s")
    func backoff() {
        let top = Self.policy(jitter: 1)
        #expect((1...7).map { top.backoff(retry: $0) } == [1, 2, 4, 8, 16, 20, 20].map { Duration.seconds($0) })
        #expect(top.backoff(retry: 1000) == .seconds(20), "no overflow far out")
        let half = Self.policy(jitter: 0.5)
        #expect((1...3).map { half.backoff(retry: $0) } == [0.5, 1, 2].map { Duration.seconds($0) })
        #expect(Self.policy(jitter: 0).backoff(retry: 4) == .zero)
        #expect(Self.policy(jitter: 7).backoff(retry: 1) == .seconds(1), "a jitter out of 0...1 is clamped")
        // The default jitter stays under the ceiling and varies.
        let waits = (0..<200).map { _ in S3RetryPolicy.standard.backoff(retry: 3) }
        #expect(waits.allSatisfy { $0 >= .zero && $0 <= .seconds(4) })
        #expect(Set(waits).count > 100)
    }

    @Test("attempts are bounded: 5 sends of a request in all")
    func bounded() {
        let p = Self.policy(jitter: 1)
        #expect((1...4).map { p.delay(afterAttempt: $0, status: 503, retryAfter: nil) } == [1, 2, 4, 8].map { Duration.seconds($0) })
        #expect(p.delay(afterAttempt: 5, status: 503, retryAfter: nil) == nil)
        #expect(p.delay(afterAttempt: 5, error: HTTPClientError.readTimeout) == nil)
        #expect(p.delay(afterAttempt: 1, status: 501, retryAfter: "1") == nil)
        #expect(p.delay(afterAttempt: 1, status: 400, retryAfter: "1") == nil)
        #expect(p.delay(afterAttempt: 1, status: 200, retryAfter: nil) == nil)
    }

    @Test("a server that answers too slowly gets one more try, not five; a refused connection gets all five")
    func slowness() {
        let p = Self.policy(jitter: 1)
        for slow: any Error in [HTTPClientError.readTimeout, HTTPClientError.deadlineExceeded, S3Client.SlowAnswer(seconds: 60)] {
            #expect(p.delay(afterAttempt: 1, error: slow) != nil, "\(slow)")
            #expect(p.delay(afterAttempt: 2, error: slow) == nil, "\(slow)")
        }
        #expect(p.delay(afterAttempt: 4, error: HTTPClientError.remoteConnectionClosed) != nil)
    }

    @Test("Retry-After in seconds or as an HTTP-date is waited for at least, up to 60 s")
    func retryAfter() throws {
        let now = Date(timeIntervalSince1970: 1_700_000_000)
        let p = Self.policy(jitter: 0)
        #expect(p.delay(afterAttempt: 1, status: 429, retryAfter: "1", now: now) == .seconds(1))
        #expect(p.delay(afterAttempt: 1, status: 503, retryAfter: " 7 ", now: now) == .seconds(7))
        #expect(p.delay(afterAttempt: 1, status: 503, retryAfter: "3600", now: now) == .seconds(60), "capped")
        #expect(p.delay(afterAttempt: 1, status: 503, retryAfter: "0", now: now) == .zero)
        // The back-off is the floor: a short Retry-After does not make the wait shorter.
        #expect(Self.policy(jitter: 1).delay(afterAttempt: 3, status: 429, retryAfter: "1", now: now) == .seconds(4))
        // Unreadable values are ignored: the back-off alone.
        for value in ["-5", "1.5", "soon", "Sun, 06 Nov 1994 08:49:37 UTC", ""] {
            #expect(Self.policy(jitter: 1).delay(afterAttempt: 2, status: 503, retryAfter: value, now: now) == .seconds(2), "\(value)")
        }
        // An HTTP-date: 30 s from now; one in the past asks for no wait.
        let date = try #require(S3RetryPolicy.httpDate("Tue, 14 Nov 2023 22:13:50 GMT"))
        #expect(date == now.addingTimeInterval(30))
        #expect(p.delay(afterAttempt: 1, status: 503, retryAfter: "Tue, 14 Nov 2023 22:13:50 GMT", now: now) == .seconds(30))
        #expect(p.delay(afterAttempt: 1, status: 503, retryAfter: "Tue, 14 Nov 2023 22:10:00 GMT", now: now) == .zero)
        #expect(p.delay(afterAttempt: 1, status: 503, retryAfter: "Wed, 15 Nov 2023 22:13:20 GMT", now: now) == .seconds(60), "capped")
    }

    @Test("HTTP-dates are read in their preferred form and nothing else")
    func httpDates() {
        #expect(S3RetryPolicy.httpDate("Sun, 06 Nov 1994 08:49:37 GMT") == Date(timeIntervalSince1970: 784_111_777))
        #expect(S3RetryPolicy.httpDate("Thu, 01 Jan 1970 00:00:00 GMT") == Date(timeIntervalSince1970: 0))
        #expect(S3RetryPolicy.httpDate("Tue, 29 Feb 2028 12:00:00 GMT") == Date(timeIntervalSince1970: 1_835_438_400))
        for text in ["Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994", "Sun, 06 Nov 1994 08:49 GMT",
                     "Sun, 06 Foo 1994 08:49:37 GMT", "Sun, 32 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 25:49:37 GMT", "120"] {
            #expect(S3RetryPolicy.httpDate(text) == nil, "\(text)")
        }
    }
}
