import AsyncHTTPClient
import Crypto
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import TapedeckCore
#if canImport(Glibc)
import Glibc
#endif

/// Signed HTTP requests to one bucket of an S3-compatible server, over async-http-client:
/// path-style or virtual-host addressing, TLS when the endpoint is https, SigV4 on every
/// request, and a retry for what a retry can cure (429, 5xx but 501, connection failures and
/// timeouts; never a cancellation) with exponential back-off, full jitter and `Retry-After`
/// honoured (``S3RetryPolicy``). Every method is async, runs on any task and never blocks a
/// thread: the waits between attempts are `Task.sleep`, the I/O is NIO's event loops'.
final class S3Client: Sendable {
    /// One answer: its status, headers and (for requests that read it) body.
    struct Response: Sendable {
        var status: Int
        var headers: HTTPHeaders
        var body: ByteBuffer
        var text: Substring { Substring(String(buffer: body)) }
    }

    let http: HTTPClient
    let signer: SigV4Signer
    let bucket: String
    /// `http` or `https`.
    let scheme: String
    /// The Host header: `HOST[:PORT]`, with the bucket in front for virtual-host addressing.
    let host: String
    /// `/BUCKET` with path-style addressing, else empty.
    let bucketPath: String
    /// The endpoint as written, for messages.
    let endpoint: String
    let logger: Logger
    /// When a request is sent again, and after how long.
    let retry: S3RetryPolicy
    /// How long a request may wait for the server.
    let timeouts: Timeouts

    /// How long one attempt of a request may wait for the server before it is given up (and,
    /// as the retry policy says, sent again). A plain value.
    struct Timeouts: Sendable {
        /// Making the connection.
        var connect: TimeAmount
        /// No byte from the server for this long ends the attempt (async-http-client's read
        /// timeout: it counts from the last byte, so a server that drips is ended by `answer`).
        var idle: TimeAmount
        /// No byte accepted by the server for this long, while a body is sent.
        var write: TimeAmount
        /// The whole exchange (request, answer's head and body) of a request without a large
        /// body, and the body of any other answer after its head: a server that drips a byte now
        /// and then is given up after this long, however often it sends.
        var answer: TimeAmount
        /// The answer to CompleteMultipartUpload, which S3 may take minutes to give (sending
        /// white space meanwhile).
        var completion: TimeAmount

        /// What Tapedeck uses: 15 s to connect, 30 s without a byte, 60 s for an answer,
        /// 15 minutes for a multipart upload's completion.
        static let standard = Timeouts(connect: .seconds(15), idle: .seconds(30), write: .seconds(120), answer: .seconds(60),
                                       completion: .minutes(15))
    }

    /// An answer that did not arrive in full within its time (``Timeouts/answer``): retried
    /// like a timeout.
    struct SlowAnswer: Error {
        var seconds: Int64
    }

    /// - Throws: `.configuration` when the endpoint is not an http(s) URL with a host.
    /// - Thread: any. Does not block (no connection is made here).
    init(endpoint: String, bucket: String, region: String, pathStyle: Bool, credentials: S3Credentials, logger: Logger, endpointKey: String,
         retry: S3RetryPolicy = .standard, timeouts: Timeouts = .standard) throws {
        guard let url = URL(string: endpoint), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
              let hostName = url.host, !hostName.isEmpty, url.path.isEmpty || url.path == "/", url.query == nil else {
            throw TapedeckError(.configuration, "\(endpointKey): \"\(endpoint)\" is not a server address. Write it as http://HOST:PORT or https://HOST (no bucket or path).")
        }
        let port = url.port.map { ":\($0)" } ?? ""
        self.scheme = scheme
        self.host = (pathStyle ? "" : bucket + ".") + hostName + port
        self.bucketPath = pathStyle ? "/" + SigV4Signer.encode(bucket, keepingSlash: false) : ""
        self.bucket = bucket
        self.endpoint = endpoint
        self.logger = logger
        self.retry = retry
        self.timeouts = timeouts
        signer = SigV4Signer(credentials: credentials, region: region)
        var configuration = HTTPClient.Configuration()
        // No deadline for sending a large body (a part at --limit-rate may take long); a
        // connection that moves nothing for a while, either way, is given up, and an answer has
        // its own deadline (sendOnce).
        configuration.timeout = .init(connect: timeouts.connect, read: timeouts.idle, write: timeouts.write)
        configuration.decompression = .disabled
        configuration.redirectConfiguration = .disallow
        // A refused connection fails at once; this client's own retry (S3RetryPolicy) decides
        // whether to try again, so a wrong address is said in seconds, not after the timeout.
        configuration.connectionPool.retryConnectionEstablishment = false
        http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }

