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

    func addAPI(to router: Router<ServerContext>) {
        let api = router.group("api")
        api.get("health") { @MainActor _, _ in try Self.json(Health(version: self.parts.version, tokenRequired: self.token != nil)) }
        api.get("openapi.yaml") { _, _ in
            Response(status: .ok, headers: [.contentType: "application/yaml; charset=utf-8", .cacheControl: "public, max-age=300"],
                     body: ResponseBody(byteBuffer: ByteBuffer(bytes: PackageResources.openapi_yaml)))
        }
        api.get("state") { @MainActor _, _ in try Self.json(self.live.snapshot()) }

        api.post("record") { @MainActor request, context in
            let body = try await Self.decode(RecordRequest.self, request, context: context, keys: ["session", "take"],
                                             example: #"{"session": "Rehearsal", "take": "Verse"}"#)
            func blankIsNil(_ s: String?) -> String? {
                let t = s?.trimmingCharacters(in: .whitespaces)
                return t?.isEmpty == false ? t : nil
            }
            // A run that the page's Split can cut into takes whose frames, together, are what the
            // device delivered (as `record --split` makes them).
            var plan = RunPlan()
            plan.splitOnRequest = true
            do {
                try self.parts.desk.start(session: blankIsNil(body.session), take: blankIsNil(body.take), plan: plan)
            } catch let e as TapedeckError { throw APIError(e) }
            return try Self.json(self.live.snapshot(), status: .accepted)
        }
        api.post("stop") { @MainActor _, _ in
            guard self.parts.desk.isRecording else {
                throw APIError(.conflict, "not-recording", "Nothing is recording, so there is nothing to stop.")
            }
            self.parts.desk.stop()
            return try Self.json(self.live.snapshot(), status: .accepted)
        }
        api.post("split") { @MainActor _, _ in
            do { try self.parts.desk.split() } catch let e as TapedeckError {
                throw APIError(.conflict, "not-recording", e.message)
            }
            return try Self.json(self.live.snapshot(), status: .accepted)
        }
        api.post("markers") { @MainActor request, context in
            let body = try await Self.decode(MarkRequest.self, request, context: context, keys: ["label"], example: #"{"label": "chorus"}"#)
            let label = body.label ?? ""
            guard label.utf8.count <= TakeMarker.maxLabelBytes, !label.contains("\n") else {
                throw APIError(.badRequest, "invalid-argument", "A marker's label is one line of at most \(TakeMarker.maxLabelBytes) bytes.")
            }
            do { try self.parts.desk.mark(label: label) } catch let e as TapedeckError {
                throw APIError(.conflict, "not-recording", e.message)
            }
            return try Self.json(self.live.snapshot(), status: .accepted)
        }

        api.get("sessions") { @MainActor request, _ in
            let (offset, limit) = try Self.paging(request)
            let all = try await self.library.sessions()
            let newest = all.reversed().dropFirst(offset).prefix(limit)
            return try Self.json(SessionPage(total: all.count, offset: offset, sessions: newest.map {
                SessionSummary(id: $0.id, shortID: $0.shortID, name: $0.name, createdAt: $0.createdAt, takeCount: $0.takes.count,
                               seconds: $0.takes.reduce(0) { $0 + $1.seconds })
            }))
        }
        api.get("sessions/:id") { @MainActor request, context in
            let s = try await self.library.session(context.parameters.require("id"))
            let (offset, limit) = try Self.paging(request)
            let storage = self.parts.store.storage
            let files = storage.audioFiles(of: s)
            return try Self.json(SessionTakes(id: s.id, shortID: s.shortID, name: s.name, createdAt: s.createdAt, total: s.takes.count,
                                              offset: offset, takes: s.takes.dropFirst(offset).prefix(limit).map {
                                                  TakeJSON($0, session: s, file: files[$0.id])
                                              }))
        }
        api.patch("sessions/:id") { @MainActor request, context in
            let s = try await self.library.session(context.parameters.require("id"))
            let body = try await Self.decode(SessionChange.self, request, context: context, keys: ["name"], example: #"{"name": "New name"}"#)
            try await self.library.change { try await self.parts.store.rename(.session(s), to: body.name) }
            let renamed = try await self.library.session(s.id)
            return try Self.json(SessionSummary(id: renamed.id, shortID: renamed.shortID, name: renamed.name, createdAt: renamed.createdAt,
                                                takeCount: renamed.takes.count, seconds: renamed.takes.reduce(0) { $0 + $1.seconds }))
        }
        api.delete("sessions/:id") { @MainActor _, context in
            let s = try await self.library.session(context.parameters.require("id"))
            if s.takes.contains(where: { $0.state == .recording }) {
                throw APIError(.conflict, "busy", "Session \"\(s.name)\" has a take being recorded. Stop the recording first.")
            }
            try await self.library.change { try await self.parts.store.delete(.session(s)) }
            for t in s.takes { self.parts.waveforms.forget(t.id) }
            return Response(status: .noContent)
        }

        api.get("takes/:id") { @MainActor _, context in
            let (t, s) = try await self.library.take(context.parameters.require("id"))
            return try Self.json(TakeJSON(t, session: s, url: try? self.parts.store.storage.audioURL(for: t)))
        }
        api.patch("takes/:id") { @MainActor request, context in
            var (t, s) = try await self.library.take(context.parameters.require("id"))
            let body = try await Self.decode(TakeChange.self, request, context: context, keys: ["name", "notes"],
                                             example: #"{"name": "Verse 2", "notes": "keeper"}"#)
            guard body.name != nil || body.notes != nil else {
                throw APIError(.badRequest, "invalid-argument", #"Say what to change: {"name": "…"} and/or {"notes": "…"}."#)
            }
            if let name = body.name, name != t.name {
                try await self.library.change { try await self.parts.store.rename(.take(t, in: s), to: name) }
                (t, s) = try await self.library.take(t.id)
            }
            if let notes = body.notes, notes != t.notes {
                var annotations = t.annotations
                annotations.notes = notes
                let current = t
                t = try await self.library.change { try await self.parts.store.annotate(current, annotations) }
            }
            return try Self.json(TakeJSON(t, session: s, url: try? self.parts.store.storage.audioURL(for: t)))
        }
        api.delete("takes/:id") { @MainActor _, context in
            let (t, s) = try await self.library.take(context.parameters.require("id"))
            guard t.state != .recording else {
                throw APIError(.conflict, "busy", "Take \"\(t.name)\" is being recorded. Stop the recording first.")
            }
            try await self.library.change { try await self.parts.store.delete(.take(t, in: s)) }
            self.parts.waveforms.forget(t.id)
            return Response(status: .noContent)
        }
        for method in [HTTPRequest.Method.get, .head] {
            api.on("takes/:id/audio", method: method) { @MainActor request, context in
                let (t, _) = try await self.library.take(context.parameters.require("id"))
                return try FileResponse.make(try self.audioURL(t), mediaType: self.mediaType(t.encoding), request: request, head: request.method == .head)
            }
            api.on("takes/:id/download", method: method) { @MainActor request, context in
                let (t, s) = try await self.library.take(context.parameters.require("id"))
                let url = try self.audioURL(t)
                let name = ExportItem(take: t, session: s).fileName(extension: url.pathExtension)
                return try FileResponse.make(url, mediaType: self.mediaType(t.encoding), request: request, download: name, head: request.method == .head)
            }
        }
        api.get("takes/:id/waveform") { @MainActor request, context in
            let (t, _) = try await self.library.take(context.parameters.require("id"))
            let format = request.uri.queryParameters.get("format") ?? "json"
            guard format == "json" || format == "dat" else {
                throw APIError(.badRequest, "invalid-argument", "format=\(format.prefix(32)): give json (the default) or dat (audiowaveform's binary peaks).")
            }
            let peaks = try await self.peaks(of: t)
            if format == "dat" {
                return Response(status: .ok, headers: [.contentType: "application/octet-stream", .cacheControl: "private, max-age=60"],
                                body: ResponseBody(byteBuffer: ByteBuffer(bytes: peaks.datFile)))
            }
            return try Self.json(WaveformJSON(takeID: t.id, sampleRate: peaks.sampleRate, framesPerPoint: peaks.framesPerPoint,
                                              min: peaks.minimums, max: peaks.maximums))
        }
        api.get("takes/:id/waveform.png") { @MainActor request, context in
            let (t, _) = try await self.library.take(context.parameters.require("id"))
            let image = WaveformImage(width: try Self.number(request, "width", in: Self.pictureWidths, fallback: 1200),
                                      height: try Self.number(request, "height", in: Self.pictureHeights, fallback: 240))
            let peaks = try await self.peaks(of: t)
            let png = try await OffMain.run(on: OffMain.decoding) { try image.png(of: peaks) }
            return Response(status: .ok, headers: [.contentType: "image/png", .cacheControl: "private, max-age=60"],
                            body: ResponseBody(byteBuffer: ByteBuffer(bytes: png)))
        }

        api.post("takes/:id/exports") { @MainActor request, context in
            let (t, s) = try await self.library.take(context.parameters.require("id"))
            guard t.state != .recording else {
                throw APIError(.conflict, "busy", "Take \"\(t.name)\" is being recorded. Export it when the recording has stopped.")
            }
            let body = try await Self.decode(ExportRequest.self, request, context: context, keys: ["format"], example: #"{"format": "…"}"#)
            let job = try self.exports.start(take: t, session: s, format: body.format ?? self.parts.defaultExportFormat)
            return try Self.json(self.status(job), status: .accepted)
        }
        api.get("exports/:id") { @MainActor _, context in
            guard let job = self.exports.job(try context.parameters.require("id")) else {
                throw APIError(.notFound, "not-found", "No export has that id (exports are kept for \(Int(ExportJobs.keepSeconds / 60)) minutes after they finish).")
            }
            return try Self.json(self.status(job))
        }
        api.get("exports/:id/file") { @MainActor request, context in
            guard let job = self.exports.job(try context.parameters.require("id")), let file = job.file, let name = job.downloadName else {
                throw APIError(.notFound, "not-found", "No finished export has that id. Ask for its state with GET /api/exports/{id}.")
            }
            return try FileResponse.make(file, mediaType: self.mediaType(job.format), request: request, download: name)
        }

        api.get("doctor") { @MainActor _, _ in
            try Self.json(Findings(findings: try await self.doctorFindings()))
        }
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
