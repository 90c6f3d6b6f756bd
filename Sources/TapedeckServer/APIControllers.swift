import Hummingbird
import HTTPTypes
import NIOCore
import TapedeckApp
import TapedeckCore
import Foundation

// The JSON API's routes (docs/openapi.yaml), one controller per concern, registered under `/api`
// by ``WebServer/addAPI(to:)``. Each controller is a value holding the server; its handlers run
// on the main actor (the library and recorder live there) unless they say otherwise, and never
// block it: files are read and pictures drawn off the main actor.
//
// Handlers read bodies with `request.decode(as:context:)` and return values the request
// context's encoder writes (ServerContext, APICoding.swift); every failure they throw becomes a
// response in one place, ``APIErrorMiddleware``. A handler that answers 202 returns an
// `EditedResponse`, which is not `Sendable`: it hands it over (`sending`) from the main actor,
// so its route calls it from a closure rather than naming it.

/// `/api/health`, `/api/openapi.yaml`, `/api/state`, `/api/doctor` and `/api/fleet`.
struct SystemController: Sendable {
    typealias Context = ServerContext
    let server: WebServer

    /// - Thread: main actor.
    @MainActor var endpoints: RouteCollection<Context> {
        RouteCollection(context: Context.self)
            .get("health") { try await self.health($0, context: $1) }
            .get("openapi.yaml", use: self.openAPI)
            .get("state", use: self.state)
            .get("doctor", use: self.doctor)
            .get("fleet", use: self.fleet)
    }

    /// `GET /api/fleet`: every recorder's last heartbeat in the fleet catalog, as last read (404
    /// without a catalog). - Thread: main actor. Never blocks.
    @MainActor func fleet(_ request: Request, context: Context) async throws -> FleetView.State {
        guard let fleet = server.fleet else {
            throw APIError(.notFound, "no-fleet-catalog", "This server's config has no fleet catalog. Set sync.catalog.postgres in its sync: section (`tapedeck config example` shows the keys), then start serve again.")
        }
        return fleet.state()
    }

    /// `GET /api/health`: 200, or 503 with the problems. - Thread: main actor; suspends while the
    /// library is read (when it is older than the server's view allows).
    @MainActor func health(_ request: Request, context: Context) async throws -> sending EditedResponse<WebServer.Health> {
        var libraryError: (any Error)?
        do { _ = try await server.library.sessions() } catch { libraryError = error }
        let problems = server.healthProblems(server.live.snapshot(), libraryError: libraryError)
        let health = WebServer.Health(ok: problems.isEmpty, version: server.parts.version, tokenRequired: server.token != nil, problems: problems)
        return EditedResponse(status: problems.isEmpty ? .ok : .serviceUnavailable, response: health)
    }

    /// `GET /api/openapi.yaml`: the API's contract. - Thread: any. Never blocks.
    func openAPI(_ request: Request, context: Context) async throws -> Response {
        Response(status: .ok, headers: [.contentType: "application/yaml; charset=utf-8", .cacheControl: "public, max-age=300"],
                 body: ResponseBody(byteBuffer: ByteBuffer(bytes: PackageResources.openapi_yaml)))
    }

    /// `GET /api/state`: what the recorder is doing. - Thread: main actor. Never blocks.
    @MainActor func state(_ request: Request, context: Context) async throws -> LiveSnapshot {
        server.live.snapshot()
    }

    /// `GET /api/doctor`: what `tapedeck doctor` finds. - Thread: main actor; suspends while the
    /// library is examined off it.
    @MainActor func doctor(_ request: Request, context: Context) async throws -> WebServer.Findings {
        WebServer.Findings(findings: try await server.doctorFindings())
    }
}

/// `/api/record`, `/api/stop`, `/api/split` and `/api/markers`: the recording.
struct RecordingController: Sendable {
    typealias Context = ServerContext
    let server: WebServer

    /// - Thread: main actor.
    @MainActor var endpoints: RouteCollection<Context> {
        RouteCollection(context: Context.self)
            .post("record") { try await self.record($0, context: $1) }
            .post("stop") { try await self.stop($0, context: $1) }
            .post("split") { try await self.split($0, context: $1) }
            .post("markers") { try await self.mark($0, context: $1) }
    }

    /// `POST /api/record`: starts a recording. - Thread: main actor. Never blocks.
    @MainActor func record(_ request: Request, context: Context) async throws -> sending EditedResponse<LiveSnapshot> {
        let body = try await request.decode(as: WebServer.RecordRequest.self, context: context)
        func blankIsNil(_ s: String?) -> String? {
            let t = s?.trimmingCharacters(in: .whitespaces)
            return t?.isEmpty == false ? t : nil
        }
        // A run that the page's Split can cut into takes whose frames, together, are what the
        // device delivered (as `record --split` makes them).
        var plan = RunPlan()
        plan.splitOnRequest = true
        try server.parts.desk.start(session: blankIsNil(body.session), take: blankIsNil(body.take), plan: plan)
        return EditedResponse(status: .accepted, response: server.live.snapshot())
    }