    /// - Thread: any task. Suspends until the client's connections are closed.
    func shutdown() async {
        try? await http.shutdown()
    }

    /// Sends one signed request for `key` (a path under the bucket; empty for the bucket) and
    /// returns the answer, its body read up to `limit` bytes. Statuses are the caller's to judge,
    /// after the retries: an answer the policy retries (429, 5xx but 501) is returned only when
    /// the attempts are used up.
    /// - Parameters:
    ///   - payloadHash: the body's SHA-256 in hex; computed here when `nil` (for small bodies:
    ///     it is hashed on the calling task).
    ///   - pace: called before each 256 KiB of the body is sent (the rate limit), when given.
    ///   - sending: called as the body is sent, with the bytes of it handed to the connection so
    ///     far (from 0 again if the request is sent again), when given.
    ///   - answerWithin: how long each attempt may wait for its whole answer; ``Timeouts/answer``
    ///     when `nil`. A request with a large or paced body has no deadline while it is sent;
    ///     its answer's body still has this long.
    /// - Throws: `CancellationError` when the task is cancelled (never retried); `.remoteUnavailable`
    ///   when the server cannot be reached after the attempts; a `TapedeckError` from `pace` as it is.
    /// - Thread: any task. Never blocks: it suspends while the request is under way and between
    ///   attempts.
    func send(_ method: HTTPMethod, key: String, query: [(String, String)] = [], headers extra: [(String, String)] = [],
              body: ByteBuffer? = nil, payloadHash: String? = nil, limit: Int = 1 << 20,
              pace: (@Sendable (Int) async throws -> Void)? = nil, sending: (@Sendable (Int) -> Void)? = nil,
              answerWithin: TimeAmount? = nil) async throws -> Response {
        try await withRetries(method, key, status: { $0.status }, headers: { $0.headers }) {
            try await sendOnce(method, key: key, query: query, headers: extra, body: body, payloadHash: payloadHash, limit: limit,
                               pace: pace, sending: sending, answerWithin: answerWithin ?? timeouts.answer)
        }
    }

    /// Runs `once` (one attempt of `method` on `key`) again while the policy says so: after an
    /// answer whose status it retries, or an error it retries, waiting the policy's time first.
    /// Each retry is logged at debug. `discard` lets go of an answer that is not returned.
    /// - Throws: `CancellationError` once the task is cancelled, whatever the attempt ended with.
    /// - Thread: any task; never blocks.
    private func withRetries<Answer>(_ method: HTTPMethod, _ key: String, status: (Answer) -> Int, headers: (Answer) -> HTTPHeaders,
                                     discard: (Answer) async -> Void = { _ in }, _ once: () async throws -> Answer) async throws -> Answer {
        var attempt = 0
        while true {
            attempt += 1
            let wait: Duration
            do {
                let answer = try await once()
                let code = status(answer)
                let retryAfter = headers(answer).first(name: "retry-after")
                guard let delay = retry.delay(afterAttempt: attempt, status: code, retryAfter: retryAfter) else { return answer }
                await discard(answer)
                try Task.checkCancellation()
                logger.debug("S3 server answered \(code), trying again", metadata: [
                    "request": "\(method.rawValue) \(key)", "attempt": "\(attempt)", "retry-after": "\(retryAfter ?? "-")", "wait": "\(delay)",
                ])
                wait = delay
            } catch let error as TapedeckError {
                throw error
            } catch {
                // A cancelled task ends here, whatever the cancellation surfaced as (CancellationError,
                // HTTPClientError.cancelled, a closed channel): it is never sent again.
                if Task.isCancelled || S3RetryPolicy.isCancellation(error) { throw CancellationError() }
                guard let delay = retry.delay(afterAttempt: attempt, error: error) else { throw unavailable(error) }
                logger.debug("S3 request failed, trying again", metadata: [
                    "request": "\(method.rawValue) \(key)", "error": "\(error)", "attempt": "\(attempt)", "wait": "\(delay)",
                ])
                wait = delay
            }
            try await Task.sleep(for: wait)
        }
    }

    private func unavailable(_ error: any Error) -> TapedeckError {
        TapedeckError(.remoteUnavailable, "Could not reach the S3 server \(endpoint): \(Self.reason(error)). Check the address (sync.s3.endpoint) and the network, then run the command again: finished work is kept, and uploads resume.")
    }

    /// A network failure in words: the system's for a socket error, else the client's.
    static func reason(_ error: any Error) -> String {
        if let io = error as? IOError { return String(cString: strerror(io.errnoCode)).lowercased() }
        if let slow = error as? SlowAnswer { return "the server did not finish its answer within \(slow.seconds) s" }
        switch error as? HTTPClientError {
        case .connectTimeout?: return "the connection timed out"
        case .readTimeout?, .deadlineExceeded?: return "the server stopped answering"
        case .remoteConnectionClosed?: return "the server closed the connection"
        default: return ForeignText.printable("\(error)")
        }
    }

