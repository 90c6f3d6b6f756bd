import Foundation
import TapedeckApp
import TapedeckCore
#if canImport(Glibc)
import Glibc
#endif

extension RecordCommand {
    /// What a recording in the library tells and does through its control socket
    /// (``RecorderControl``): `tapedeck status`, the page of a `tapedeck serve` on the same
    /// library, any program of the same user.
    @MainActor
    struct Control {
        let recorder: TakeRecorder
        let stops: StopRelay
        let library: String
        let session: String?
        let startedAt: Date
        let stopsAt: Date?
        /// Whether the run splits on request (a run: `--split`, `--vox`, `--armed`, `--resume` …).
        let splits: Bool

        func answer(_ request: RecorderControl.Request) -> RecorderControl.Answer {
            RecorderControl.answer(
                request,
                splitRefusal: splits ? nil : "This recording (PID \(getpid())) is one take: it was started without --split, --split-size, --split-on-marker, --vox, --armed or --resume, so it cannot be split. Stop it instead, or start the next one with --split.",
                mark: { recorder.mark(label: $0) }, split: { recorder.split() }, stop: { stops.request() },
                status: {
                    recorder.refreshProgress()
                    return RecorderStatus(recorder: recorder, pid: getpid(), startedBy: "record", library: library,
                                          session: session, startedAt: startedAt, splits: splits, stopsAt: stopsAt)
                })
        }

        /// Listens at the socket beside `registration`; `nil` (the recording goes on, unseen by
        /// the page and `status`) when it cannot.
        func listen(beside registration: URL?) -> RecorderControl? {
            guard let registration else { return nil }
            let control = self
            do {
                return try RecorderControl.listen(at: RecorderRegistry.socket(for: registration)) { request in control.answer(request) }
            } catch {
                // It records all the same; whoever watches it should know why they cannot.
                let why = (error as? RecorderControl.Failure)?.message ?? "\(error)"
                Terminal.printError("warning: `tapedeck status` and the page of `tapedeck serve` cannot see this recording: \(why)")
                return nil
            }
        }
    }
}
