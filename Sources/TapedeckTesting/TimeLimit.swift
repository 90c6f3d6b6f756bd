import Foundation
import Synchronization

/// Runs a call that might never return (a C library looping on hostile input) on a thread of its
/// own, so the test that names the behaviour fails instead of hanging the whole test run.
public enum TimeLimit {
    /// The call had not returned when the limit passed; it is left running on its thread.
    public struct Exceeded: Error, CustomStringConvertible {
        public let description: String
    }

    /// `body`'s result, or ``Exceeded`` when it has not returned after `seconds`.
    /// - Thread: any. Blocks the caller for up to `seconds`.
    public static func run<T: Sendable>(_ seconds: Double, _ what: String, _ body: @escaping @Sendable () throws -> T) throws -> T {
        let outcome = Mutex<Result<T, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            let result = Result { try body() }
            outcome.withLock { $0 = result }
            done.signal()
        }
        guard done.wait(timeout: .now() + seconds) == .success else {
            throw Exceeded(description: "\(what) had not returned after \(seconds) s; without a limit the test run would hang here")
        }
        return try outcome.withLock { $0! }.get()
    }
}
