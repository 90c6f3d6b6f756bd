public import Foundation
public import TapedeckCore

/// The clock a scheduled recording reads and waits on: the wall clock in use
/// (``WallScheduleClock``), or in tests a virtual one that also paces the null device, so a
/// scheduled day runs in seconds. - Thread: main actor.
@MainActor
public protocol ScheduleClock: AnyObject {
    /// The time now.
    func now() -> Date
    /// Returns at `date`, or earlier when `stopped()` turns true (checked at least every 250 ms).
    func sleep(until date: Date, stopped: @MainActor () -> Bool) async
}

/// The wall clock: `Date()`, and `Task.sleep` in steps of at most 250 ms so a stop is seen.
/// - Thread: main actor; `sleep` suspends.
@MainActor
public final class WallScheduleClock: ScheduleClock {
    public init() {}
    public func now() -> Date { Date() }
    public func sleep(until date: Date, stopped: @MainActor () -> Bool) async {
        while !stopped() {
            let left = date.timeIntervalSinceNow
            if left <= 0 { return }
            try? await Task.sleep(for: .milliseconds(Int(min(250, max(5, left * 1000)))))
        }
    }
}

/// `record --schedule`: each stretch of a ``RecordingSchedule`` recorded as a run of its own,
/// waiting between them, until stopped. A start inside a stretch records at once (the run's
/// first take began `schedule-catch-up`, else `schedule`); a device missing when a stretch begins
/// is tried again every 10 s while the stretch lasts.
/// - Thread: main actor; ``run(plan:session:take:stopped:events:)`` suspends while recording and
///   waiting.
@MainActor
public struct ScheduledRecording {
    /// What happens, as it happens (the command prints these).
    public enum Event {
        /// Nothing to record until `Occurrence.start`.
        case waiting(RecordingSchedule.Occurrence, now: Date)
        /// A stretch begins recording at `now` (later than its start: a catch-up).
        case recording(RecordingSchedule.Occurrence, now: Date, catchUp: Bool)
        /// A stretch's run ended.
        case finished(RecordingReport)
        /// The device was missing when a stretch began; tried again in 10 s.
        case deviceMissing(TapedeckError)
        /// The wait is over (a stretch begins or a stop came).
        case waited
    }

    public let schedule: RecordingSchedule
    public let recorder: TakeRecorder
    public let clock: any ScheduleClock

    public init(schedule: RecordingSchedule, recorder: TakeRecorder, clock: any ScheduleClock = WallScheduleClock()) {
        self.schedule = schedule
        self.recorder = recorder
        self.clock = clock
    }

    /// Records the schedule's stretches until `stopped()` turns true, reporting each step to
    /// `events`. A run that ends with a stop (cancelled) ends the loop.
    /// - Throws: `.configuration` when the schedule has no stretch in the next 400 days; what a
    ///   stretch's recording throws other than a missing device or a stop.
    public func run(plan: RunPlan, session: String?, take: String?, stopped: @MainActor () -> Bool,
                    events: @MainActor (Event) throws -> Void) async throws {
        while !stopped() {
            let now = clock.now()
            guard let stretch = schedule.current(at: now) else {
                throw TapedeckError(.configuration, "The schedule has no stretch in the next 400 days: `tapedeck schedule` shows its windows.")
            }
            if stretch.start.timeIntervalSince(now) > 0.5 {
                try events(.waiting(stretch, now: now))
                await clock.sleep(until: stretch.start, stopped: stopped)
                try events(.waited)
                continue
            }
            var run = plan
            let catchUp = now.timeIntervalSince(stretch.start) > 2
            run.firstTakeBegins = catchUp ? .scheduleCatchUp : .schedule
            // Every stretch is a run, so its take says why it began.
            run.splitOnRequest = true
            try events(.recording(stretch, now: now, catchUp: catchUp))
            do {
                let report = try await recorder.record(sessionName: session, takeName: take,
                                                       duration: .seconds(stretch.end.timeIntervalSince(now)), plan: run)
                try events(.finished(report))
            } catch let error as TapedeckError where error.code == .cancelled {
                return
            } catch let error as TapedeckError where error.code == .deviceUnavailable {
                // A service outlives a device that is missing when its stretch begins.
                try events(.deviceMissing(error))
                await clock.sleep(until: min(stretch.end, clock.now().addingTimeInterval(10)), stopped: stopped)
            }
        }
    }
}
