import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import Synchronization
import TapedeckCore
import TapedeckStreamFormats

/// One `GET` of an Icecast, Shoutcast or plain HTTP audio stream over async-http-client: asks for
/// ICY metadata, takes it out of the audio (``IcyDemuxer``) and queues the audio bytes for the
/// decoding thread (``ByteQueue``, whose back-pressure pauses reading the socket).
///
/// Thread: ``open(_:timeout:)`` and ``close()`` block (the device thread); the delegate's
/// callbacks run on the client's event loop and never block.
final class HTTPStreamConnection: @unchecked Sendable {
    /// What the response's head said.
    struct Head: Sendable {
        var status: Int
        var contentType: String
        /// `icy-name` (the station), when sent.
        var name: String?
    }

    let queue = ByteQueue()
    private let client: HTTPClient
    private let delegate: Delegate
    private var task: HTTPClient.Task<Void>?

    init(connectTimeout: Duration) {
        var configuration = HTTPClient.Configuration()
        configuration.timeout = .init(connect: .nanoseconds(connectTimeout.components.seconds * 1_000_000_000 + connectTimeout.components.attoseconds / 1_000_000_000), read: nil)
        configuration.redirectConfiguration = .follow(max: 5, allowCycles: false)
        configuration.decompression = .disabled
        client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        delegate = Delegate(queue: queue)
    }

    /// Sends the request and waits for the response's head. Blocks up to `timeout`.
    /// - Throws: ``StreamEnd`` naming why there is no stream (no connection, a refusal, a timeout).
    func open(_ source: StreamSource, timeout: Duration) throws -> Head {
        var request = try HTTPClient.Request(url: source.requestURL, method: .GET)
        request.headers.add(name: "User-Agent", value: "Tapedeck/\(TapedeckVersion.string)")
        request.headers.add(name: "Icy-MetaData", value: "1")
        request.headers.add(name: "Accept", value: "*/*")
        if let authorization = source.authorization { request.headers.add(name: "Authorization", value: authorization) }
        task = client.execute(request: request, delegate: delegate)
        return try delegate.waitForHead(timeout: timeout)
    }

    /// Titles that came in ICY metadata since the last call, with their audio byte offsets.
    func takeTitles() -> [IcyDemuxer.Title] { delegate.takeTitles() }

    /// Ends the request and shuts the client down. Blocks briefly.
    func close() {
        task?.cancel()
        queue.cancel()
        try? client.syncShutdown()
    }

    /// The response delegate: runs on the event loop.
    private final class Delegate: HTTPClientResponseDelegate, @unchecked Sendable {
        typealias Response = Void
        let queue: ByteQueue
        private let state = Mutex<(head: Result<Head, StreamEnd>?, titles: [IcyDemuxer.Title])>((nil, []))
        private let headArrived = DispatchSemaphore(value: 0)
        /// Only the event loop touches it.
        private var icy: IcyDemuxer?

        init(queue: ByteQueue) { self.queue = queue }

        func waitForHead(timeout: Duration) throws -> Head {
            let seconds = Double(timeout.components.seconds) + Double(timeout.components.attoseconds) / 1e18
            if headArrived.wait(timeout: .now() + seconds) == .timedOut {
                throw StreamEnd(reason: "stalled: no answer within \(StreamBytes.seconds(UInt64(seconds * 1e9)))")
            }
            return try state.withLock { $0.head! }.get()
        }

        func takeTitles() -> [IcyDemuxer.Title] {
            state.withLock { s in
                defer { s.titles = [] }
                return s.titles
            }
        }

        private func setHead(_ head: Result<Head, StreamEnd>) {
            let first = state.withLock { s -> Bool in
                guard s.head == nil else { return false }
                s.head = head
                return true
            }
            if first { headArrived.signal() }
        }

        func didReceiveHead(task: HTTPClient.Task<Void>, _ head: HTTPResponseHead) -> EventLoopFuture<Void> {
            if let metaint = head.headers.first(name: "icy-metaint").flatMap(Int.init), metaint > 0, metaint <= 1 << 20 {
                icy = IcyDemuxer(metaint: metaint)
            }
            setHead(.success(Head(status: Int(head.status.code), contentType: head.headers.first(name: "Content-Type") ?? "",
                                  name: head.headers.first(name: "icy-name"))))
            return task.eventLoop.makeSucceededVoidFuture()
        }

        func didReceiveBodyPart(task: HTTPClient.Task<Void>, _ buffer: ByteBuffer) -> EventLoopFuture<Void> {
            let promise = task.eventLoop.makePromise(of: Void.self)
            var wait = false
            buffer.withUnsafeReadableBytes { bytes in
                let resume: @Sendable () -> Void = { promise.succeed() }
                if var demuxer = icy {
                    let titles = demuxer.demux(bytes) { audio in
                        if queue.append(audio, resume: resume) { wait = true }
                    }
                    icy = demuxer
                    if !titles.isEmpty { state.withLock { $0.titles += titles } }
                } else {
                    wait = queue.append(bytes, resume: resume)
                }
            }
            if !wait { promise.succeed() }
            return promise.futureResult
        }

        func didFinishRequest(task: HTTPClient.Task<Void>) throws {
            queue.finish(StreamEnd(reason: "ended: the server closed the connection"))
        }

        func didReceiveError(task: HTTPClient.Task<Void>, _ error: any Error) {
            let reason = StreamEnd(reason: "failed: \(Self.describe(error))")
            setHead(.failure(reason))
            queue.finish(reason)
        }

        /// An error as a person reads it (async-http-client's descriptions name types).
        static func describe(_ error: any Error) -> String {
            if let e = error as? HTTPClientError {
                switch e {
                case .connectTimeout: return "the connection timed out"
                case .remoteConnectionClosed: return "the server closed the connection"
                case .cancelled: return "it was cancelled"
                case .readTimeout: return "no data came in time"
                default: return "\(e)"
                }
            }
            if let e = error as? IOError { return String(cString: strerror(e.errnoCode)).lowercased() }
            let text = "\(error)"
            if text.contains("UnknownHost") { return "its host name was not found (DNS)" }
            return text
        }
    }
}
