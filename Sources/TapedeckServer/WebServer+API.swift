import Hummingbird
import TapedeckApp
import TapedeckCore
import TapedeckAlerts
import Foundation

/// The JSON API (docs/openapi.yaml). Every route names takes and sessions by their full id.
///
/// Its bodies: plain values (any thread), written by ``APIResponseEncoder`` and read by
/// ``APIRequestDecoder`` through the request context.
extension WebServer {
    struct SessionSummary: ResponseEncodable, Sendable {
        var kind = "session"
        var schema = JSONSchema.version
        var id: String
        var shortID: String
        var name: String
        var createdAt: Date
        var takeCount: Int
        var seconds: Double

        init(_ s: Session) {
            (id, shortID, name, createdAt) = (s.id, s.shortID, s.name, s.createdAt)
            takeCount = s.takes.count
            seconds = s.takes.reduce(0) { $0 + $1.seconds }
        }
    }
    struct SessionPage: ResponseEncodable, Sendable {
        var kind = "sessions"
        var total: Int
        var offset: Int
        var sessions: [SessionSummary]
    }
    struct SessionTakes: ResponseEncodable, Sendable {
        var kind = "session"
        var schema = JSONSchema.version
        var id: String
        var shortID: String
        var name: String
        var createdAt: Date
        var total: Int
        var offset: Int
        var takes: [TakeBody]
    }
    /// A take as `tapedeck show --json` prints it (``TakeJSON``), made as it is written: the
    /// take, its session and its file are sendable values, the JSON shape is not.
    struct TakeBody: ResponseEncodable, Sendable {
        enum File: Sendable {
            /// The file's place, looked up (its size is read as the body is written).
            case at(URL?)
            /// Its place and size, already known (``TakeStorage/audioFiles(of:)``).
            case known(AudioFileInfo?)
        }
        var take: Take
        var session: Session
        var file: File

        func encode(to encoder: any Encoder) throws {
            let json = switch file {
            case .at(let url): TakeJSON(take, session: session, url: url)
            case .known(let info): TakeJSON(take, session: session, file: info)
            }
            try json.encode(to: encoder)
        }
    }
    struct RecordRequest: APIRequestBody {
        var session: String?
        var take: String?
        static let keys: Set<String> = ["session", "take"]
        static let example = #"{"session": "Rehearsal", "take": "Verse"}"#
    }
    struct MarkRequest: APIRequestBody {
        var label: String?
        static let keys: Set<String> = ["label"]
        static let example = #"{"label": "chorus"}"#
    }
    struct TakeChange: APIRequestBody {
        var name: String?
        var notes: String?
        static let keys: Set<String> = ["name", "notes"]
        static let example = #"{"name": "Verse 2", "notes": "keeper"}"#
    }
    struct SessionChange: APIRequestBody {
        var name: String
        static let keys: Set<String> = ["name"]
        static let example = #"{"name": "New name"}"#
    }
    struct ExportRequest: APIRequestBody {
        var format: String?
        static let keys: Set<String> = ["format"]
        static let example = #"{"format": "…"}"#
    }
    struct ClipRequest: APIRequestBody {
        var from: String
        var to: String
        var format: String?
        var gaps: String?
        static let keys: Set<String> = ["from", "to", "format", "gaps"]
        static let example = #"{"from": "2026-12-01T14:05:00Z", "to": "2026-12-01T14:20:00Z", "format": "flac", "gaps": "refuse"}"#
    }
    /// A session's timeline (``TimelineJSON``), with the day shown and the days with audio.
    struct TimelineBody: ResponseEncodable, Sendable {
        var json: TimelineJSON
        func encode(to encoder: any Encoder) throws { try json.encode(to: encoder) }
    }
    struct ExportStatus: ResponseEncodable, Sendable {
        var kind = "export"
        var id: String
        /// The take exported; absent for a stretch of time, which has ``sessionID``, ``from`` and ``to``.
        var takeID: String?
        var sessionID: String?
        /// The stretch's bounds, to the microsecond (`2026-12-01T14:05:00.000000Z`).
        var from: String?
        var to: String?
        var format: String
        var state: ExportJobs.State
        var progress: Double
        var error: String?
        var file: String?
        var report: ExportReport?
    }
    struct WaveformJSON: ResponseEncodable, Sendable {
        var kind = "waveform"
        var takeID: String
        var sampleRate: Int
        var framesPerPoint: Int
        var min: [Int16]
        var max: [Int16]
    }
    struct Health: ResponseEncodable, Sendable {
        var kind = "health"
        var ok = true
        var version: String
        var tokenRequired: Bool
        /// Why it is not healthy (empty when it is).
        var problems: [String] = []
    }

