public import Observation
public import TapedeckCore
public import Logging
public import Foundation

/// The recorder of a front end that starts and stops recordings on request (the web page of
/// `tapedeck serve`): it makes a ``TakeRecorder`` per recording, runs it, keeps how the last one
/// ended, and refuses a second start while its own runs. (Other processes may record into the
/// same library at the same time, each into takes of its own; the page sees them through their
/// control sockets, ``RecorderControl``.) Recording itself is
/// ``TakeRecorder/record(sessionName:takeName:duration:plan:)``, the same as `tapedeck record`.
///
/// Runs on the main actor. Never blocks: recordings run as tasks; ``finish()`` suspends until
/// the one running has finished its take.
@MainActor
@Observable
public final class RecordingDesk {
    /// How the last recording ended.
    public struct Outcome: Sendable, Hashable {
        public var takeID: String?
        public var takeName: String?
        public var sessionID: String?
        public var sessionName: String?
        public var seconds: Double
        /// The report's sentence, or the failure's message.
        public var summary: String
        public var failed: Bool
        public var endedAt: Date
    }

    @ObservationIgnored private let makeRecorder: @MainActor () throws -> TakeRecorder
    @ObservationIgnored private let started: @MainActor (String) -> Void
    @ObservationIgnored private let ended: @MainActor () -> Void
    @ObservationIgnored private let logger: Logger
    @ObservationIgnored private var task: Task<Void, Never>?
    /// Set by ``finish()``: the desk takes no new recording (the server is stopping).
    @ObservationIgnored private var closed = false

    /// The recorder of the recording running now (observe it for meters), `nil` between recordings.
    public private(set) var recorder: TakeRecorder?
    /// When the running recording started, and the session it was asked to record into.
    @ObservationIgnored public private(set) var startedAt: Date?
    @ObservationIgnored public private(set) var session: String?
    public private(set) var last: Outcome?
    /// Counts finished recordings, so a view knows when the library changed.
    public private(set) var finishedCount = 0

    /// - Parameters:
    ///   - makeRecorder: a recorder wired by the composition root (`Studio.makeRecorder()`).
    ///   - logger: where a recording that fails is logged.
    ///   - started: told when a recording starts, with its session's name.
    ///   - ended: told when a recording ends.
    public init(makeRecorder: @escaping @MainActor () throws -> TakeRecorder, logger: Logger,
                started: @escaping @MainActor (String) -> Void = { _ in }, ended: @escaping @MainActor () -> Void = {}) {
        self.makeRecorder = makeRecorder
        self.started = started
        self.ended = ended
        self.logger = logger
    }

    /// Whether a recording runs.
    public var isRecording: Bool { recorder != nil }

    /// Starts recording into `session` (created if missing; `nil` for the most recent) as a take
    /// named `take` (`nil` for "Take N"), until ``stop()`` or `duration`.
    /// - Throws: `.busy` while a recording of this desk runs; the recorder's own errors when it
    ///   cannot be made (no capture backend).
    public func start(session: String?, take: String?, duration: RecordingLength? = nil, plan: RunPlan = RunPlan()) throws {
        if closed {
            throw TapedeckError(.busy, "The server is stopping; it starts no new recording.")
        }
        if let recorder {
            let what = recorder.target?.take.map { " (\($0))" } ?? ""
            throw TapedeckError(.busy, "A recording is running already\(what). Stop it first.")
        }
        if let session { _ = try NameRules.validate(session, what: "session") }
        if let take { _ = try NameRules.validate(take, what: "take") }
        let recorder = try makeRecorder()
        self.recorder = recorder
        self.startedAt = Date()
        self.session = session
        started(session ?? "")
        task = Task { [logger] in
            let began = Date()
            var outcome: Outcome
            do {
                let report = try await recorder.record(sessionName: session, takeName: take, duration: duration, plan: plan)
                outcome = Outcome(takeID: report.take.id, takeName: report.take.name, sessionID: report.session.id,
                                  sessionName: report.session.name, seconds: report.take.seconds, summary: report.summary,
                                  failed: false, endedAt: Date())
            } catch let nothing as NothingRecorded {
                outcome = Outcome(sessionID: nothing.session.id, sessionName: nothing.session.name, seconds: 0,
                                  summary: nothing.summary, failed: false, endedAt: Date())
            } catch let unfinished as UnfinishedRecording {
                outcome = Outcome(takeID: unfinished.report.take.id, takeName: unfinished.report.take.name,
                                  sessionID: unfinished.report.session.id, sessionName: unfinished.report.session.name,
                                  seconds: unfinished.report.take.seconds, summary: unfinished.error.message, failed: true, endedAt: Date())
            } catch {
                let message = (error as? TapedeckError)?.message ?? "\(error)"
                logger.error("Recording failed: \(message)")
                outcome = Outcome(seconds: Date().timeIntervalSince(began), summary: message, failed: true, endedAt: Date())
                outcome.seconds = 0
            }
            self.last = outcome
            self.recorder = nil
            self.startedAt = nil
            self.session = nil
            self.finishedCount += 1
            self.task = nil
            self.ended()
        }
    }

    /// The running recording's status (``RecorderControl``), `nil` between recordings.
    public func status(pid: Int32, library: String) -> RecorderStatus? {
        guard let recorder, let startedAt else { return nil }
        recorder.refreshProgress()
        return RecorderStatus(recorder: recorder, pid: pid, startedBy: "serve", library: library, session: session,
                              startedAt: startedAt, splits: true, stopsAt: nil)
    }

    /// Asks the running recording to stop (drained, the take finished); nothing when none runs.
    public func stop() {
        recorder?.stop()
    }

    /// Sets a marker in the running recording.
    /// - Throws: `.notFound` when nothing records.
    public func mark(label: String) throws {
        guard let recorder else { throw TapedeckError(.notFound, "Nothing is recording, so there is nothing to mark. Start a recording first.") }
        recorder.mark(label: label)
    }

    /// Ends the take being recorded and goes on in a new one (recordings started here are runs
    /// that split on request).
    /// - Throws: `.notFound` when nothing records.
    public func split() throws {
        guard let recorder else { throw TapedeckError(.notFound, "Nothing is recording, so there is nothing to split. Start a recording first.") }
        recorder.split()
    }

    /// Stops the running recording and waits until its take is finished (a server shutting down).
    public func finish() async {
        closed = true
        recorder?.stop()
        await task?.value
    }
}
