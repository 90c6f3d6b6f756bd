import Foundation
import Synchronization

/// Why a stream's bytes stopped: the words a lost-device message says after "The stream … ".
package struct StreamEnd: Error, Sendable, Equatable {
    package var reason: String

    package init(reason: String) { self.reason = reason }
}

/// The bytes of one connection, between the network's event loop (which appends) and the
/// stream's decoding thread (which reads, blocking). Bounded: past ``highWater`` bytes the
/// appender is handed a wait that is released when the reader has taken the queue below
/// ``lowWater``, so a reader that is behind slows the connection (TCP's own back-pressure)
/// instead of growing memory.
///
/// Thread: ``append(_:)``, ``finish(_:)`` and ``cancel()`` from any thread (the event loop),
/// never blocking; ``read(into:count:deadline:)`` from the decoding thread, blocking.
package final class ByteQueue: @unchecked Sendable {
    package static let highWater = 1 << 20
    package static let lowWater = 1 << 18

    private let condition = NSCondition()
    private var bytes: [UInt8] = []
    private var start = 0
    private var ended: StreamEnd?
    private var resumeAppender: (@Sendable () -> Void)?

    package init() { bytes.reserveCapacity(Self.highWater) }

    /// Appends audio bytes. - Returns: whether the appender should wait; then `resume` is called
    /// once the reader has caught up (or the queue ended).
    package func append(_ chunk: UnsafeRawBufferPointer, resume: @escaping @Sendable () -> Void) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        guard ended == nil else { return false }
        bytes.append(contentsOf: chunk)
        condition.broadcast()
        if bytes.count - start > Self.highWater {
            resumeAppender = resume
            return true
        }
        return false
    }

    /// No more bytes will come, for `reason`. A reader takes what is queued first.
    package func finish(_ reason: StreamEnd) {
        condition.lock()
        if ended == nil { ended = reason }
        let waiting = resumeAppender
        resumeAppender = nil
        condition.broadcast()
        condition.unlock()
        waiting?()
    }

    /// The reader goes away: the queue ends and the bytes are dropped.
    package func cancel() {
        condition.lock()
        bytes = []
        start = 0
        condition.unlock()
        finish(StreamEnd(reason: "was closed"))
    }

    /// Copies up to `count` queued bytes, waiting for some until `deadline` (a monotonic
    /// uptime in nanoseconds, which the caller may move: it is asked again after each wait).
    /// - Returns: the bytes copied, > 0.
    /// - Throws: ``StreamEnd`` once the queue is empty and ended, or when `deadline` passed.
    package func read(into destination: UnsafeMutableRawPointer, count: Int, deadline: () -> (UInt64, StreamEnd)) throws -> Int {
        condition.lock()
        var waiting: (@Sendable () -> Void)?
        defer {
            condition.unlock()
            waiting?()
        }
        while bytes.count - start == 0 {
            if let ended { throw ended }
            let (due, stall) = deadline()
            let now = DispatchTime.now().uptimeNanoseconds
            guard now < due else { throw stall }
            _ = condition.wait(until: Date(timeIntervalSinceNow: Double(min(due - now, 250_000_000)) / 1e9))
        }
        let n = min(count, bytes.count - start)
        bytes.withUnsafeBytes { destination.copyMemory(from: $0.baseAddress! + start, byteCount: n) }
        start += n
        if start == bytes.count {
            bytes.removeAll(keepingCapacity: true)
            start = 0
        } else if start > Self.highWater {
            bytes.removeFirst(start)
            start = 0
        }
        if bytes.count - start < Self.lowWater, let resume = resumeAppender {
            resumeAppender = nil
            waiting = resume
        }
        return n
    }
}

/// What the decoders read from: the connection's queued bytes with a look-ahead for sniffing
/// the container, and the liveness rule: a read that waits past the last decoded audio plus
/// `stallAfter` ends the stream as stalled.
///
/// Thread: the stream's decoding thread only (and the device thread while it opens).
package final class StreamBytes {
    private let queue: ByteQueue
    private let stallNanos: UInt64
    private var pushback: [UInt8] = []
    /// When audio was last decoded (or the stream began): a monotonic uptime in nanoseconds.
    package var lastAudio: UInt64
    /// Bytes handed to decoders so far.
    package private(set) var consumed: Int64 = 0
    /// Why the stream ended, once it did.
    package private(set) var end: StreamEnd?

    package init(_ queue: ByteQueue, stallNanos: UInt64) {
        self.queue = queue
        self.stallNanos = stallNanos
        lastAudio = DispatchTime.now().uptimeNanoseconds
    }

    /// Copies up to `count` bytes, blocking for the first. - Returns: 0 at the end of the stream
    /// (then ``end`` says why). Never throws: decoders see an end, and the device its reason.
    package func read(into destination: UnsafeMutableRawPointer, count: Int) -> Int {
        guard count > 0 else { return 0 }
        if !pushback.isEmpty {
            let n = min(count, pushback.count)
            pushback.withUnsafeBytes { destination.copyMemory(from: $0.baseAddress!, byteCount: n) }
            pushback.removeFirst(n)
            consumed += Int64(n)
            return n
        }
        let n = fill(destination, count: count)
        consumed += Int64(n)
        return n
    }

    /// Up to `count` bytes from the queue itself (not the look-ahead). 0 at the end.
    private func fill(_ destination: UnsafeMutableRawPointer, count: Int) -> Int {
        guard end == nil else { return 0 }
        do {
            let stall = stallNanos
            let since = lastAudio
            return try queue.read(into: destination, count: count) {
                (since + stall, StreamEnd(reason: "stalled: no audio for \(Self.seconds(stall))"))
            }
        } catch let e as StreamEnd {
            end = e
            return 0
        } catch {
            end = StreamEnd(reason: "failed: \(error)")
            return 0
        }
    }

    /// The first `count` bytes (fewer at the end of the stream), left to be read again.
    package func peek(_ count: Int) -> [UInt8] {
        while pushback.count < count {
            var chunk = [UInt8](repeating: 0, count: count - pushback.count)
            let n = chunk.withUnsafeMutableBytes { fill($0.baseAddress!, count: $0.count) }
            if n == 0 { break }
            pushback += chunk[0..<n]
        }
        return Array(pushback.prefix(count))
    }

    /// Ends the stream for `reason` (a decoder that met bytes it cannot read).
    package func fail(_ reason: String) { if end == nil { end = StreamEnd(reason: reason) } }

    package static func seconds(_ nanos: UInt64) -> String {
        let s = Double(nanos) / 1e9
        return s == s.rounded() ? "\(Int(s)) s" : String(format: "%.1f s", s)
    }
}
