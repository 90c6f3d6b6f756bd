import Foundation
import TapedeckAlerts
import TapedeckApp
import TapedeckAssembly
import TapedeckCore

/// Turns what a recording run does into alerts (the config's `alerts:` rules): silence began and
/// was resolved, the device lost and back, overruns, no frames for a while, the disk low, a take
/// cut short. Looks at the recorder four times a second on the main actor; the alert center
/// writes and sends off it.
@MainActor
final class RecordAlerts {
    let center: AlertCenter
    let recorder: TakeRecorder
    let machine: String
    /// Where the takes go, for the disk's free space, and what the run keeps free.
    let folder: String
    let warnFreeMinutes: Double
    private var task: Task<Void, Never>?
    private var seenAlarms = 0
    private var silence: AlertEvent?
    private var deviceLost: AlertEvent?
    private var stalled: AlertEvent?
    private var diskLow: AlertEvent?
    private var overrunsSaid = 0
    private var lastFrames: Int64 = -1
    private var framesSince = ContinuousClock.now
    private var diskCheckedAt: ContinuousClock.Instant?

    /// Seconds without a frame before `not-recording` is raised.
    static let stallSeconds = 10.0

    init(center: AlertCenter, recorder: TakeRecorder, machine: String, folder: String, warnFreeMinutes: Double) {
        self.center = center
        self.recorder = recorder
        self.machine = machine
        self.folder = folder
        self.warnFreeMinutes = warnFreeMinutes
    }

    /// Starts the alerts of `studio`'s config for `recorder`; `nil` when there are none.
    static func start(_ studio: Studio, recorder: TakeRecorder, folder: String) -> RecordAlerts? {
        guard let center = studio.makeAlertCenter(environment: ProcessInfo.processInfo.environment) else { return nil }
        center.start()
        let watch = RecordAlerts(center: center, recorder: recorder, machine: studio.machineName, folder: folder,
                                 warnFreeMinutes: recorder.settings.warnFreeMinutes)
        watch.task = Task { @MainActor [weak watch] in
            while !Task.isCancelled, let watch {
                try? await Task.sleep(for: .milliseconds(250))
                watch.look()
            }
        }
        return watch
    }

    /// Runs `body` (the recording), raises what its end calls for, and sends what waits (for up
    /// to 10 s) before returning its result or error.
    static func around<T>(_ alerts: RecordAlerts?, _ body: @MainActor () async throws -> T) async throws -> T {
        guard let alerts else { return try await body() }
        do {
            let result = try await body()
            await alerts.end(report: result as? RecordingReport, error: nil)
            return result
        } catch {
            await alerts.end(report: nil, error: error)
            throw error
        }
    }

    private func event(_ kind: AlertKind, _ phase: AlertEvent.Phase, _ title: String, _ message: String, frame: Int64? = nil) -> AlertEvent {
        var event = AlertEvent(kind: kind, phase: phase, machine: machine, title: title, message: message)
        if let take = recorder.target?.take, !(recorder.target?.waiting ?? false) {
            event.take = take
            event.session = take.split(separator: "/").first.map(String.init)
        }
        event.frame = frame ?? recorder.frames
        event.sampleRate = recorder.format?.sampleRate
        return event
    }

    /// The resolved half of `began`, at `frame` (where it ended; else the run's frame now).
    private func resolve(_ began: AlertEvent, _ title: String, _ message: String, lasted: Double, frame: Int64? = nil) {
        var event = event(began.kind, .resolved, title, message, frame: frame)
        event.durationSeconds = lasted
        event.resolves = began.id
        event.take = began.take ?? event.take
        event.session = began.session ?? event.session
        center.raise(event)
    }

    private func look() {
        recorder.refreshProgress()
        guard recorder.phase == .recording, let format = recorder.format else { return }
        let rate = Double(format.sampleRate)
        lookAtSilence(rate: rate)
        lookAtDevice()
        if recorder.overrunCount > overrunsSaid {
            let new = recorder.overrunCount - overrunsSaid
            overrunsSaid = recorder.overrunCount
            center.raise(event(.overruns, .once, "Overruns", "Capture lost audio \(new == 1 ? "once" : "\(new) times") (\(recorder.overrunCount) overruns in the run so far; each gap is filled with silence and counted in the take). The machine may be too busy, or the buffer too small: see capture.buffer-seconds."))
        }
        lookAtFrames()
        lookAtDisk(format)
    }

    private func lookAtSilence(rate: Double) {
        if recorder.silenceAlarms > seenAlarms, let last = recorder.lastSilence {
            seenAlarms = recorder.silenceAlarms
            let began = last.date.addingTimeInterval(-Double(last.frames) / rate)
            let e = event(.silence, .began, "Silence began",
                          "The input has been silent since \(Self.clock(began)), \(Self.duration(Double(last.offset) / rate)) into the run\(recorder.target.flatMap(\.take).map { " (\($0))" } ?? ""). Check the microphone, its cable and the source.",
                          frame: last.offset)
            silence = e
            center.raise(e)
        }
        if let began = silence, !recorder.silenceOngoing {
            silence = nil
            let lasted = Double(recorder.lastSilence?.frames ?? 0) / rate
            resolve(began, "Silence resolved", "Sound is back after \(Self.duration(lasted)) of silence.", lasted: lasted,
                    frame: recorder.lastSilence.map { $0.offset + $0.frames })
        }
    }

