import Foundation
import TapedeckApp
import TapedeckCore

extension RecordCommand {
    /// When a recording with `-d` or `--until` stops, said as a person would: `14:21:00`,
    /// `14:21:00 tomorrow`, `Tue 2026-12-01 18:00:00`. - Never blocks.
    static func stopText(_ stop: Date, now: Date = Date()) -> String {
        let calendar = Calendar.current
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.dateFormat = "HH:mm:ss"
        let time = f.string(from: stop)
        if calendar.isDate(stop, inSameDayAs: now) { return time }
        if let tomorrow = calendar.date(byAdding: .day, value: 1, to: now), calendar.isDate(stop, inSameDayAs: tomorrow) { return "\(time) tomorrow" }
        f.dateFormat = "EEE yyyy-MM-dd HH:mm:ss"
        return f.string(from: stop)
    }

    /// The banner's line for a recording that stops by itself: "Stops at 14:21:00 tomorrow, in 23:58:00."
    static func stopLine(_ stop: Date, now: Date = Date()) -> String {
        let left = Int(max(0, stop.timeIntervalSince(now)).rounded())
        return "Stops at \(stopText(stop, now: now)), in \(left / 3600):\(zeroPadded(left / 60 % 60, width: 2)):\(zeroPadded(left % 60, width: 2))."
    }

    /// Ends the recording on the wall clock, whatever audio it holds: at `--until`'s time, and
    /// `-d` after the audio began when a device may go away and come back (`--resume`, whose
    /// outage leaves less audio than the time passed). The frame limit still ends a `-d` run
    /// exactly without an outage: the clock's stop comes a quarter of a second after it.
    /// - Thread: main actor; the task sleeps.
    @MainActor
    static func wallClockStop(recorder: TakeRecorder, until: Date?, duration: Double?, resume: Bool) -> Task<Void, Never>? {
        guard until != nil || (duration != nil && resume) else { return nil }
        return Task { @MainActor in
            var deadline = until
            if deadline == nil, let duration {
                // From the first audio (opening a device takes a moment).
                while !Task.isCancelled, recorder.phase != .recording {
                    if recorder.phase == .finished { return }
                    try? await Task.sleep(for: .milliseconds(20))
                }
                deadline = Date().addingTimeInterval(duration + 0.25)
            }
            guard let deadline else { return }
            while !Task.isCancelled {
                let left = deadline.timeIntervalSinceNow
                if left <= 0 { break }
                try? await Task.sleep(for: .milliseconds(Int(min(left, 1) * 1000) + 1))
            }
            if !Task.isCancelled, recorder.phase == .recording { recorder.stopAtLength() }
        }
    }
}
