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

    /// Where `tapedeck mark` finds this recorder (``RecorderRegistry``), and how far its labels
    /// were read.
    var registration: URL?
    private var labelsRead: UInt64 = 0

    /// Sets a marker (SIGUSR1): one per label `tapedeck mark` left, or one without a label;
    /// nothing before a recorder is attached.
    func mark() {
        guard let recorder else { return }
        let labels = registration.map { RecorderRegistry.newLabels(for: $0, from: &labelsRead) } ?? []
        if labels.isEmpty { recorder.mark() }
        for label in labels { recorder.mark(label: label) }
    }

    /// Triggers the recorder's armed run (SIGUSR2, Enter), or remembers it until ``attach(_:)``.
    func trigger() {
        triggered = true
        recorder?.trigger()
    }
}
