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

    /// `record --schedule`: records each stretch of `schedule` (`tapedeck schedule` lists them)
    /// as a run of its own, waiting between them, until stopped. A start inside a stretch
    /// records at once (the take's run began `schedule-catch-up`, else `schedule`); a device
    /// missing when a stretch begins is tried again every 10 s while the stretch lasts. Each
    /// stretch's report is printed as it ends; the exit status is the worst of them.
    /// - Thread: main actor; suspends while recording and waiting.
    @MainActor
    static func recordOnSchedule(_ schedule: RecordingSchedule, recorder: TakeRecorder, stops: StopRelay, waiting: ScheduleWaiting,
                                 session: String?, name: String?, plan: RunPlan, json: Bool, storage: any TakeStorage) async throws -> RecordingReport? {
        var last: RecordingReport?
        var worst: ExitCode?
        while !stops.isRequested {
            let now = Date()
            guard let stretch = schedule.current(at: now) else {
                throw TapedeckError(.configuration, "The schedule has no stretch in the next 400 days: `tapedeck schedule` shows its windows.")
            }
            if stretch.start.timeIntervalSince(now) > 0.5 {
                waiting.nextStart = stretch.start
                if !Terminal.quiet.load(ordering: .relaxed) {
                    Terminal.printError("Waiting for the schedule: the next stretch is \(ScheduleCommand.local(stretch.start, schedule.zone)) to \(ScheduleCommand.local(stretch.end, schedule.zone, dayIfOther: stretch.start)) (window \(stretch.window + 1)), in \(RetentionClock.duration(stretch.start.timeIntervalSince(now))).")
                }
                await sleep(until: stretch.start, stops: stops)
                waiting.nextStart = nil
                continue
            }
            var run = plan
            let catchUp = now.timeIntervalSince(stretch.start) > 2
            run.firstTakeBegins = catchUp ? .scheduleCatchUp : .schedule
            // Every stretch is a run, so its take says why it began.
            run.splitOnRequest = true
            if catchUp && !Terminal.quiet.load(ordering: .relaxed) {
                Terminal.printError("Inside a stretch of the schedule since \(ScheduleCommand.local(stretch.start, schedule.zone)): recording at once, until \(ScheduleCommand.local(stretch.end, schedule.zone, dayIfOther: stretch.start)).")
            }
            do {
                let report = try await recorder.record(sessionName: session, takeName: name, duration: .seconds(stretch.end.timeIntervalSince(Date())), plan: run)
                last = report
                do { try finish(report, json: json, storage: storage) } catch let code as ExitCode where code.rawValue > (worst?.rawValue ?? 0) { worst = code }
            } catch let error as TapedeckError where error.code == .cancelled {
                break
            } catch let error as TapedeckError where error.code == .deviceUnavailable {
                // A service outlives a device that is missing when its stretch begins.
                Terminal.printError("\(error.message) Trying again in 10 s while the stretch lasts.")
                await sleep(until: min(stretch.end, Date().addingTimeInterval(10)), stops: stops)
            }
        }
        if let worst { throw worst }
        return last
    }

    /// Sleeps until `date` or a stop request, whichever comes first.
    @MainActor
    private static func sleep(until date: Date, stops: StopRelay) async {
        while !stops.isRequested {
            let left = date.timeIntervalSinceNow
            if left <= 0 { return }
            try? await Task.sleep(for: .milliseconds(Int(min(250, max(5, left * 1000)))))
        }
    }
}
