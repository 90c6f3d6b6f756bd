import Foundation
import TapedeckApp
import TapedeckAssembly
import TapedeckServer
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

extension RecordCommand.Control {
    /// The status a `--metrics` scrape shows: `nil` while nothing records (a schedule's wait).
    func statusWhileRecording() -> RecorderStatus? {
        switch recorder.phase {
        case .opening, .recording, .finishing: answer(RecorderControl.Request(op: "status")).status
        case .idle, .finished: nil
        }
    }
}

/// What watches a recording into the library from outside while it runs: its registration
/// (`tapedeck mark`), its control socket (`tapedeck status`, the page of a `serve` on the same
/// library), `--metrics` and the config's retention. Main actor only.
@MainActor
final class RecordCompanions {
    private var registration: URL?
    private var control: RecorderControl?
    private var metrics: MetricsListener?
    private var retention: Task<Void, Never>?
    private var fields: Task<Void, Never>?
    private var heartbeat: CatalogHeartbeat?

    /// Starts them for `recorder`; returns once `--metrics` listens.
    /// - Throws: when `--metrics` cannot listen (the address in use, not this machine's).
    static func start(_ command: RecordCommand, recorder: TakeRecorder, stops: StopRelay, studio: Studio, seconds: Double?,
                      plan: RunPlan) async throws -> RecordCompanions {
        let companions = RecordCompanions()
        let storage = studio.store.storage
        stops.registration = RecorderRegistry.register(session: command.session ?? "the most recent session", library: storage.rootURL.path,
                                                       startedBy: "record", paths: UserPaths(environment: ProcessInfo.processInfo.environment))
        companions.registration = stops.registration
        let startedAt = Date()
        let control = RecordCommand.Control(recorder: recorder, stops: stops, library: storage.rootURL.path, session: command.session,
                                            startedAt: startedAt, stopsAt: seconds.map { startedAt.addingTimeInterval($0) }, splits: plan.makesRun)
        companions.control = control.listen(beside: stops.registration)
        do {
            if let address = command.metrics {
                companions.metrics = try await Self.listen(address, control: control, studio: studio)
            }
        } catch {
            companions.close()
            throw error
        }
        companions.retention = await RecordRetention.start(studio)
        if Terminal.journal.isActive { companions.fields = Self.journalFields(recorder) }
        companions.heartbeat = CatalogHeartbeat.start(studio, role: "record", state: CatalogHeartbeat.recording(recorder, folder: storage.rootURL.path))
        return companions
    }

    /// `--metrics ADDRESS`: listening, said on stderr (unless --quiet) with its address.
    private static func listen(_ address: String, control: RecordCommand.Control, studio: Studio) async throws -> MetricsListener {
        let environment = ProcessInfo.processInfo.environment
        let listener = try MetricsListener(address: address, status: { control.statusWhileRecording() },
                                           libraryPath: studio.store.storage.rootURL.path, configuredFormat: studio.configuration.recording.format,
                                           alertsFolder: studio.configuration.alerts.isEmpty ? nil : UserPaths(environment: environment).alertsFolder,
                                           version: TapedeckVersion.string, logger: studio.logger)
        let (ready, said) = AsyncStream<String>.makeStream()
        let failure = FailureBox()
        Task { @MainActor in
            do { try await listener.run { said.yield($0) } } catch { failure.error = error }
            said.finish()
        }
        for await url in ready {
            if !Terminal.quiet.load(ordering: .relaxed) { Terminal.printError("Metrics for Prometheus at \(url)", event: "metrics-listening") }
            return listener
        }
        throw failure.error ?? TapedeckError(.io, "--metrics \(address): the listener stopped before it listened.")
    }

    /// Keeps the journal's fields (``Terminal/journalFields``) those of the take being recorded.
    private static func journalFields(_ recorder: TakeRecorder) -> Task<Void, Never> {
        Task { @MainActor in
            while !Task.isCancelled {
                // Off a terminal nothing else refreshes the recorder's progress (a split's new take).
                recorder.refreshProgress()
                let target = recorder.target
                let now = ["TAKE_ID": target?.takeID, "SESSION_ID": target?.sessionID, "RUN_ID": target?.runID].compactMapValues { $0 }
                Terminal.journalFields.withLock { if !now.isEmpty { $0 = now } }
                try? await Task.sleep(for: .milliseconds(100))
            }
        }
    }

    @MainActor
    private final class FailureBox {
        var error: (any Error)?
    }

    /// Ends them all: unregistered, the socket closed, `--metrics` no longer listening.
    func close() {
        heartbeat?.stop()
        fields?.cancel()
        retention?.cancel()
        metrics?.shutdown()
        control?.close()
        RecorderRegistry.unregister(registration)
        (retention, metrics, control, registration) = (nil, nil, nil, nil)
    }
}
