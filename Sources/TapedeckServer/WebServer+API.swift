import Hummingbird
import HTTPTypes
import NIOCore
import TapedeckApp
import TapedeckCore
import Foundation

/// The JSON API (docs/openapi.yaml). Every route names takes and sessions by their full id.
extension WebServer {
    struct SessionSummary: Encodable {
        var kind = "session"
        var schema = JSONSchema.version
        var id: String
        var shortID: String
        var name: String
        var createdAt: Date
        var takeCount: Int
        var seconds: Double
    }
    struct SessionPage: Encodable {
        var kind = "sessions"
        var total: Int
        var offset: Int
        var sessions: [SessionSummary]
    }
    struct SessionTakes: Encodable {
        var kind = "session"
        var schema = JSONSchema.version
        var id: String
        var shortID: String
        var name: String
        var createdAt: Date
        var total: Int
        var offset: Int
        var takes: [TakeJSON]
    }
    struct RecordRequest: Decodable { var session: String?; var take: String? }
    struct MarkRequest: Decodable { var label: String? }
    struct TakeChange: Decodable { var name: String?; var notes: String? }
    struct SessionChange: Decodable { var name: String }
    struct ExportRequest: Decodable { var format: String? }
    struct ExportStatus: Encodable {
        var kind = "export"
        var id: String
        var takeID: String
        var format: String
        var state: String
        var progress: Double
        var error: String?
        var file: String?
        var report: ExportReport?
    }
    struct WaveformJSON: Encodable {
        var kind = "waveform"
        var takeID: String
        var sampleRate: Int
        var framesPerPoint: Int
        var min: [Int16]
        var max: [Int16]
    }
    struct Health: Encodable {
        var kind = "health"
        var ok = true
        var version: String
        var tokenRequired: Bool
    }
    struct Findings: Encodable {
        var kind = "doctor"
        var findings: [DoctorFinding]
    }

    nonisolated static func json<T: Encodable>(_ value: T, status: HTTPResponse.Status = .ok) throws -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(date.iso8601UTC)
        }
        return Response(status: status, headers: [.contentType: "application/json; charset=utf-8", .cacheControl: "no-store"],
                        body: ResponseBody(byteBuffer: ByteBuffer(bytes: try encoder.encode(value))))
    }

    /// A JSON body of type `T` with only the keys `keys`; a body that is not one (or names a key
    /// the route does not know: a typo must not quietly do something else) is refused with what
    /// was expected.
    nonisolated static func decode<T: Decodable>(_ type: T.Type, _ request: Request, context: ServerContext, keys: Set<String>,
                                                 example: String) async throws -> T {
        let buffer: ByteBuffer
        do { buffer = try await request.body.collect(upTo: context.maxUploadSize) } catch {
            throw APIError(.contentTooLarge, "too-large", "The request body is larger than \(context.maxUploadSize) bytes.")
        }
        let data = buffer.readableBytes == 0 ? Data("{}".utf8) : Data(buffer.readableBytesView)
        guard let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else {
            throw APIError(.badRequest, "invalid-argument", "The body must be a JSON object like \(example).")
        }
        if let unknown = object.keys.sorted().first(where: { !keys.contains($0) }) {
            throw APIError(.badRequest, "invalid-argument", "Unknown key \"\(unknown.prefix(64))\": this request takes \(keys.sorted().map { "\"\($0)\"" }.joined(separator: ", ")), as in \(example).")
        }
        do {
            return try JSONDecoder().decode(T.self, from: data)
        } catch {
            throw APIError(.badRequest, "invalid-argument", "The body must be a JSON object like \(example).")
        }
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
    func addAPI(to router: Router<ServerContext>) {
        let api = router.group("api")
        api.addRoutes(SystemController(server: self).endpoints)
        api.addRoutes(RecordingController(server: self).endpoints)
        api.addRoutes(SessionsController(server: self).endpoints)
        api.addRoutes(TakesController(server: self).endpoints)
        api.addRoutes(ExportsController(server: self).endpoints)
    }

    /// The picture sizes the server draws (smaller than `tapedeck waveform`'s: a page never needs
    /// more, and a request must stay cheap).
    nonisolated static let pictureWidths = 16...4096
    nonisolated static let pictureHeights = 16...1024

    /// What doctor finds, examined at most once at a time and kept for ``doctorKeepSeconds``:
    /// examining reads every take's header, which requests must not repeat at will.
    func doctorFindings() async throws -> [DoctorFinding] {
        let doctor: LibraryDoctor
        do { doctor = try parts.makeDoctor() } catch let e as TapedeckError { throw APIError(e) }
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
        ExportStatus(id: job.id, takeID: job.takeID, format: job.format, state: job.state, progress: job.progress, error: job.error,
                     file: job.file.map { _ in "/api/exports/\(job.id)/file" }, report: job.report)
    }

    /// The audio file of a finished take (never one being recorded: its file is still growing).
    func audioURL(_ take: Take) throws -> URL {
        guard take.state != .recording else {
            throw APIError(.conflict, "busy", "Take \"\(take.name)\" is being recorded; it can be played when the recording has stopped.")
        }
        do { return try parts.store.storage.audioURL(for: take) } catch let e as TapedeckError { throw APIError(e) }
    }

    /// The take's waveform overview, from its peaks file or decoded now (off the main actor).
    func peaks(of take: Take) async throws -> WaveformPeaks {
        let url = try audioURL(take)
        let waveforms = parts.waveforms
        do {
            return try await OffMain.run(on: OffMain.decoding) { try waveforms.peaks(for: take, at: url) }
        } catch let e as TapedeckError { throw APIError(e) }
    }
}