    /// `POST /api/stop`: stops the recording. - Thread: main actor. Never blocks.
    @MainActor func stop(_ request: Request, context: Context) async throws -> sending EditedResponse<LiveSnapshot> {
        guard server.parts.desk.isRecording else {
            // Another process's recording, shown on the page, is stopped through its socket.
            let answered: RecorderControl.Answer?
            do { answered = try await server.live.controlOther(RecorderControl.Request(op: "stop")) } catch let e as TapedeckError {
                throw APIError(.conflict, "busy", e.message)
            }
            guard answered != nil else {
                throw APIError(.conflict, "not-recording", "Nothing is recording, so there is nothing to stop.")
            }
            return EditedResponse(status: .accepted, response: server.live.snapshot())
        }
        server.parts.desk.stop()
        return EditedResponse(status: .accepted, response: server.live.snapshot())
    }

    /// `POST /api/split`: ends the take and begins the next; with nothing recording, 409
    /// `not-recording` (not the 404 the desk's `.notFound` stands for). - Thread: main actor.
    /// Never blocks.
    @MainActor func split(_ request: Request, context: Context) async throws -> sending EditedResponse<LiveSnapshot> {
        do {
            if server.parts.desk.isRecording {
                try server.parts.desk.split()
            } else if try await server.live.controlOther(RecorderControl.Request(op: "split")) == nil {
                try server.parts.desk.split()
            }
        } catch let e as TapedeckError {
            throw APIError(.conflict, e.code == .busy ? "busy" : "not-recording", e.message)
        }
        return EditedResponse(status: .accepted, response: server.live.snapshot())
    }

    /// `POST /api/markers`: sets a marker; with nothing recording, 409 `not-recording` (as for
    /// split). - Thread: main actor. Never blocks.
    @MainActor func mark(_ request: Request, context: Context) async throws -> sending EditedResponse<LiveSnapshot> {
        let body = try await request.decode(as: WebServer.MarkRequest.self, context: context)
        let label = body.label ?? ""
        // As the take keeps them (TakeAnnotations.validate): a label it would refuse at the end
        // of the recording is refused now.
        if let problem = TakeMarker.labelProblem(label) {
            throw APIError(.badRequest, "invalid-argument", problem)
        }
        do {
            if server.parts.desk.isRecording {
                try server.parts.desk.mark(label: label)
            } else if try await server.live.controlOther(RecorderControl.Request(op: "mark", label: label)) == nil {
                try server.parts.desk.mark(label: label)
            }
        } catch let e as TapedeckError {
            throw APIError(.conflict, e.code == .busy ? "busy" : "not-recording", e.message)
        }
        return EditedResponse(status: .accepted, response: server.live.snapshot())
    }
}

/// `/api/sessions` and `/api/sessions/{id}`.
struct SessionsController: Sendable {
    typealias Context = ServerContext
    let server: WebServer

    /// - Thread: main actor.
    @MainActor var endpoints: RouteCollection<Context> {
        RouteCollection(context: Context.self)
            .get("sessions", use: self.list)
            .get("sessions/:id", use: self.get)
            .patch("sessions/:id", use: self.rename)
            .delete("sessions/:id", use: self.delete)
    }

    /// `GET /api/sessions`: a page of sessions, newest first. - Thread: main actor; suspends
    /// while the library is read.
    @MainActor func list(_ request: Request, context: Context) async throws -> WebServer.SessionPage {
        let (offset, limit) = try WebServer.paging(request)
        let all = try await server.library.sessions()
        let newest = all.reversed().dropFirst(offset).prefix(limit)
        return WebServer.SessionPage(total: all.count, offset: offset, sessions: newest.map(WebServer.SessionSummary.init))
    }

    /// `GET /api/sessions/{id}`: a session and a page of its takes. - Thread: main actor;
    /// suspends while the library is read.
    @MainActor func get(_ request: Request, context: Context) async throws -> WebServer.SessionTakes {
        let s = try await server.library.session(context.parameters.require("id"))
        let (offset, limit) = try WebServer.paging(request)
        let storage = server.parts.store.storage
        let files = storage.audioFiles(of: s)
        return WebServer.SessionTakes(id: s.id, shortID: s.shortID, name: s.name, createdAt: s.createdAt, total: s.takes.count, offset: offset,
                                      takes: s.takes.dropFirst(offset).prefix(limit).map {
                                          WebServer.TakeBody(take: $0, session: s, file: .known(files[$0.id]))
                                      })
    }

