public import TapedeckCore
public import Foundation
import Synchronization

/// The error a ``FaultInjectingSeam`` throws at a simulated crash (and for every mutation after it).
public struct SimulatedCrash: Error, Sendable, Hashable, CustomStringConvertible {
    public var step: StorageStep?
    public var description: String { "simulated crash" + (step.map { " after \($0)" } ?? "") }
}

/// A `StorageSeam` for tests: it records every step and mutation, and when armed either fails
/// the N-th mutation of one kind with an `errno` (EIO, ENOSPC), or "crashes" after a labelled
/// step: that step throws ``SimulatedCrash`` and so does every mutation after it, so no clean-up
/// code can change the library afterwards — as if the process had died there.
///
/// Thread-safe; never blocks.
public final class FaultInjectingSeam: StorageSeam {
    /// What to inject.
    public enum Fault: Sendable, Hashable {
        /// Stop after this step; every mutation after it fails.
        case crash(after: StorageStep)
        /// Stop at the `nth` (1-based) mutation of any kind: it and every later one fail.
        case crashAtMutation(Int)
        /// Fail the `nth` (1-based) mutation of this kind with `errno`.
        case fail(FileAction, nth: Int, errno: Int32)
    }

    /// A mutation or a step, in the order they happened.
    public enum Event: Sendable, Hashable {
        case action(FileAction)
        case step(StorageStep)
    }

    private struct State {
        var events: [Event] = []
        var armed: Fault?
        var crashed = false
        var steps: [StorageStep] = []
        var actions: [FileAction] = []
        var countsSinceArmed: [FileAction: Int] = [:]
        var injected = 0
    }
    private let state = Mutex(State())

    public init() {}

    /// Starts injecting `fault` (counts restart from here). - Thread: any.
    public func arm(_ fault: Fault?) {
        state.withLock {
            $0.armed = fault
            $0.countsSinceArmed = [:]
            $0.steps = []
            $0.actions = []
            $0.events = []
            $0.injected = 0
        }
    }

    /// Whether a crash was simulated (from then on every mutation fails).
    public var crashed: Bool { state.withLock { $0.crashed } }
    /// Faults injected since the seam was armed.
    public var injectedCount: Int { state.withLock { $0.injected } }
    /// Steps reported since the seam was armed, in order.
    public var steps: [StorageStep] { state.withLock { $0.steps } }
    /// Mutations and steps since the seam was armed, interleaved in order.
    public var events: [Event] { state.withLock { $0.events } }
    /// Mutations announced since the seam was armed, in order.
    public var actions: [FileAction] { state.withLock { $0.actions } }

    public func willPerform(_ action: FileAction, on url: URL) throws {
        try state.withLock { s in
            if s.crashed { throw SimulatedCrash(step: nil) }
            s.actions.append(action)
            s.events.append(.action(action))
            s.countsSinceArmed[action, default: 0] += 1
            if case let .crashAtMutation(nth)? = s.armed, s.actions.count == nth {
                s.crashed = true
                s.injected += 1
                throw SimulatedCrash(step: nil)
            }
            if case let .fail(kind, nth, code)? = s.armed, kind == action, s.countsSinceArmed[action] == nth {
                s.injected += 1
                throw TapedeckError.system(code, while: "\(action.rawValue) \(url.path) (injected)")
            }
        }
    }

    public func reached(_ step: StorageStep) throws {
        try state.withLock { s in
            if s.crashed { throw SimulatedCrash(step: step) }
            s.steps.append(step)
            s.events.append(.step(step))
            if case let .crash(after)? = s.armed, after == step {
                s.crashed = true
                s.injected += 1
                throw SimulatedCrash(step: step)
            }
        }
    }
}
