import Dispatch

/// Runs blocking work (disk I/O, SQLite) off the main actor and Swift's cooperative pool, on one
/// serial queue, and awaits its result.
enum BlockingWork {
    private static let queue = DispatchQueue(label: "tapedeck.blocking-work")

    static func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { cont in
            queue.async { cont.resume(with: Result { try body() }) }
        }
    }
}
