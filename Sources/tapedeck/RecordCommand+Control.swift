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
            switch request.op {
            case "status":
                break
            case "mark":
                let label = request.label ?? ""
                guard let problem = Self.labelProblem(label) else {
                    recorder.mark(label: label)
                    break
                }
                return RecorderControl.Answer(error: problem)
            case "split":
                guard splits else {
                    return RecorderControl.Answer(error: "This recording (PID \(getpid())) is one take: it was started without --split, --split-size, --split-on-marker, --vox, --armed or --resume, so it cannot be split. Stop it instead, or start the next one with --split.")
                }
                recorder.split()
            case "stop":
                stops.request()
            default:
                return RecorderControl.Answer(error: "Unknown request \"\(request.op.prefix(40))\": ask for status, mark, split or stop.")
            }
            recorder.refreshProgress()
            return RecorderControl.Answer(status: RecorderStatus(recorder: recorder, pid: getpid(), startedBy: "record", library: library,
                                                                 session: session, startedAt: startedAt, splits: splits, stopsAt: stopsAt))
        }

        /// Why a marker's label cannot be kept (as the take keeps them), or `nil`.
        static func labelProblem(_ label: String) -> String? {
            label.utf8.count <= TakeMarker.maxLabelBytes && !label.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) ? nil
                : "A marker's label is one line of at most \(TakeMarker.maxLabelBytes) bytes, without control characters."
        }

        /// Listens at the socket beside `registration`; `nil` (the recording goes on, unseen by
        /// the page and `status`) when it cannot.
        func listen(beside registration: URL?) -> RecorderControl? {
            guard let registration else { return nil }
            let control = self
            return try? RecorderControl.listen(at: RecorderRegistry.socket(for: registration)) { request in control.answer(request) }
        }
    }
}
