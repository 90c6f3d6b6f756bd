public import TapedeckCore
public import Foundation
import Dispatch
import Synchronization

/// A seam that runs `action` when the store reaches `step`, on the store's thread, which waits for it.
public final class StepHook: StorageSeam {
    private let step: StorageStep
    private let action: @Sendable () -> Void

    public init(_ step: StorageStep, action: @escaping @Sendable () -> Void) {
        self.step = step
        self.action = action
    }

    /// - Thread: the store's calling thread. Never fails.
    public func willPerform(_ action: FileAction, on url: URL) throws {}

    /// Runs the action at the hooked step. - Thread: the store's calling thread; blocks for as
    /// long as the action runs.
    public func reached(_ step: StorageStep) throws {
        if step == self.step { action() }
    }
}

/// Checks a store's maintenance queries against other processes' operations running at the same
/// moment (another handle on the same library models another process: `flock` locks belong to
/// open file descriptions).
public enum ConcurrentMaintenanceCheck {
    /// What ``unnamedFilesDuringDelete(make:other:committedStep:)`` saw.
    public struct Outcome: Sendable {
        /// What the check had returned half a second after it started while the delete was held
        /// between its entry and its audio; `nil` if it was still waiting for the delete.
        public var whileDeleting: [String]?
        /// What it returned in the end.
        public var finally: [String]
    }

    /// Records a take through the store `make` returns (given the seam to use), then deletes it
    /// and, while the delete is held just after its entry was committed (at its step
    /// `committedStep`), runs `unreferencedFiles()` of a second handle from `other` on another
    /// thread. A correct store makes that wait for the delete and then report nothing; a store
    /// that looks while the audio is still there reports the take's file as unnamed.
    /// - Thread: any. Blocks for up to 15 s.
    public static func unnamedFilesDuringDelete(
        make: (any StorageSeam) throws -> any LibraryMaintenance,
        other: () throws -> any LibraryMaintenance,
        committedStep: String
    ) throws -> Outcome {
        let result = Mutex<[String]?>(nil)
        let seen = Mutex<[String]?>(nil)
        let done = DispatchSemaphore(value: 0)
        let otherBox = Mutex<(any LibraryMaintenance)?>(nil)
        let hook = StepHook(StorageStep("deleteTake", committedStep)) {
            guard let second = otherBox.withLock({ $0 }) else { return }
            Thread.detachNewThread {
                let found = (try? second.unreferencedFiles()) ?? ["(the check failed)"]
                result.withLock { $0 = found }
                done.signal()
            }
            Thread.sleep(forTimeInterval: 0.5)
            seen.withLock { $0 = result.withLock { $0 } }
        }
        let store = try make(hook)
        let session = try store.createSession(named: "Race")
        let pending = try store.beginTake(in: session.id, named: "Deleted", format: .cdStereo, encoding: "raw",
                                          fileExtension: "raw", startDate: Date())
        try Data(count: 4_096).write(to: pending.fileURL)
        let take = try store.finishTake(pending, frames: 1_024, state: .complete, overruns: [])
        let second = try other()
        otherBox.withLock { $0 = second }
        try store.deleteTake(take.id)
        guard done.wait(timeout: .now() + 15) == .success else {
            return Outcome(whileDeleting: seen.withLock { $0 }, finally: ["(the check never finished)"])
        }
        return Outcome(whileDeleting: seen.withLock { $0 }, finally: result.withLock { $0 } ?? [])
    }
}
