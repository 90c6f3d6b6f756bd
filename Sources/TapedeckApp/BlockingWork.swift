import Dispatch

/// Runs blocking work (disk I/O, SQLite) off the main actor and Swift's cooperative pool, and
/// awaits its result. A ``SessionStore`` has one of its own, a serial queue, so its changes run in
/// the order they were asked for; work that needs no order with anything else (an import, a
/// doctor's examination) runs on a global queue through ``detached(_:)``. No queue is shared by
/// every store of the process: one slow library never holds up another.
/// - Thread: any. Never blocks the caller; suspends until the work is done.
struct BlockingWork: Sendable {
    private let queue: DispatchQueue

    /// A serial queue named `label`.
    init(label: String) {
        queue = DispatchQueue(label: label)
    }

    func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await Self.run(on: queue, body)
    }

    static func detached<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await run(on: .global(qos: .userInitiated), body)
    }

    private static func run<T: Sendable>(on queue: DispatchQueue, _ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { cont in
            queue.async { cont.resume(with: Result { try body() }) }
        }
    }
}
