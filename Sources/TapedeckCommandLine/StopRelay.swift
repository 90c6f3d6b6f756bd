import Foundation
import TapedeckApp

/// Carries a stop request from the signal trap to the recorder, which may not exist yet when the
/// signal arrives.
/// - Thread: main actor only; never blocks.
@MainActor
final class StopRelay {
    private var recorder: TakeRecorder?
    private(set) var isRequested = false
    /// Runs at the first request (the meter says "Stopping…").
    var onRequest: (() -> Void)?

    /// Stops the recorder, or remembers the request until ``attach(_:)``.
    func request() {
        if !isRequested { onRequest?() }
        isRequested = true
        recorder?.stop()
    }

    /// Hands later stop requests to `recorder`; returns whether one has already arrived. A
    /// trigger that came before is handed on now.
    func attach(_ recorder: TakeRecorder) -> Bool {
        self.recorder = recorder
        if triggered { recorder.trigger() }
        return isRequested
    }

    private(set) var triggered = false

    /// Where `tapedeck mark` finds this recorder (``RecorderRegistry``), and what it left.
    var registration: URL? {
        get { inbox.registration }
        set { inbox.registration = newValue }
    }
    private var inbox = MarkInbox()

    /// Sets the markers `signals` SIGUSR1s bring: one per label `tapedeck mark` left, and one
    /// without a label per signal that brought none (``MarkInbox``); nothing before a recorder
    /// is attached.
    func mark(signals: Int) {
        guard let recorder else { return }
        for label in inbox.take(signals: signals) { recorder.mark(label: label) }
    }

    /// Triggers the recorder's armed run (SIGUSR2, Enter), or remembers it until ``attach(_:)``.
    func trigger() {
        triggered = true
        recorder?.trigger()
    }
}
