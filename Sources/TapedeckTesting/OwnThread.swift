import Foundation

/// Blocking work (a fixture that starts a daemon and polls until it answers) run on a thread of
/// its own and awaited, so that the task waiting for it holds none of the cooperative pool's few
/// threads, which other tests' tasks need.
public enum OwnThread {
    /// `work`'s result (or error), computed on a new thread.
    /// - Thread: any task. Suspends until `work` returns.
    public static func run<R: Sendable>(_ work: @escaping @Sendable () throws -> R) async throws -> R {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<R, any Error>) in
            Thread { continuation.resume(with: Result { try work() }) }.start()
        }
    }
}