    /// `PATCH /api/sessions/{id}`: renames a session. - Thread: main actor; suspends while the
    /// library changes.
    @MainActor func rename(_ request: Request, context: Context) async throws -> WebServer.SessionSummary {
        let s = try await server.library.session(context.parameters.require("id"))
        let body = try await request.decode(as: WebServer.SessionChange.self, context: context)
        try await server.library.change { try await server.parts.store.rename(.session(s), to: body.name) }
        return WebServer.SessionSummary(try await server.library.session(s.id))
    }

    /// `DELETE /api/sessions/{id}`: deletes a session and its takes. - Thread: main actor;
    /// suspends while the library changes.
    @MainActor func delete(_ request: Request, context: Context) async throws -> HTTPResponse.Status {
        let s = try await server.library.session(context.parameters.require("id"))
        if s.takes.contains(where: { $0.state == .recording }) {
            throw APIError(.conflict, "busy", "Session \"\(s.name)\" has a take being recorded. Stop the recording first.")
        }
        try await server.library.change { try await server.parts.store.delete(.session(s)) }
        for t in s.takes { server.parts.waveforms.forget(t.id) }
        return .noContent
    }
}

/// `/api/takes/{id}`, its audio, its download and its waveform.
struct TakesController: Sendable {
    typealias Context = ServerContext
    let server: WebServer

    /// - Thread: main actor.
    @MainActor var endpoints: RouteCollection<Context> {
        let routes = RouteCollection(context: Context.self)
            .get("takes/:id", use: self.get)
            .patch("takes/:id", use: self.change)
            .delete("takes/:id", use: self.delete)
        for method in [HTTPRequest.Method.get, .head] {
            routes.on("takes/:id/audio", method: method, use: self.audio)
            routes.on("takes/:id/download", method: method, use: self.download)
        }
        return routes
            .get("takes/:id/waveform", use: self.waveform)
            .get("takes/:id/waveform.png", use: self.waveformPicture)
    }

    /// `GET /api/takes/{id}`. - Thread: main actor; suspends while the library is read.
    @MainActor func get(_ request: Request, context: Context) async throws -> WebServer.TakeBody {
        let (t, s) = try await server.library.take(context.parameters.require("id"))
        return WebServer.TakeBody(take: t, session: s, file: .at(try? server.parts.store.storage.audioURL(for: t)))
    }

