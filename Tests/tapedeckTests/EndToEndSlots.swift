import Foundation
import Testing

/// At most as many end-to-end tests at once as the machine has cores.
///
/// The command tests wait for `tapedeck` without holding a thread, so the test runner would start
/// every one of them at once; on a 2-core machine their recordings then share the cores with a
/// hundred others, and checks bound to wall time (a signal 0.5 s after a recording starts, a
/// meter read within a second) measure the crowd instead of Tapedeck. Each suite of this target
/// carries `.endToEnd`: a test waits (without a thread) for a slot before it runs, which is as
/// many as ran when each of them held one of the cooperative pool's threads, while the
/// in-process tests of other targets keep the pool to themselves.
struct EndToEndSlots: SuiteTrait, TestTrait, TestScoping {
    var isRecursive: Bool { true }

    func provideScope(for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void) async throws {
        guard testCase != nil else { return try await function() }  // the suite itself: its tests take the slots
        await Self.slots.acquire()
        do {
            try await function()
        } catch {
            await Self.slots.release()
            throw error
        }
        await Self.slots.release()
    }

    static let slots = Slots(width: max(1, ProcessInfo.processInfo.activeProcessorCount))

    /// A counting semaphore whose waiters hold no thread.
    actor Slots {
        private var free: Int
        private var waiting: [CheckedContinuation<Void, Never>] = []

        init(width: Int) { free = width }

        func acquire() async {
            if free > 0 {
                free -= 1
                return
            }
            await withCheckedContinuation { waiting.append($0) }
        }

        func release() {
            if waiting.isEmpty {
                free += 1
            } else {
                waiting.removeFirst().resume()
            }
        }
    }
}

extension Trait where Self == EndToEndSlots {
    /// Runs each test of the suite in one of the end-to-end slots (``EndToEndSlots``).
    static var endToEnd: Self { EndToEndSlots() }
}
