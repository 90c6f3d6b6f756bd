import Foundation
import Synchronization

/// Keeps the bytes sent by every task of one upload run under a rate (`--limit-rate`): a token
/// bucket holding at most one second's worth. Safe on any thread; ``pace(_:)`` suspends (never
/// blocks a thread) until the bytes may go.
public final class RateLimiter: Sendable {
    /// Bytes per second.
    public let bytesPerSecond: Int64
    private let state: Mutex<(available: Double, at: ContinuousClock.Instant)>

    public init(bytesPerSecond: Int64) {
        precondition(bytesPerSecond > 0)
        self.bytesPerSecond = bytesPerSecond
        state = Mutex((0, ContinuousClock.now))
    }

    /// Takes `bytes` from the bucket, waiting until the rate allows them.
    /// - Throws: `CancellationError` when the task is cancelled while it waits.
    public func pace(_ bytes: Int) async throws {
        let rate = Double(bytesPerSecond)
        let wait: Double = state.withLock { s in
            let now = ContinuousClock.now
            let elapsed = now - s.at
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            s.available = min(rate, s.available + seconds * rate) - Double(bytes)
            s.at = now
            return s.available < 0 ? -s.available / rate : 0
        }
        if wait > 0 { try await Task.sleep(for: .seconds(wait)) }
    }

    /// Parses a rate as `curl --limit-rate` and rclone's `--bwlimit` write it: a number of bytes
    /// per second with an optional suffix `k`/`K`, `M`, `G` (powers of 1024; `KiB`, `MiB`, `GiB` and
    /// a trailing `/s` are accepted too).
    /// - Returns: bytes per second, or `nil` when `text` is not such a rate or is zero.
    /// - Thread: any. Never blocks.
    public static func parse(_ text: String) -> Int64? {
        var t = text.trimmingCharacters(in: .whitespaces)
        if t.hasSuffix("/s") { t.removeLast(2) }
        if t.hasSuffix("iB") || t.hasSuffix("ib") { t.removeLast(2) } else if t.hasSuffix("B") || t.hasSuffix("b") { t.removeLast() }
        var multiplier: Double = 1
        if let last = t.last, !last.isNumber && last != "." {
            switch last {
            case "k", "K": multiplier = 1024
            case "m", "M": multiplier = 1024 * 1024
            case "g", "G": multiplier = 1024 * 1024 * 1024
            default: return nil
            }
            t.removeLast()
        }
        guard let number = Double(t), number.isFinite, number > 0 else { return nil }
        let bytes = number * multiplier
        guard bytes >= 1, bytes < 1e15 else { return nil }
        return Int64(bytes)
    }
}