    /// `PATCH /api/takes/{id}`: renames a take and/or changes its notes. - Thread: main actor;
    /// suspends while the library changes.
    @MainActor func change(_ request: Request, context: Context) async throws -> WebServer.TakeBody {
        var (t, s) = try await server.library.take(context.parameters.require("id"))
        let body = try await request.decode(as: WebServer.TakeChange.self, context: context)
        guard body.name != nil || body.notes != nil else {
            throw APIError(.badRequest, "invalid-argument", #"Say what to change: {"name": "…"} and/or {"notes": "…"}."#)
        }
        // Notes the take cannot keep are refused before anything changes (the name included).
        if let notes = body.notes { try TakeAnnotations.validateNotes(notes) }
        if let name = body.name, name != t.name {
            try await server.library.change { try await server.parts.store.rename(.take(t, in: s), to: name) }
            (t, s) = try await server.library.take(t.id)
        }
        if let notes = body.notes, notes != t.notes {
            var annotations = t.annotations
            annotations.notes = notes
            let current = t
            t = try await server.library.change { try await server.parts.store.annotate(current, annotations) }
        }
        return WebServer.TakeBody(take: t, session: s, file: .at(try? server.parts.store.storage.audioURL(for: t)))
    }

    /// `DELETE /api/takes/{id}`. - Thread: main actor; suspends while the library changes.
    @MainActor func delete(_ request: Request, context: Context) async throws -> HTTPResponse.Status {
        let (t, s) = try await server.library.take(context.parameters.require("id"))
        guard t.state != .recording else {
            throw APIError(.conflict, "busy", "Take \"\(t.name)\" is being recorded. Stop the recording first.")
        }
        try await server.library.change { try await server.parts.store.delete(.take(t, in: s)) }
        server.parts.waveforms.forget(t.id)
        return .noContent
    }

    /// `GET`/`HEAD /api/takes/{id}/audio`: the take's file, for playing. - Thread: main actor;
    /// the file is read as the response is written.
    @MainActor func audio(_ request: Request, context: Context) async throws -> Response {
        let (t, _) = try await server.library.take(context.parameters.require("id"))
        return try FileResponse.make(try server.audioURL(t), mediaType: server.mediaType(t.encoding), request: request, head: request.method == .head)
    }

    /// `GET`/`HEAD /api/takes/{id}/download`: the take's file as an attachment named as an
    /// export would be. - Thread: main actor; the file is read as the response is written.
    @MainActor func download(_ request: Request, context: Context) async throws -> Response {
        let (t, s) = try await server.library.take(context.parameters.require("id"))
        let url = try server.audioURL(t)
        let name = ExportItem(take: t, session: s).fileName(extension: url.pathExtension)
        return try FileResponse.make(url, mediaType: server.mediaType(t.encoding), request: request, download: name, head: request.method == .head)
    }

    /// `GET /api/takes/{id}/waveform`: the overview as JSON or audiowaveform's `.dat`.
    /// - Thread: main actor; suspends while peaks are read or decoded off it.
    @MainActor func waveform(_ request: Request, context: Context) async throws -> Response {
        let (t, _) = try await server.library.take(context.parameters.require("id"))
        let format = request.uri.queryParameters.get("format") ?? "json"
        guard format == "json" || format == "dat" else {
            throw APIError(.badRequest, "invalid-argument", "format=\(format.prefix(32)): give json (the default) or dat (audiowaveform's binary peaks).")
        }
        let peaks = try await server.peaks(of: t)
        if format == "dat" {
            return Response(status: .ok, headers: [.contentType: "application/octet-stream", .cacheControl: "private, max-age=60"],
                            body: ResponseBody(byteBuffer: ByteBuffer(bytes: peaks.datFile)))
        }
        return try WebServer.WaveformJSON(takeID: t.id, sampleRate: peaks.sampleRate, framesPerPoint: peaks.framesPerPoint,
                                          min: peaks.minimums, max: peaks.maximums).response(from: request, context: context)
    }

    /// `GET /api/takes/{id}/waveform.png`: the overview drawn. - Thread: main actor; suspends
    /// while it is drawn off it.
    @MainActor func waveformPicture(_ request: Request, context: Context) async throws -> Response {
        let (t, _) = try await server.library.take(context.parameters.require("id"))
        let image = WaveformImage(width: try WebServer.number(request, "width", in: WebServer.pictureWidths, fallback: 1200),
                                  height: try WebServer.number(request, "height", in: WebServer.pictureHeights, fallback: 240))
        let peaks = try await server.peaks(of: t)
        let png = try await OffMain.run(on: OffMain.decoding) { try image.png(of: peaks) }
        return Response(status: .ok, headers: [.contentType: "image/png", .cacheControl: "private, max-age=60"],
                        body: ResponseBody(byteBuffer: ByteBuffer(bytes: png)))
    }
}

/// `/api/takes/{id}/exports` and `/api/exports/{id}`: export jobs and their files.
struct ExportsController: Sendable {
    typealias Context = ServerContext
    let server: WebServer

    /// - Thread: main actor.
    @MainActor var endpoints: RouteCollection<Context> {
        RouteCollection(context: Context.self)
            .post("takes/:id/exports") { try await self.create($0, context: $1) }
            .get("exports/:id", use: self.get)
            .get("exports/:id/file", use: self.file)
    }

    /// `POST /api/takes/{id}/exports`: starts exporting a take. - Thread: main actor; the export
    /// runs in a child process.
    @MainActor func create(_ request: Request, context: Context) async throws -> sending EditedResponse<WebServer.ExportStatus> {
        let (t, _) = try await server.library.take(context.parameters.require("id"))
        guard t.state != .recording else {
            throw APIError(.conflict, "busy", "Take \"\(t.name)\" is being recorded. Export it when the recording has stopped.")
        }
        let body = try await request.decode(as: WebServer.ExportRequest.self, context: context)
        let job = try server.exports.start(take: t, format: body.format ?? server.parts.defaultExportFormat)
        return EditedResponse(status: .accepted, response: server.status(job))
    }

    /// `GET /api/exports/{id}`: an export's state. - Thread: main actor. Never blocks.
    @MainActor func get(_ request: Request, context: Context) async throws -> WebServer.ExportStatus {
        guard let job = server.exports.job(try context.parameters.require("id")) else {
            throw APIError(.notFound, "not-found", "No export has that id (exports are kept for \(Int(ExportJobs.keepSeconds / 60)) minutes after they finish).")
        }
        return server.status(job)
    }

    /// `GET /api/exports/{id}/file`: a finished export's file. - Thread: main actor; the file is
    /// read as the response is written.
    @MainActor func file(_ request: Request, context: Context) async throws -> Response {
        guard let job = server.exports.job(try context.parameters.require("id")), let file = job.file, let name = job.downloadName else {
            throw APIError(.notFound, "not-found", "No finished export has that id. Ask for its state with GET /api/exports/{id}.")
        }
        return try FileResponse.make(file, mediaType: server.mediaType(job.format), request: request, download: name,
                                     head: request.method == .head)
    }
}
