import Foundation
import Synchronization
import TapedeckApp
import TapedeckCore

/// `STOPPING=1` said once, whichever comes first: a stop signal, or the end of the run.
final class ServiceStopping: Sendable {
    private let said = Atomic<Bool>(false)
    let notifier: ServiceNotifier

    init(_ notifier: ServiceNotifier) { self.notifier = notifier }

    /// - Thread: any (the signal handler's queue, the main actor); never blocks.
    func say(_ status: String) {
        guard notifier.isActive, !said.exchange(true, ordering: .acquiringAndReleasing) else { return }
        notifier.stopping(status: status)
    }
}

extension RecordCommand {
    /// Tells systemd how a recording run by a `Type=notify` service goes (``ServiceNotifier``;
    /// nothing outside one): `READY=1` once audio flows, a `STATUS=` line every few seconds
    /// (`systemctl status`), and, under `WatchdogSec=`, `WATCHDOG=1` at half the interval but only
    /// while the run's frames advance: a device thread or a writer that hangs stops the pings, and
    /// systemd restarts the service. Runs on the main actor, reading the recorder's progress.
    @MainActor
    static func serviceWatch(_ recorder: TakeRecorder, notifier: ServiceNotifier, waiting: ScheduleWaiting? = nil) -> Task<Void, Never>? {
        guard notifier.isActive else { return nil }
        return Task { @MainActor in
            let tick = min(notifier.watchdogInterval.map { $0 / 2 } ?? .seconds(5), .seconds(5))
            let statusEvery = Duration.seconds(5)
            var lastFrames: Int64 = 0
            var lastRetries = 0
            var ready = false
            var lastStatus = ContinuousClock.now
            // What the run does (records, waits for its device or trigger): a change is said at once.
            var lastState = ""
            while !Task.isCancelled {
                // Until audio flows, look often: READY=1 is said as soon as it does.
                try? await Task.sleep(for: ready ? tick : .milliseconds(100))
                if Task.isCancelled { break }
                recorder.refreshProgress()
                // `record --schedule` between its stretches: ready, waiting, and alive.
                if let next = waiting?.nextStart {
                    let line = "Waiting for the schedule: the next stretch at \(next.formatted(date: .abbreviated, time: .standard))"
                    if !ready {
                        ready = true
                        notifier.ready(status: line)
                        (lastStatus, lastState) = (ContinuousClock.now, line)
                    } else if ContinuousClock.now - lastStatus >= statusEvery || lastState != line {
                        notifier.status(line)
                        (lastStatus, lastState) = (ContinuousClock.now, line)
                    }
                    if notifier.watchdogInterval != nil { notifier.watchdog() }
                    // The next stretch's recording counts its frames from 0.
                    (lastFrames, lastRetries) = (0, 0)
                    continue
                }
                // Alive: frames arrived and were written, or (a resuming run whose device is
                // gone) the device thread tried to open it again.
                let (frames, retries) = (recorder.frames, recorder.deviceRetries)
                guard recorder.phase == .recording, frames > lastFrames || retries > lastRetries else { continue }
                (lastFrames, lastRetries) = (frames, retries)
                let state = "\(recorder.deviceLostAt != nil) \(String(describing: recorder.waiting))"
                if !ready {
                    ready = true
                    notifier.ready(status: serviceStatus(recorder))
                    (lastStatus, lastState) = (ContinuousClock.now, state)
                } else if ContinuousClock.now - lastStatus >= statusEvery || state != lastState {
                    lastState = state
                    notifier.status(serviceStatus(recorder))
                    lastStatus = ContinuousClock.now
                }
                if notifier.watchdogInterval != nil { notifier.watchdog() }
            }
        }
    }

    /// One line for `systemctl status`: what the run is doing, its take, time and level.
    @MainActor
    static func serviceStatus(_ recorder: TakeRecorder) -> String {
        if let lost = recorder.deviceLostAt {
            return "Waiting for the device, lost at \(lost.formatted(date: .omitted, time: .standard)) (trying every second); the takes before are kept"
        }
        switch recorder.waiting {
        case .armed: return "Armed: waiting for the trigger"
        case .vox: return "Waiting for sound (VOX)"
        case nil: break
        }
        let seconds = recorder.format.map { $0.seconds(forFrames: recorder.takeFrames) } ?? 0
        var line = "Recording \(recorder.target?.take ?? "a take"): \(Terminal.clock(seconds))"
        if let peak = recorder.peaks.max(), peak > 0 {
            line += String(format: ", peak %.0f dBFS", 20 * log10(Double(peak)))
        }
        if recorder.overrunCount > 0 { line += ", \(Terminal.counted(recorder.overrunCount, "overrun"))" }
        if recorder.silenceAlarms > 0 { line += ", silence alarm raised \(recorder.silenceAlarms == 1 ? "once" : "\(recorder.silenceAlarms) times")" }
        return line
    }

    /// While the library opens (a long recovery of takes a killed recording left), asks systemd
    /// for 30 s more each 10 s once it has taken 5 s, so a start that is working is not killed by
    /// `TimeoutStartSec`; a start that hangs elsewhere still times out. Cancel it when done.
    static func extendingStart(_ notifier: ServiceNotifier) -> Task<Void, Never>? {
        guard notifier.isActive else { return nil }
        return Task.detached {
            try? await Task.sleep(for: .seconds(5))
            while !Task.isCancelled {
                notifier.extendTimeout(seconds: 30)
                try? await Task.sleep(for: .seconds(10))
            }
        }
    }
}