    private func lookAtDevice() {
        if deviceLost == nil, let lost = recorder.deviceLostAt {
            let e = event(.deviceLost, .began, "Device lost",
                          "The capture device \(recorder.deviceName.map { "\($0) " } ?? "")went away at \(Self.clock(lost)); the takes before are kept, and the run tries it again every second.")
            deviceLost = e
            center.raise(e)
        } else if let began = deviceLost, recorder.deviceLostAt == nil {
            deviceLost = nil
            let lasted = Date().timeIntervalSince(began.time)
            resolve(began, "Device back", "The capture device is back after \(Self.duration(lasted)); recording goes on in a new take.", lasted: lasted)
        }
    }

    private func lookAtFrames() {
        let now = ContinuousClock.now
        // Waiting for its device, a trigger or sound, a run has no frames to give; that is said elsewhere.
        if recorder.frames != lastFrames || recorder.deviceLostAt != nil {
            lastFrames = recorder.frames
            framesSince = now
            if let began = stalled {
                stalled = nil
                let lasted = Date().timeIntervalSince(began.time) + Self.stallSeconds
                resolve(began, "Recording again", "Frames flow again after \(Self.duration(lasted)) without any.", lasted: lasted)
            }
        } else if stalled == nil, now - framesSince >= .seconds(Self.stallSeconds) {
            let e = event(.notRecording, .began, "Not recording",
                          "No audio has arrived for \(Int(Self.stallSeconds)) s although the run records: the device or the writer hangs. A service with WatchdogSec= is restarted by systemd.")
            stalled = e
            center.raise(e)
        }
    }

    private func lookAtDisk(_ format: AudioFormat) {
        let now = ContinuousClock.now
        guard warnFreeMinutes > 0, diskCheckedAt.map({ now - $0 >= .seconds(10) }) ?? true else { return }
        diskCheckedAt = now
        guard let free = FreeSpace.available(at: folder) else { return }
        let floor = Int64(warnFreeMinutes * 60 * Double(format.bytesPerSecond))
        if diskLow == nil, free < floor {
            let e = event(.diskLow, .began, "Disk low", FreeSpace.lowSpaceMessage(free: free, format: format, path: folder))
            diskLow = e
            center.raise(e)
        } else if let began = diskLow, Double(free) >= Double(floor) * 1.2 {
            diskLow = nil
            resolve(began, "Disk has room", "The disk of \(folder) has room again: \(free / 1_048_576) MiB free.", lasted: Date().timeIntervalSince(began.time))
        }
    }

    /// The run ended: a take cut short is said, an open silence resolved, and what waits sent.
    private func end(report: RecordingReport?, error: (any Error)?) async {
        task?.cancel()
        if let began = silence, let rate = recorder.format?.sampleRate {
            silence = nil
            let lasted = Double(recorder.lastSilence?.frames ?? 0) / Double(rate)
            resolve(began, "Silence resolved", "The run ended while the input was still silent, after \(Self.duration(lasted)) of silence.", lasted: lasted,
                    frame: recorder.lastSilence.map { $0.offset + $0.frames })
        }
        let cut: String? = switch report?.end {
        case .deviceLost(let e)?: "The take \(report?.take.name ?? "") was cut short: \(e.message) Everything captured before was kept."
        case .writeFailed(let e)?: "The take \(report?.take.name ?? "") was cut short: \(e.message) Everything written before was kept."
        default: (error as? UnfinishedRecording).map { "The take could not be finished: \($0.error.message)" }
        }
        if let cut {
            var e = event(.takeInterrupted, .once, "Take interrupted", cut)
            if let report {
                e.session = report.session.name
                e.take = "\(report.session.name)/\(report.take.name)"
            }
            center.raise(e)
        }
        let waiting = center.outbox.entries().count
        if waiting > 0 && !Terminal.quiet.load(ordering: .relaxed) {
            Terminal.printError("Sending \(Terminal.counted(waiting, "alert")) (up to \(Int(Self.flushSeconds)) s; Ctrl-C leaves \(waiting == 1 ? "it" : "them") in the outbox)…")
        }
        SignalTrap.secondStopNote.withLock {
            $0 = "The takes are finished; alerts not yet sent wait in the outbox (`tapedeck alerts send`)."
        }
        let outcome = await center.finish(within: .seconds(Self.flushSeconds))
        for line in outcome.waiting {
            Terminal.printError("\(line). They wait in the outbox: the next run sends them, or `tapedeck alerts send`.")
        }
    }

    /// How long the end of a run tries to send what waits.
    static let flushSeconds = 10.0

    static func clock(_ date: Date) -> String {
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.dateFormat = "HH:mm:ss"
        return f.string(from: date)
    }

    static func duration(_ seconds: Double) -> String {
        let s = Int(seconds.rounded())
        if s < 60 { return String(format: "%.1f s", seconds) }
        if s < 3600 { return "\(s / 60) min \(s % 60) s" }
        return "\(s / 3600) h \(s % 3600 / 60) min"
    }
}