    /// An alert that has waited this long in the outbox makes the server unhealthy.
    nonisolated static let staleAlertSeconds = 600.0
    /// A recorder that delivered no frames for this long makes the server unhealthy.
    nonisolated static let framesStaleSeconds = 10.0

    /// What retention has deleted from this library, as its state file counts it.
    func retentionDeleted() -> (takes: Int, bytes: Int64) {
        guard let file = parts.retentionState, let data = FileManager.default.contents(atPath: file.path) else { return (0, 0) }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        guard let state = try? decoder.decode(RetentionRunner.State.self, from: data) else { return (0, 0) }
        return (state.deletedTakes, state.deletedBytes)
    }

    /// The takes still to be uploaded (`nil` without a remote): measured again only when the
    /// library was indexed again or the ledger changed, so a scrape at 100 000 takes stays quick.
    func uploadBacklog() -> UploadBacklog? {
        guard let ledger = parts.uploadLedger else { return nil }
        let file = ledger.libraryURL.appendingPathComponent(UploadLedger.fileName)
        var st = stat()
        let changed = stat(file.path, &st) == 0 ? "\(st.st_mtim.tv_sec).\(st.st_mtim.tv_nsec)/\(st.st_size)" : "none"
        // The ages move on with the clock: a minute's staleness is close enough.
        let key = "\(library.revision)|\(changed)|\(Int(Date().timeIntervalSince1970 / 60))"
        if let cached = backlogCache, cached.key == key { return cached.backlog }
        guard let backlog = UploadBacklog.measure(parts.store, ledger: ledger) else { return nil }
        backlogCache = (key, backlog)
        return backlog
    }

    /// The alerts waiting in the outbox, and how long the oldest has waited.
    func alertsWaiting() -> (count: Int, oldestSeconds: Double?) {
        guard let folder = parts.alertsFolder else { return (0, nil) }
        let entries = AlertOutbox(folder: folder).entries()
        return (entries.count, entries.first.map { max(0, Date().timeIntervalSince($0.event.time)) })
    }

    /// What is wrong now: the library cannot be read, a recorder delivers no frames, the disk is
    /// low, alerts wait too long. Empty when all is well.
    func healthProblems(_ state: LiveSnapshot, libraryError: (any Error)?) -> [String] {
        var problems: [String] = []
        if let libraryError {
            problems.append("The library cannot be read: \((libraryError as? TapedeckError)?.message ?? "\(libraryError)")")
        }
        if state.recording, let quiet = live.secondsSinceFrames(), quiet >= Self.framesStaleSeconds {
            problems.append(String(format: "The recorder has delivered no audio for %.0f s (a device lost or hanging).", quiet))
        }
        if parts.warnFreeMinutes > 0, let left = state.secondsLeft, left < parts.warnFreeMinutes * 60 {
            problems.append(String(format: "The library's disk holds %.0f min of audio, less than storage.warn-free-minutes (%.0f).", left / 60, parts.warnFreeMinutes))
        }
        let alerts = alertsWaiting()
        if let oldest = alerts.oldestSeconds, oldest >= Self.staleAlertSeconds {
            problems.append(String(format: "%d alert%@ wait%@ in the outbox, the oldest for %.0f min: a route does not take them (`tapedeck alerts`).",
                                   alerts.count, alerts.count == 1 ? "" : "s", alerts.count == 1 ? "s" : "", oldest / 60))
        }
        if let backlog = uploadBacklog(), backlog.isStale {
            problems.append(String(format: "%d take%@ wait%@ for upload, the oldest (%@) for %.0f min: is `tapedeck push --watch` running, and the remote reachable?",
                                   backlog.takes, backlog.takes == 1 ? "" : "s", backlog.takes == 1 ? "s" : "", backlog.oldest ?? "", (backlog.oldestSeconds ?? 0) / 60))
        }
        return problems
    }
    struct Findings: ResponseEncodable, Sendable {
        var kind = "doctor"
        var findings: [DoctorFinding]
    }