    /// A signed GET of `key` whose body the caller reads as it arrives (downloads). Retried like
    /// ``send(_:key:query:headers:body:payloadHash:limit:pace:sending:answerWithin:)`` until an
    /// answer's head arrives (within ``Timeouts/answer``); a body that breaks off later, or
    /// stalls (``Timeouts/idle``), is the caller's to handle.
    /// - Thread: any task; never blocks.
    func stream(_ key: String) async throws -> HTTPClientResponse {
        try await withRetries(.GET, key, status: { Int($0.status.code) }, headers: { $0.headers },
                              discard: { response in _ = try? await response.body.collect(upTo: 65536) }) {
            let request = makeRequest(.GET, key: key, query: [], headers: [], body: nil, payloadHash: nil, pace: nil, sending: nil)
            return try await http.execute(request, timeout: timeouts.answer, logger: logger)
        }
    }

    private func makeRequest(_ method: HTTPMethod, key: String, query: [(String, String)], headers extra: [(String, String)],
                             body: ByteBuffer?, payloadHash: String?, pace: (@Sendable (Int) async throws -> Void)?,
                             sending: (@Sendable (Int) -> Void)?) -> HTTPClientRequest {
        let path = bucketPath + "/" + SigV4Signer.encode(key, keepingSlash: true)
        let hash = payloadHash ?? body.map { b in b.withUnsafeReadableBytes { SigV4Signer.hex(SHA256.hash(data: $0)) } } ?? SigV4Signer.emptyPayloadHash
        var headers: [(String, String)] = [("host", host), ("x-amz-content-sha256", hash)]
        headers += extra
        let signed = signer.sign(SigV4Signer.Request(method: method.rawValue, path: path, query: query, headers: headers), payloadHash: hash, date: Date())
        let queryText = query.map { SigV4Signer.encode($0.0, keepingSlash: false) + ($0.1.isEmpty && Self.bare($0.0) ? "" : "=" + SigV4Signer.encode($0.1, keepingSlash: false)) }
            .joined(separator: "&")
        var request = HTTPClientRequest(url: "\(scheme)://\(host)\(path)\(queryText.isEmpty ? "" : "?" + queryText)")
        request.method = method
        for (name, value) in signed { request.headers.replaceOrAdd(name: name, value: value) }
        if let body {
            if pace != nil || sending != nil {
                let chunks = Self.chunks(of: body, size: 256 * 1024)
                request.body = .stream(PacedChunks(chunks: chunks, pace: pace, sending: sending), length: .known(Int64(body.readableBytes)))
            } else {
                request.body = .bytes(body)
            }
        } else if method == .PUT || method == .POST {
            request.body = .bytes(ByteBuffer())
        }
        return request
    }

    /// One attempt. A request without a large body (at most 1 MiB, not paced) has `answerWithin`
    /// for all of it; one with a large body has no deadline while it is sent (the idle and write
    /// timeouts end a stalled one), then `answerWithin` for its answer's body.
    private func sendOnce(_ method: HTTPMethod, key: String, query: [(String, String)], headers extra: [(String, String)],
                          body: ByteBuffer?, payloadHash: String?, limit: Int,
                          pace: (@Sendable (Int) async throws -> Void)?, sending: (@Sendable (Int) -> Void)?,
                          answerWithin: TimeAmount) async throws -> Response {
        let request = makeRequest(method, key: key, query: query, headers: extra, body: body, payloadHash: payloadHash, pace: pace, sending: sending)
        let small = pace == nil && (body?.readableBytes ?? 0) <= 1 << 20
        let deadline = NIODeadline.now() + (small ? answerWithin : TimeAmount.hours(24))
        let response: HTTPClientResponse
        do {
            response = try await http.execute(request, deadline: deadline, logger: logger)
        } catch let error as HTTPClientError where small && error == .deadlineExceeded {
            // The answer's time ran out before its head came: the same slow answer as one whose
            // body is not finished in time, said and retried the same way.
            throw SlowAnswer(seconds: max(1, answerWithin.nanoseconds / 1_000_000_000))
        }
        guard method != .HEAD else { return Response(status: Int(response.status.code), headers: response.headers, body: ByteBuffer()) }
        // A small request's answer has what is left of its time; a large one's, all of it again.
        let left = small ? max(deadline - NIODeadline.now(), .milliseconds(1)) : answerWithin
        let collected = try await Self.collect(response.body, limit: limit, within: left, allowed: answerWithin) { [endpoint] in
            TapedeckError(.remoteUnavailable, "The S3 server \(endpoint) answered \(method.rawValue) \(key) with more than \(limit) bytes; it was not read. Check that sync.s3.endpoint names an S3 server.")
        }
        return Response(status: Int(response.status.code), headers: response.headers, body: collected)
    }

