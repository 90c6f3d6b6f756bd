import ArgumentParser
import Foundation
import TapedeckApp
import TapedeckCore

/// While `record --schedule` waits for its next stretch: when it begins (the service's status
/// says so, and its watchdog is fed meanwhile). Main actor only.
@MainActor
final class ScheduleWaiting {
    var nextStart: Date?
}

extension RecordCommand {
    /// `record --schedule` with the config's schedule (refused without one), its alerts raised.
    @MainActor
    func recordOnSchedule(_ timetable: RecordingSchedule?, recorder: TakeRecorder, stops: StopRelay, waiting: ScheduleWaiting,
                          alerts: RecordAlerts?, plan: RunPlan, storage: any TakeStorage) async throws {
        guard let timetable else {
            throw TapedeckError(.configuration, "--schedule records the config's schedule:, and it has none. Add one (`tapedeck config example` shows it); `tapedeck schedule` then lists its stretches.")
        }
        let (session, name, json) = (self.session, self.name, self.json)
        _ = try await RecordAlerts.around(alerts) {
            try await Self.recordOnSchedule(timetable, recorder: recorder, stops: stops, waiting: waiting, session: session, name: name, plan: plan, json: json, storage: storage)
        }
    }

    /// `record --schedule`: ``ScheduledRecording`` on the wall clock, saying on stderr what it
    /// waits for and printing each stretch's report as it ends; the exit status is the worst of
    /// them. - Thread: main actor; suspends while recording and waiting.
    @MainActor
    static func recordOnSchedule(_ schedule: RecordingSchedule, recorder: TakeRecorder, stops: StopRelay, waiting: ScheduleWaiting,
                                 session: String?, name: String?, plan: RunPlan, json: Bool, storage: any TakeStorage) async throws -> RecordingReport? {
        var last: RecordingReport?
        var worst: ExitCode?
        let quiet = Terminal.quiet.load(ordering: .relaxed)
        try await ScheduledRecording(schedule: schedule, recorder: recorder).run(plan: plan, session: session, take: name, stopped: { stops.isRequested }) { event in
            switch event {
            case .waiting(let stretch, let now):
                waiting.nextStart = stretch.start
                if !quiet {
                    Terminal.printError("Waiting for the schedule: the next stretch is \(ScheduleCommand.local(stretch.start, schedule.zone)) to \(ScheduleCommand.local(stretch.end, schedule.zone, dayIfOther: stretch.start)) (window \(stretch.window + 1)), in \(RetentionClock.duration(stretch.start.timeIntervalSince(now))).", event: "schedule-waiting")
                }
            case .waited:
                waiting.nextStart = nil
            case .recording(let stretch, _, let catchUp):
                if catchUp && !quiet {
                    Terminal.printError("Inside a stretch of the schedule since \(ScheduleCommand.local(stretch.start, schedule.zone)): recording at once, until \(ScheduleCommand.local(stretch.end, schedule.zone, dayIfOther: stretch.start)).", event: "schedule-catch-up")
                }
            case .finished(let report):
                last = report
                // A stretch that ended badly does not end the service: the worst status is kept.
                do { try finish(report, json: json, storage: storage) } catch let code as ExitCode {
                    if code.rawValue > (worst?.rawValue ?? 0) { worst = code }
                }
            case .deviceMissing(let error):
                Terminal.printError("\(error.message) Trying again in 10 s while the stretch lasts.", priority: .warning, event: "device-missing")
            }
        }
        if let worst { throw worst }
        return last
    }
}
