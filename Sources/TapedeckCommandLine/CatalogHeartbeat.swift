import Foundation
import TapedeckApp
import TapedeckAssembly
import TapedeckCore

/// A running command's heartbeat to the fleet catalog (`sync.catalog`): every
/// `sync.catalog.heartbeat-seconds`, one upsert of this machine's row for its role, with what
/// `state()` says now; `fleet status` reads them. A catalog that does not answer is tried again
/// at the next beat, said once; it never holds up the command. Main actor only.
@MainActor
final class CatalogHeartbeat {
    private var task: Task<Void, Never>?

    /// Starts beating for `role` when the config has a catalog; `nil` otherwise (or when it
    /// cannot be made: said on stderr, the command goes on).
    static func start(_ studio: Studio, role: String, state: @escaping @MainActor (inout RecorderHeartbeat) -> Void) -> CatalogHeartbeat? {
        let catalog: (any FleetIndex)?
        do { catalog = try studio.makeFleetIndex(environment: ProcessInfo.processInfo.environment) } catch {
            Terminal.printError("warning: no heartbeats to the fleet catalog: \((error as? TapedeckError)?.message ?? "\(error)")")
            return nil
        }
        guard let catalog else { return nil }
        let interval = SyncSettings(studio.configuration.syncSettings).catalogHeartbeat
        let (machine, beat) = (studio.machineName, CatalogHeartbeat())
        beat.task = Task { @MainActor in
            var (failing, prepared) = (false, false)
            while !Task.isCancelled {
                var heartbeat = RecorderHeartbeat(machine: machine, role: role, version: TapedeckVersion.string, state: .idle,
                                                  sentAt: Date(), intervalSeconds: interval)
                heartbeat.clockErrorSeconds = SystemClock.estimatedError()
                state(&heartbeat)
                do {
                    if !prepared { try await catalog.prepare() }
                    prepared = true
                    try await catalog.beat(heartbeat)
                    failing = false
                } catch {
                    if !failing {
                        Terminal.printError("warning: heartbeat to the fleet catalog: \((error as? TapedeckError)?.message ?? "\(error)") Trying again every \(Int(interval)) s.",
                                            event: "catalog-unreachable")
                    }
                    failing = true
                }
                try? await Task.sleep(for: .seconds(interval))
            }
            await catalog.shutdown()
        }
        return beat
    }

    func stop() {
        task?.cancel()
        task = nil
    }

    /// The heartbeat of `push --watch`: uploading while takes wait, with how many and how long
    /// the first has waited.
    static func pushing(_ pusher: TakePusher) -> @MainActor (inout RecorderHeartbeat) -> Void {
        { beat in
            guard let backlog = UploadBacklog.measure(pusher.store, ledger: pusher.ledger) else { return }
            beat.state = backlog.takes > 0 ? .uploading : .idle
            beat.backlogTakes = backlog.takes
            beat.backlogOldestSeconds = backlog.oldestSeconds
        }
    }

    /// The heartbeat of `serve`: its own recorder's while it records, else idle with the disk's
    /// time left at the configured `format`.
    static func serving(_ desk: RecordingDesk, folder: String, format: AudioFormat) -> @MainActor (inout RecorderHeartbeat) -> Void {
        { beat in
            if let recorder = desk.recorder {
                recording(recorder, folder: folder)(&beat)
            } else if let free = FreeSpace.available(at: folder) {
                beat.diskSecondsLeft = Double(free) / Double(max(1, format.bytesPerSecond))
            }
        }
    }

    /// The heartbeat of a `record` run: its phase, take, loudest channel and the disk.
    static func recording(_ recorder: TakeRecorder, folder: String) -> @MainActor (inout RecorderHeartbeat) -> Void {
        { beat in
            recorder.refreshProgress()
            switch recorder.phase {
            case .opening:
                beat.state = .waiting
            case .recording, .finishing:
                let waiting = recorder.target?.waiting ?? false
                beat.state = waiting || recorder.waiting != nil ? .waiting : .recording
                beat.session = recorder.target?.take?.split(separator: "/").first.map(String.init)
                beat.take = waiting ? nil : recorder.target?.take
                if let loudest = recorder.peaks.max() { beat.levelDBFS = PeakMeter.decibels(loudest) }
            case .idle, .finished:
                beat.state = .idle
            }
            if recorder.deviceLostAt != nil {
                beat.state = .error
                beat.lastError = "The capture device is gone; the run waits for it."
            }
            if let free = FreeSpace.available(at: folder) {
                let format = recorder.format ?? recorder.settings.format
                beat.diskSecondsLeft = Double(free) / Double(max(1, format.bytesPerSecond))
            }
        }
    }
}