    /// Reads `body` whole, at most `limit` bytes (more throws `tooLarge()`), within `within`
    /// (else ``SlowAnswer`` saying the answer's time was `allowed`, and the body is let go: the
    /// connection is closed).
    /// - Thread: any task; never blocks.
    static func collect(_ body: HTTPClientResponse.Body, limit: Int, within: TimeAmount, allowed: TimeAmount,
                        tooLarge: @escaping @Sendable () -> TapedeckError) async throws -> ByteBuffer {
        let seconds = max(1, allowed.nanoseconds / 1_000_000_000)
        return try await withThrowingTaskGroup(of: ByteBuffer.self) { group in
            group.addTask {
                var collected = ByteBuffer()
                for try await var chunk in body {
                    guard collected.readableBytes + chunk.readableBytes <= limit else { throw tooLarge() }
                    collected.writeBuffer(&chunk)
                }
                return collected
            }
            group.addTask {
                try await Task.sleep(for: .nanoseconds(within.nanoseconds))
                throw SlowAnswer(seconds: seconds)
            }
            defer { group.cancelAll() }
            guard let first = try await group.next() else { throw SlowAnswer(seconds: seconds) }
            return first
        }
    }

    /// Query names S3 writes without `=` (`?uploads`, `?delete`): signed as `name=`, sent bare.
    private static func bare(_ name: String) -> Bool { name == "uploads" }

    private static func chunks(of body: ByteBuffer, size: Int) -> [ByteBuffer] {
        var out: [ByteBuffer] = []
        var rest = body
        while rest.readableBytes > 0, let slice = rest.readSlice(length: min(size, rest.readableBytes)) { out.append(slice) }
        return out
    }

    /// A body sent in chunks, each waiting for the rate limit first (when there is one) and
    /// counted as it is handed over.
    struct PacedChunks: AsyncSequence, Sendable {
        typealias Element = ByteBuffer
        let chunks: [ByteBuffer]
        let pace: (@Sendable (Int) async throws -> Void)?
        let sending: (@Sendable (Int) -> Void)?

        struct AsyncIterator: AsyncIteratorProtocol {
            var index = 0
            var handed = 0
            let chunks: [ByteBuffer]
            let pace: (@Sendable (Int) async throws -> Void)?
            let sending: (@Sendable (Int) -> Void)?
            mutating func next() async throws -> ByteBuffer? {
                guard index < chunks.count else { return nil }
                try await pace?(chunks[index].readableBytes)
                handed += chunks[index].readableBytes
                sending?(handed)
                index += 1
                return chunks[index - 1]
            }
        }

        func makeAsyncIterator() -> AsyncIterator {
            sending?(0)
            return AsyncIterator(chunks: chunks, pace: pace, sending: sending)
        }
    }

    /// The error an answer that is not a success stands for, from its S3 error code: credentials
    /// and a missing bucket are configuration (exit 78), the rest the server's (exit 69).
    func failure(_ response: Response, _ doing: String) -> TapedeckError {
        // The server's words are quoted, never trusted: no line breaks or escapes get through.
        let code = ForeignText.printable(S3XML.text("Code", in: response.text) ?? "", limit: 64)
        let message = ForeignText.printable(S3XML.text("Message", in: response.text) ?? "")
        let said = "\(response.status)\(code.isEmpty ? "" : " " + code)\(message.isEmpty ? "" : ": " + message)"
        switch (response.status, code) {
        case (403, _), (_, "InvalidAccessKeyId"), (_, "SignatureDoesNotMatch"), (_, "AccessDenied"):
            return TapedeckError(.configuration, "The S3 server \(endpoint) refused to \(doing) (\(said)). Check the credentials (\(signer.credentials)), sync.s3.region and that the key may write to the bucket \(bucket).")
        case (_, "NoSuchBucket"):
            return TapedeckError(.configuration, "The bucket \(bucket) does not exist on \(endpoint). Create it, or set sync.s3.bucket to one that does (and sync.s3.path-style: true for most self-hosted servers).")
        case (_, "EntityTooSmall"), (_, "EntityTooLarge"):
            return TapedeckError(.remoteUnavailable, "The S3 server \(endpoint) refused to \(doing) (\(said)). Set sync.s3.part-size-mib to a size it accepts.")
        default:
            return TapedeckError(.remoteUnavailable, "The S3 server \(endpoint) could not \(doing) (\(said)). Run the command again later: finished work is kept, and uploads resume.")
        }
    }
}