    /// A whole-number query parameter in `range`, `fallback` when absent; anything else is refused.
    nonisolated static func number(_ request: Request, _ name: String, in range: ClosedRange<Int>, fallback: Int) throws -> Int {
        guard let text = request.uri.queryParameters.get(name) else { return fallback }
        guard let value = Int(text), range.contains(value) else {
            throw APIError(.badRequest, "invalid-argument", "\(name)=\(text.prefix(32)): give a whole number from \(range.lowerBound) to \(range.upperBound).")
        }
        return value
    }

    nonisolated static func paging(_ request: Request) throws -> (offset: Int, limit: Int) {
        (try number(request, "offset", in: 0...Int(Int32.max), fallback: 0), try number(request, "limit", in: 1...500, fallback: 50))
    }

    /// Adds the JSON API under `/api`: one controller per concern (APIControllers.swift).
    /// - Thread: main actor. Never blocks.
    func addAPI(to router: RecordedRoutes) {
        let api = router.group("api")
        api.addRoutes(SystemController(server: self).endpoints)
        api.addRoutes(RecordingController(server: self).endpoints)
        api.addRoutes(SessionsController(server: self).endpoints)
        api.addRoutes(TakesController(server: self).endpoints)
        api.addRoutes(ExportsController(server: self).endpoints)
        api.addRoutes(TimelineController(server: self).endpoints)
    }

    /// The picture sizes the server draws (smaller than `tapedeck waveform`'s: a page never needs
    /// more, and a request must stay cheap).
    nonisolated static let pictureWidths = 16...4096
    nonisolated static let pictureHeights = 16...1024

    /// What doctor finds, examined at most once at a time and kept for ``doctorKeepSeconds``:
    /// examining reads every take's header, which requests must not repeat at will.
    func doctorFindings() async throws -> [DoctorFinding] {
        let doctor = try parts.makeDoctor()
        if let (at, findings) = doctorCache, Date().timeIntervalSince(at) < Self.doctorKeepSeconds { return findings }
        if let running = doctorScan { return try await running.value }
        let scan = Task { try await OffMain.run(on: OffMain.decoding) { try doctor.examine(repair: false) } }
        doctorScan = scan
        defer { doctorScan = nil }
        let findings = try await scan.value
        doctorCache = (Date(), findings)
        return findings
    }

    /// The media type of an encoding's files.
    func mediaType(_ encoding: String) -> String {
        parts.mediaTypes[encoding] ?? "application/octet-stream"
    }

    func status(_ job: ExportJobs.Job) -> ExportStatus {
        ExportStatus(id: job.id, takeID: job.takeID, sessionID: job.clip?.sessionID, from: job.clip.map { UTCTimestamp.format($0.from) }, to: job.clip.map { UTCTimestamp.format($0.to) }, format: job.format, state: job.state, progress: job.progress, error: job.error,
                     file: job.file.map { _ in "/api/exports/\(job.id)/file" }, report: job.report)
    }

    /// The audio file of a finished take (never one being recorded: its file is still growing).
    func audioURL(_ take: Take) throws -> URL {
        guard take.state != .recording else {
            throw APIError(.conflict, "busy", "Take \"\(take.name)\" is being recorded; it can be played when the recording has stopped.")
        }
        return try parts.store.storage.audioURL(for: take)
    }

    /// The take's waveform overview, from its peaks file or decoded now (off the main actor).
    func peaks(of take: Take) async throws -> WaveformPeaks {
        let url = try audioURL(take)
        let waveforms = parts.waveforms
        return try await OffMain.run(on: OffMain.decoding) { try waveforms.peaks(for: take, at: url) }
    }
}
