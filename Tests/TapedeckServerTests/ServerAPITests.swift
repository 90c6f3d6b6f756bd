import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import HummingbirdWSClient
import HummingbirdWSTesting
import Logging
import NIOCore
import Testing
import TapedeckApp
import TapedeckAssembly
import TapedeckServerAssembly
import TapedeckCore
import TapedeckTesting
@testable import TapedeckServer

/// The JSON API over real HTTP (Hummingbird's live test server on a loopback port), with the
/// null capture backend and a directory library in a temporary folder: each endpoint's success
/// and its refusals (no token, wrong token, cross-site, unknown id, a second recorder).
@Suite(.serialized, .timeLimit(.minutes(5)))
@MainActor
struct ServerAPITests {
    struct Fixture {
        let server: WebServer
        let studio: Studio
        let folder: URL
    }

    nonisolated static let script: HTTPFields = [HTTPField.Name("X-Tapedeck-Request")!: "1"]

    func fixture(token: AccessToken? = nil, requireToken: Bool = false, listen: String = "127.0.0.1:0", exportCommand: [String]? = nil, paced: Bool = true,
                 adjust: (inout ServerOptions) -> Void = { _ in }) async throws -> Fixture {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("serve-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let yaml = """
            capture:
              backend: null
              null:
                paced: \(paced)
            storage:
              directory:
                path: \(folder.appendingPathComponent("library").path)
            """
        let configFile = folder.appendingPathComponent("config.yaml")
        try yaml.write(to: configFile, atomically: true, encoding: .utf8)
        let config = try ConfigurationLoader(catalog: .builtIn, environment: [:]).resolve(file: ConfigFile.parse(yaml, name: "test"), flags: [:])
        let studio = try Studio(configuration: config, catalog: .builtIn, logger: Logger(label: "serve-test"),
                                environment: ["HOME": folder.path, "XDG_CACHE_HOME": folder.appendingPathComponent("cache").path])
        try await studio.openLibrary()
        var options = try ServerOptions(listen: listen, tokenFile: folder.appendingPathComponent("token"), alwaysRequireToken: requireToken)
        adjust(&options)
        let server = studio.makeServer(options: options, token: token, exportFolder: folder.appendingPathComponent("exports"),
                                       exportCommand: try exportCommand ?? [BuiltTapedeck.url.path, "--config", configFile.path])
        server.live.start()
        return Fixture(server: server, studio: studio, folder: folder)
    }

    /// Runs `body` against the fixture's server on a loopback port; the recording (if any) is
    /// finished and the live state stopped afterwards, whether `body` succeeds or not.
    func serving(_ f: Fixture, _ body: @escaping @Sendable (any TestClientProtocol) async throws -> Void) async throws {
        do {
            try await f.server.makeApplication().test(.live, body)
        } catch {
            await f.server.finishForShutdown()
            throw error
        }
        await f.server.finishForShutdown()
    }

    nonisolated static func json(_ buffer: ByteBuffer) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(buffer.readableBytesView)) as? [String: Any])
    }

    nonisolated static func errorCode(_ buffer: ByteBuffer) -> String? {
        ((try? json(buffer))?["error"] as? [String: Any])?["code"] as? String
    }

    nonisolated static func errorMessage(_ buffer: ByteBuffer) -> String? {
        ((try? json(buffer))?["error"] as? [String: Any])?["message"] as? String
    }

    /// A moment `seconds` from now: polls wait that long for what a busy machine does slowly.
    nonisolated static func deadline(_ seconds: Int) -> ContinuousClock.Instant { .now + .seconds(seconds) }

    nonisolated static func body(_ text: String) -> ByteBuffer { ByteBuffer(string: text) }

    @Test("record, a second recorder refused, marker, stop: the take is listed, played with byte ranges, renamed, annotated, exported and deleted")
    func recordAndManage() async throws {
        let f = try await fixture()
        try await serving(f) { client in
            // Nothing records yet: stop and marker are refused.
            try await client.execute(uri: "/api/stop", method: .post, headers: Self.script) {
                #expect($0.status == .conflict)
                #expect(Self.errorCode($0.body) == "not-recording")
            }
            try await client.execute(uri: "/api/markers", method: .post, headers: Self.script, body: Self.body("{}")) { #expect($0.status == .conflict) }
            try await client.execute(uri: "/api/record", method: .post, headers: Self.script, body: Self.body(#"{"session": "API", "take": "One"}"#)) {
                #expect($0.status == .accepted)
            }
            try await client.execute(uri: "/api/record", method: .post, headers: Self.script, body: Self.body("{}")) {
                #expect($0.status == .conflict)
                #expect(Self.errorCode($0.body) == "busy")
            }
            try await Task.sleep(for: .milliseconds(700))
            try await client.execute(uri: "/api/markers", method: .post, headers: Self.script, body: Self.body(#"{"label": "here"}"#)) { #expect($0.status == .accepted) }
            try await client.execute(uri: "/api/markers", method: .post, headers: Self.script, body: Self.body(#"{"label": "two\nlines"}"#)) { #expect($0.status == .badRequest) }
            try await Task.sleep(for: .milliseconds(500))
            try await client.execute(uri: "/api/stop", method: .post, headers: Self.script) { #expect($0.status == .accepted) }
            var takeID = ""
            let stopDeadline = Self.deadline(60)
            while takeID.isEmpty, ContinuousClock.now < stopDeadline {
                let state = try await client.execute(uri: "/api/state", method: .get) { try Self.json($0.body) }
                if state["recording"] as? Bool == false, let last = state["last"] as? [String: Any] { takeID = last["takeID"] as? String ?? "" }
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(!takeID.isEmpty)

            let sessions = try await client.execute(uri: "/api/sessions", method: .get) { try Self.json($0.body) }
            #expect(sessions["total"] as? Int == 1)
            let session = try #require((sessions["sessions"] as? [[String: Any]])?.first)
            #expect(session["name"] as? String == "API")
            let sessionID = try #require(session["id"] as? String)
            let detail = try await client.execute(uri: "/api/sessions/\(sessionID)", method: .get) { try Self.json($0.body) }
            let take = try #require((detail["takes"] as? [[String: Any]])?.first)
            #expect(take["id"] as? String == takeID)
            #expect(take["name"] as? String == "One")
            #expect((take["markers"] as? [[String: Any]])?.first?["label"] as? String == "here")
            let seconds = try #require(take["seconds"] as? Double)
            #expect(seconds > 1)  // how much more depends on how busy the machine is
            let path = try #require(take["path"] as? String)
            let bytes = try Data(contentsOf: URL(fileURLWithPath: path))

            // Byte ranges: exact bytes, open-ended, suffix, past the end.
            try await client.execute(uri: "/api/takes/\(takeID)/audio", method: .get, headers: [.range: "bytes=1000-1999"]) {
                #expect($0.status == .partialContent)
                #expect($0.headers[.contentRange] == "bytes 1000-1999/\(bytes.count)")
                #expect(Data($0.body.readableBytesView) == bytes[1000..<2000])
            }
            try await client.execute(uri: "/api/takes/\(takeID)/audio", method: .get, headers: [.range: "bytes=-10"]) {
                #expect($0.status == .partialContent)
                #expect(Data($0.body.readableBytesView) == bytes.suffix(10))
            }
            try await client.execute(uri: "/api/takes/\(takeID)/audio", method: .get, headers: [.range: "bytes=\(bytes.count)-"]) {
                #expect($0.status == .rangeNotSatisfiable)
                #expect($0.headers[.contentRange] == "bytes */\(bytes.count)")
            }
            try await client.execute(uri: "/api/takes/\(takeID)/audio", method: .get) {
                #expect($0.status == .ok)
                #expect($0.headers[.contentType] == "audio/wav")
                #expect(Data($0.body.readableBytesView) == bytes)
            }
            try await client.execute(uri: "/api/takes/\(takeID)/download", method: .get) {
                #expect($0.headers[.contentDisposition]?.hasPrefix("attachment; filename=\"API - One.wav\"") == true)
            }

            // The waveform covers the take; the PNG is a PNG.
            let waveform = try await client.execute(uri: "/api/takes/\(takeID)/waveform", method: .get) { try Self.json($0.body) }
            let points = try #require(waveform["max"] as? [Int])
            let perPoint = try #require(waveform["framesPerPoint"] as? Int)
            let frames = try #require(take["frames"] as? Int)
            #expect(points.count * perPoint >= frames && points.count * perPoint - frames < perPoint)
            #expect((points.max() ?? 0) > 15_000)  // the null sine at half scale
            try await client.execute(uri: "/api/takes/\(takeID)/waveform.png?width=300&height=60", method: .get) {
                #expect($0.status == .ok)
                #expect(Array($0.body.readableBytesView.prefix(8)) == [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
            }
            try await client.execute(uri: "/api/takes/\(takeID)/waveform.png?width=3", method: .get) { #expect($0.status == .badRequest) }

            // Rename and notes; a name storage refuses is refused.
            try await client.execute(uri: "/api/takes/\(takeID)", method: .patch, headers: Self.script, body: Self.body(#"{"name": "Renamed", "notes": "keeper"}"#)) {
                #expect($0.status == .ok)
                let t = try Self.json($0.body)
                #expect(t["name"] as? String == "Renamed")
                #expect(t["notes"] as? String == "keeper")
            }
            try await client.execute(uri: "/api/takes/\(takeID)", method: .patch, headers: Self.script, body: Self.body(#"{"name": ""}"#)) {
                #expect($0.status == .badRequest)
            }
            try await client.execute(uri: "/api/takes/\(takeID)", method: .patch, headers: Self.script, body: Self.body("not json")) {
                #expect($0.status == .badRequest)
            }
            // A key the route does not know is a typo, never ignored.
            try await client.execute(uri: "/api/takes/\(takeID)", method: .patch, headers: Self.script, body: Self.body(#"{"nmae": "x"}"#)) {
                #expect($0.status == .badRequest)
                #expect(String(buffer: $0.body).contains("nmae"))
            }
            for uri in ["/api/sessions?limit=0", "/api/sessions?limit=abc", "/api/sessions?offset=-1", "/api/takes/\(takeID)/waveform?format=xml",
                        "/api/takes/\(takeID)/waveform.png?width=abc", "/?page=x"] {
                try await client.execute(uri: uri, method: .get) { #expect($0.status == .badRequest, "\(uri)") }
            }
            try await client.execute(uri: "/?page=9223372036854775807", method: .get) { #expect($0.status == .badRequest) }
            try await client.execute(uri: "/?page=2147483647", method: .get) { #expect($0.status == .ok) }
            try await client.execute(uri: "/api/no-such-thing", method: .get) {
                #expect($0.status == .notFound)
                #expect(Self.errorCode($0.body) == "not-found")
                #expect($0.headers[.contentSecurityPolicy] != nil)
            }

            // An export on request, verified, then downloaded.
            let started = try await client.execute(uri: "/api/takes/\(takeID)/exports", method: .post, headers: Self.script, body: Self.body(#"{"format": "flac"}"#)) {
                #expect($0.status == .accepted)
                return try Self.json($0.body)
            }
            let exportID = try #require(started["id"] as? String)
            let exported = try await Self.exportStatus(client, exportID)
            #expect(exported["state"] as? String == "done", "\(exported)")
            #expect(exported["progress"] as? Double == 1)
            try await client.execute(uri: "/api/exports/\(exportID)/file", method: .get) {
                #expect($0.status == .ok)
                #expect(Array($0.body.readableBytesView.prefix(4)) == Array("fLaC".utf8))
            }
            try await client.execute(uri: "/api/takes/\(takeID)/exports", method: .post, headers: Self.script, body: Self.body(#"{"format": "tape"}"#)) {
                #expect($0.status == .badRequest)
            }

            // Unknown ids.
            for uri in ["/api/takes/nope", "/api/takes/nope/audio", "/api/sessions/nope", "/api/exports/nope", "/api/takes/..%2F..%2Fetc%2Fpasswd/audio"] {
                try await client.execute(uri: uri, method: .get) {
                    #expect($0.status == .notFound, "\(uri)")
                    #expect(Self.errorCode($0.body) == "not-found", "\(uri)")
                }
            }

            // Doctor finds nothing in a sound library.
            let doctor = try await client.execute(uri: "/api/doctor", method: .get) { try Self.json($0.body) }
            #expect((doctor["findings"] as? [Any])?.isEmpty == true)

            // Delete: the take and its file go.
            try await client.execute(uri: "/api/takes/\(takeID)", method: .delete, headers: Self.script) { #expect($0.status == .noContent) }
            try await client.execute(uri: "/api/takes/\(takeID)", method: .get) { #expect($0.status == .notFound) }
            #expect(!FileManager.default.fileExists(atPath: path))
            try await client.execute(uri: "/api/sessions/\(sessionID)", method: .patch, headers: Self.script, body: Self.body(#"{"name": "Kept"}"#)) {
                #expect((try? Self.json($0.body))?["name"] as? String == "Kept")
            }
            try await client.execute(uri: "/api/sessions/\(sessionID)", method: .delete, headers: Self.script) { #expect($0.status == .noContent) }
        }
    }

    /// Records a take of about a second through the API and waits for it to be finished.
    nonisolated static func recordTake(_ client: any TestClientProtocol, session: String) async throws -> String {
        try await client.execute(uri: "/api/record", method: .post, headers: script, body: body(#"{"session": "\#(session)"}"#)) {
            #expect($0.status == .accepted)
        }
        try await Task.sleep(for: .milliseconds(1000))
        try await client.execute(uri: "/api/stop", method: .post, headers: script) { #expect($0.status == .accepted) }
        let stopDeadline = deadline(60)
        while ContinuousClock.now < stopDeadline {
            let state = try await client.execute(uri: "/api/state", method: .get) { try json($0.body) }
            if state["recording"] as? Bool == false, let last = state["last"] as? [String: Any], let id = last["takeID"] as? String { return id }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw CancellationError()
    }

    /// A shell script that stands in for `tapedeck export`.
    nonisolated static func script(_ body: String) throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("export-\(UUID().uuidString).sh")
        try "#!/bin/sh\n\(body)\n".write(to: url, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: url.path)
        return url
    }

    /// Waits for an export on request to leave `running`; its status.
    nonisolated static func exportStatus(_ client: any TestClientProtocol, _ id: String) async throws -> [String: Any] {
        let until = deadline(120)
        while ContinuousClock.now < until {
            let status = try await client.execute(uri: "/api/exports/\(id)", method: .get) { try json($0.body) }
            if status["state"] as? String != "running" { return status }
            try await Task.sleep(for: .milliseconds(100))
        }
        return [:]
    }

    @Test("an export on request runs in a child process: one that crashes fails its job, and the server and its recording go on")
    func exportCrashIsolated() async throws {
        // Stands in for an encoder's assertion: the export process aborts.
        let script = try Self.script("kill -ABRT $$")
        defer { try? FileManager.default.removeItem(at: script) }
        let f = try await fixture(exportCommand: [script.path])
        try await serving(f) { client in
            let takeID = try await Self.recordTake(client, session: "Crash")
            try await client.execute(uri: "/api/record", method: .post, headers: Self.script, body: Self.body(#"{"session": "Crash", "take": "Going on"}"#)) {
                #expect($0.status == .accepted)
            }
            let started = try await client.execute(uri: "/api/takes/\(takeID)/exports", method: .post, headers: Self.script, body: Self.body(#"{"format": "mp3"}"#)) {
                #expect($0.status == .accepted)
                return try Self.json($0.body)
            }
            let status = try await Self.exportStatus(client, try #require(started["id"] as? String))
            #expect(status["state"] as? String == "failed")
            #expect((status["error"] as? String)?.contains("signal 6") == true, "\(status)")
            #expect(status["file"] == nil || status["file"] is NSNull)
            let state = try await client.execute(uri: "/api/state", method: .get) { try Self.json($0.body) }
            #expect(state["recording"] as? Bool == true)
            try await Task.sleep(for: .milliseconds(500))
            try await client.execute(uri: "/api/stop", method: .post, headers: Self.script) { #expect($0.status == .accepted) }
        }
        let takes = try #require(f.studio.store.sessions.first { $0.name == "Crash" }?.takes)
        #expect(takes.map(\.name).contains("Going on"))
        #expect(takes.allSatisfy { $0.state == .complete && $0.frames > 0 })
        // Nothing of the failed export is left.
        let left = (try? FileManager.default.contentsOfDirectory(atPath: f.folder.appendingPathComponent("exports").path)) ?? []
        #expect(left.isEmpty, "\(left)")
    }

    @Test("stopping the server stops the exports still running (SIGTERM) and removes their folder")
    func exportStoppedWithServer() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("export-pid-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let script = try Self.script("echo $$ > \(folder.path); exec sleep 60")
        defer { try? FileManager.default.removeItem(at: script) }
        let f = try await fixture(exportCommand: [script.path])
        try await serving(f) { client in
            let takeID = try await Self.recordTake(client, session: "Slow")
            try await client.execute(uri: "/api/takes/\(takeID)/exports", method: .post, headers: Self.script, body: Self.body(#"{"format": "flac"}"#)) {
                #expect($0.status == .accepted)
            }
            let until = Self.deadline(30)
            while (try? String(contentsOf: folder, encoding: .utf8))?.hasSuffix("\n") != true, ContinuousClock.now < until {
                try await Task.sleep(for: .milliseconds(50))
            }
        }
        let pid = try #require(pid_t((try String(contentsOf: folder, encoding: .utf8)).trimmingCharacters(in: .whitespacesAndNewlines)))
        let until = Self.deadline(10)
        while kill(pid, 0) == 0, ContinuousClock.now < until { try await Task.sleep(for: .milliseconds(50)) }
        #expect(kill(pid, 0) != 0, "the export process \(pid) still runs after the server stopped")
        #expect(!FileManager.default.fileExists(atPath: f.folder.appendingPathComponent("exports").path))
    }

    @Test("Split ends the take and goes on in the next of the same run; nothing to split is refused")
    func split() async throws {
        let f = try await fixture()
        try await serving(f) { client in
            try await client.execute(uri: "/api/split", method: .post, headers: Self.script) { #expect($0.status == .conflict) }
            try await client.execute(uri: "/api/record", method: .post, headers: Self.script, body: Self.body(#"{"session": "Cut", "take": "Song"}"#)) {
                #expect($0.status == .accepted)
            }
            try await Task.sleep(for: .milliseconds(1200))
            try await client.execute(uri: "/api/split", method: .post, headers: Self.script) { #expect($0.status == .accepted) }
            try await Task.sleep(for: .milliseconds(1200))
            try await client.execute(uri: "/api/stop", method: .post, headers: Self.script) { #expect($0.status == .accepted) }
            let stopDeadline = Self.deadline(60)
            while ContinuousClock.now < stopDeadline {
                let state = try await client.execute(uri: "/api/state", method: .get) { try Self.json($0.body) }
                if state["recording"] as? Bool == false { break }
                try await Task.sleep(for: .milliseconds(100))
            }
            let sessions = try await client.execute(uri: "/api/sessions", method: .get) { try Self.json($0.body) }
            let id = try #require((sessions["sessions"] as? [[String: Any]])?.first?["id"] as? String)
            let detail = try await client.execute(uri: "/api/sessions/\(id)", method: .get) { try Self.json($0.body) }
            let takes = try #require(detail["takes"] as? [[String: Any]])
            #expect(takes.count == 2)
            let runs = takes.compactMap { $0["run"] as? [String: Any] }
            #expect(runs.count == 2 && runs[0]["id"] as? String == runs[1]["id"] as? String)
            #expect(runs.first?["ended"] as? String == "requested" && runs.last?["began"] as? String == "requested")
            #expect(takes.allSatisfy { ($0["seconds"] as? Double ?? 0) > 0.8 && $0["state"] as? String == "complete" })
            // The second take starts where the first ends.
            let first = try #require(takes.first?["frames"] as? Int)
            #expect(runs.last?["offsetFrames"] as? Int == first)
        }
    }

    @Test("bodies are read and written in one place: unknown keys and non-objects refused word for word, JSON never cached, every response with its security headers once")
    func coding() async throws {
        let f = try await fixture()
        try await serving(f) { client in
            try await client.execute(uri: "/api/markers", method: .post, headers: Self.script, body: Self.body(#"{"lable": "x", "label": "y"}"#)) {
                #expect($0.status == .badRequest)
                #expect(Self.errorCode($0.body) == "invalid-argument")
                #expect(Self.errorMessage($0.body) == #"Unknown key "lable": this request takes "label", as in {"label": "chorus"}."#)
            }
            try await client.execute(uri: "/api/record", method: .post, headers: Self.script, body: Self.body("[1]")) {
                #expect($0.status == .badRequest)
                #expect(Self.errorMessage($0.body) == #"The body must be a JSON object like {"session": "Rehearsal", "take": "Verse"}."#)
            }
            try await client.execute(uri: "/api/sessions/nope", method: .patch, headers: Self.script, body: Self.body("{}")) {
                #expect($0.status == .notFound)
            }
            try await client.execute(uri: "/api/state", method: .get) {
                #expect($0.headers[.contentType] == "application/json; charset=utf-8")
                #expect($0.headers[.cacheControl] == "no-store")
                let state = try Self.json($0.body)
                #expect(state["phase"] as? String == "idle" && state["recording"] as? Bool == false)
            }
            let policy = "default-src 'self'; img-src 'self' data:; media-src 'self'; connect-src 'self'; style-src 'self'; script-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
            for uri in ["/api/state", "/api/no-such-thing", "/", "/no-such-page", "/assets/app.js"] {
                try await client.execute(uri: uri, method: .get) {
                    #expect($0.headers[values: .contentSecurityPolicy] == [policy], "\(uri)")
                    #expect($0.headers[values: .xContentTypeOptions] == ["nosniff"], "\(uri)")
                    #expect($0.headers[values: HTTPField.Name("X-Frame-Options")!] == ["DENY"], "\(uri)")
                    #expect($0.headers[values: HTTPField.Name("Referrer-Policy")!] == ["same-origin"], "\(uri)")
                }
            }
            try await client.execute(uri: "/api/no-such-thing", method: .get) {
                #expect($0.headers[.cacheControl] == "no-store")
                #expect(Self.errorMessage($0.body) == "There is no GET /api/no-such-thing in the API. The server describes its API at /api/openapi.yaml.")
            }
        }
    }

    @Test("a float take exported to a format that holds integers only becomes 24-bit; nothing else is converted")
    func exportPolicy() async throws {
        let f = try await fixture()
        await f.server.finishForShutdown()
        let flac = try #require(f.studio.encoders.first { $0.name == "flac" })
        let wav = try #require(f.studio.encoders.first { $0.name == "wav" })
        func take(_ sampleFormat: SampleFormat) -> Take {
            Take(id: "t", sessionID: "s", name: "T", number: 1, createdAt: Date(), state: .complete,
                 format: AudioFormat(sampleRate: 48000, channels: 2, sampleFormat: sampleFormat), encoding: "wav", file: "x", frames: 1)
        }
        #expect(ExportPolicy.sampleFormat(for: [take(.f32)], encoder: flac) == .s24)
        #expect(ExportPolicy.sampleFormat(for: [take(.s16), take(.f32)], encoder: flac) == .s24)
        #expect(ExportPolicy.sampleFormat(for: [take(.s16), take(.s24)], encoder: flac) == nil)
        #expect(ExportPolicy.sampleFormat(for: [take(.f32)], encoder: wav) == nil)
    }

    @Test("requests that change something must come from the page, a script header or a bearer token")
    func crossSite() async throws {
        let f = try await fixture()
        try await serving(f) { client in
            try await client.execute(uri: "/api/stop", method: .post) {
                #expect($0.status == .forbidden)
                #expect(Self.errorCode($0.body) == "cross-site")
            }
            try await client.execute(uri: "/api/stop", method: .post, headers: [.origin: "http://evil.example"]) {
                #expect(Self.errorCode($0.body) == "cross-site")
            }
            try await client.execute(uri: "/api/stop", method: .post, headers: [.origin: "http://localhost.evil.example"]) {
                #expect(Self.errorCode($0.body) == "cross-site")
            }
            try await client.execute(uri: "/api/stop", method: .post, headers: [HTTPField.Name("Sec-Fetch-Site")!: "cross-site", HTTPField.Name("X-Tapedeck-Request")!: "1"]) {
                #expect(Self.errorCode($0.body) == "cross-site")
            }
            // The page's own origin passes (and is then refused only because nothing records); the test
            // client names the host without its port, as a browser does for port 80.
            try await client.execute(uri: "/api/stop", method: .post, headers: [.origin: "http://localhost", HTTPField.Name("Sec-Fetch-Site")!: "same-origin"]) {
                #expect(Self.errorCode($0.body) == "not-recording")
            }
            // Reading needs nothing.
            try await client.execute(uri: "/api/state", method: .get) { #expect($0.status == .ok) }
            try await client.execute(uri: "/", method: .get) {
                #expect($0.status == .ok)
                #expect($0.headers[.contentSecurityPolicy]?.contains("script-src 'self'") == true)
                #expect(String(buffer: $0.body).contains("<form id=\"transport\""))
            }
        }
    }

    @Test("with a token: none or a wrong one is refused, a bearer token and the login cookie pass, and logins are rate-limited")
    func token() async throws {
        let token = AccessToken(value: String(repeating: "ab", count: 32))
        let f = try await fixture(token: token, requireToken: true)
        try await serving(f) { client in
            try await client.execute(uri: "/api/state", method: .get) {
                #expect($0.status == .unauthorized)
                #expect(Self.errorCode($0.body) == "token-required")
                #expect($0.headers[.wwwAuthenticate]?.hasPrefix("Bearer") == true)
            }
            try await client.execute(uri: "/api/state", method: .get, headers: [.authorization: "Bearer nope"]) {
                #expect($0.status == .unauthorized)
                #expect(Self.errorCode($0.body) == "wrong-token")
            }
            try await client.execute(uri: "/sessions/x?page=2", method: .get) {
                #expect($0.status == .seeOther)
                #expect($0.headers[.location] == "/login?next=%2Fsessions%2Fx%3Fpage%3D2")
            }
            try await client.execute(uri: "/api/state", method: .get, headers: [.authorization: "Bearer \(token.value)"]) { #expect($0.status == .ok) }
            // A bearer token is enough for a change: no browser sends one on its own.
            try await client.execute(uri: "/api/stop", method: .post, headers: [.authorization: "Bearer \(token.value)"]) {
                #expect(Self.errorCode($0.body) == "not-recording")
            }
            try await client.execute(uri: "/assets/app.js", method: .get) { #expect($0.status == .ok) }
            try await client.execute(uri: "/api/health", method: .get) { #expect((try? Self.json($0.body))?["tokenRequired"] as? Bool == true) }

            let form: HTTPFields = [.contentType: "application/x-www-form-urlencoded", .origin: "http://localhost"]
            try await client.execute(uri: "/login", method: .post, headers: form, body: Self.body("token=\(token.value)&next=%2Fdoctor")) {
                #expect($0.status == .seeOther)
                #expect($0.headers[.location] == "/doctor")
                let cookie = $0.headers[.setCookie] ?? ""
                #expect(cookie.contains("tapedeck_token=\(token.value)") && cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"))
            }
            try await client.execute(uri: "/api/state", method: .get, headers: [.cookie: "tapedeck_token=\(token.value)"]) { #expect($0.status == .ok) }
            // A login to another site's page is never where it sends the browser.
            try await client.execute(uri: "/login", method: .post, headers: form, body: Self.body("token=\(token.value)&next=%2F%2Fevil.example")) {
                #expect($0.headers[.location] == "/")
            }
            // One wrong bearer token above; three wrong logins and one more bearer make five.
            for _ in 0..<3 {
                try await client.execute(uri: "/login", method: .post, headers: form, body: Self.body("token=wrong")) { #expect($0.status == .unauthorized) }
            }
            // Wrong bearer tokens count as well.
            try await client.execute(uri: "/api/state", method: .get, headers: [.authorization: "Bearer wrong"]) { #expect($0.status == .unauthorized) }
            try await client.execute(uri: "/api/state", method: .get, headers: [.authorization: "Bearer \(token.value)"]) {
                #expect($0.status == .tooManyRequests)
            }
            try await client.execute(uri: "/login", method: .post, headers: form, body: Self.body("token=\(token.value)")) {
                #expect($0.status == .tooManyRequests)
                #expect(Int($0.headers[.retryAfter] ?? "") ?? 0 > 0)
            }
        }
    }

    @Test("the live socket sends the state (to a script with the bearer token), and a recording's meters move")
    func liveSocket() async throws {
        let token = AccessToken(value: String(repeating: "cd", count: 32))
        let f = try await fixture(token: token, requireToken: true)
        let bearer: HTTPFields = [.authorization: "Bearer \(token.value)"]
        try await serving(f) { client in
            try await client.execute(uri: "/api/record", method: .post, headers: bearer, body: Self.body(#"{"session": "Live"}"#)) { #expect($0.status == .accepted) }
            let levels = LevelBox()
            var configuration = WebSocketClientConfiguration()
            // (This client sends `Origin: ws://localhost`, which no page of this server has: only
            // the token lets it in, as it would let a script in.)
            configuration.additionalHeaders = bearer
            try await client.ws("/api/live", configuration: configuration) { inbound, outbound, _ in
                var count = 0
                for try await message in inbound.messages(maxSize: 1 << 20) {
                    guard case .text(let text) = message,
                          let state = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] else { continue }
                    if let channels = state["channels"] as? [[String: Any]], let level = channels.first?["level"] as? Double {
                        levels.append(level)
                    }
                    count += 1
                    if count >= 15 { break }
                }
                try await outbound.close(.normalClosure, reason: nil)
            }
            try await client.execute(uri: "/api/stop", method: .post, headers: bearer) { #expect($0.status == .accepted) }
            // The null backend's sine at half scale reads about −6 dBFS.
            #expect(levels.values.contains { abs($0 + 6.02) < 0.5 }, "\(levels.values)")
        }
    }

    @Test("listen addresses are parsed as users write them; off the loopback address a token is required")
    func options() throws {
        let file = URL(fileURLWithPath: "/tmp/t")
        #expect(try ServerOptions(listen: "127.0.0.1:8470", tokenFile: file).requiresToken == false)
        #expect(try ServerOptions(listen: "0.0.0.0:80", tokenFile: file).requiresToken == true)
        #expect(try ServerOptions(listen: "[::1]:9000", tokenFile: file).host == "::1")
        #expect(try ServerOptions(listen: ":9000", tokenFile: file).host == "0.0.0.0")
        #expect(try ServerOptions(listen: "9000", tokenFile: file).host == "127.0.0.1")
        for bad in ["", "host:", "1.2.3.4:99999", "a b:80", "[::1", "x:y"] {
            #expect(throws: TapedeckError.self, "\(bad)") { try ServerOptions(listen: bad, tokenFile: file) }
        }
        #expect(FileResponse.parseRange("bytes=0-", size: 10) == .range(0, 9))
        #expect(FileResponse.parseRange("bytes=5-100", size: 10) == .range(5, 9))
        #expect(FileResponse.parseRange("bytes=-3", size: 10) == .range(7, 9))
        #expect(FileResponse.parseRange("bytes=10-", size: 10) == .unsatisfiable)
        #expect(FileResponse.parseRange("bytes=0-1,3-4", size: 10) == .whole)
        #expect(FileResponse.parseRange("items=0-1", size: 10) == .whole)
        #expect(FileResponse.parseRange("bytes=4-2", size: 10) == .whole)
        #expect(FileResponse.parseRange("bytes=-0", size: 10) == .unsatisfiable)
        #expect(FileResponse.parseRange("bytes=0-", size: 0) == .unsatisfiable)
        // Only this machine's names and addresses pass the Host check (DNS rebinding).
        for host in ["localhost:8470", "127.0.0.1:8470", "127.1.2.3", "[::1]:8470", "app.localhost:80"] {
            #expect(AccessGuard.isLocalHost(host), "\(host)")
        }
        for host in ["127.0.0.1.attacker.example:8470", "127.0.0.1evil", "[::1]evil", "127.0.0.1 evil", "evil.example", "", "[::2]:80", "0.0.0.0:8470"] {
            #expect(!AccessGuard.isLocalHost(host), "\(host)")
        }
        #expect(try ServerOptions(listen: "127.0.0.2:1", tokenFile: file).requiresToken == false)
        #expect(try ServerOptions(listen: "127.foo.lan:1", tokenFile: file).requiresToken == true)
        // An Origin names its port, or its scheme's.
        #expect(AccessGuard.origin("http://127.0.0.1") == "127.0.0.1:80")
        #expect(AccessGuard.origin("https://Rec.Example.org") == "rec.example.org:443")
        #expect(AccessGuard.origin("http://[::1]:8470") == "[::1]:8470")
        #expect(AccessGuard.origin("null") == nil)
        #expect(AccessGuard.place("127.0.0.1:8470", https: false) == "127.0.0.1:8470")
        #expect(AccessGuard.place("rec.example.org", https: true) == "rec.example.org:443")
        // Where a login sends the browser stays on this server.
        for next in ["//evil.example", "/\t/evil.example", "/\\evil", "http://evil.example", "evil", "/a\nb", "/%0a"] {
            #expect(WebServer.localPath(next) == "/" || !next.hasPrefix("/") == false && WebServer.localPath(next) == next && !next.contains("\t"), "\(next)")
        }
        #expect(WebServer.localPath("//evil.example") == "/")
        #expect(WebServer.localPath("/\t/evil.example") == "/")
        #expect(WebServer.localPath("/doctor?x=1") == "/doctor?x=1")
    }

    @Test("the token file is made 0600 once and read back; one others may read is refused")
    func tokenFile() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("token-\(UUID().uuidString)/deeper")
        let file = folder.appendingPathComponent("serve-token")
        let (made, created) = try AccessToken.load(from: file)
        #expect(created && made.value.count == 64)
        let mode = try FileManager.default.attributesOfItem(atPath: file.path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        let (again, createdAgain) = try AccessToken.load(from: file)
        #expect(!createdAgain && again == made)
        #expect(made.matches(made.value) && !made.matches(String(made.value.dropLast())) && !made.matches(nil))
        chmod(file.path, 0o644)
        #expect(throws: TapedeckError.self) { try AccessToken.load(from: file) }
        // A file that cannot be made (sysfs refuses new files, even to root): its own message,
        // which names --token-file.
        let refused = #expect(throws: TapedeckError.self) { try AccessToken.load(from: URL(fileURLWithPath: "/sys/tapedeck-token")) }
        #expect(refused?.code == .io && refused?.message.contains("Could not make the token file /sys/tapedeck-token") == true
                && refused?.message.contains("--token-file") == true, "\(refused?.message ?? "")")
    }

    @Test("login failures are limited per address and in all; the limit in all never holds back an address that guessed nothing wrong (the owner)")
    func limiter() {
        let l = LoginLimiter(limit: 2, globalLimit: 3, window: 60)
        #expect(l.retryAfter("a", now: 0) == nil)
        l.failed("a", now: 0)
        l.failed("a", now: 1)
        #expect(l.retryAfter("a", now: 2) == 58)
        #expect(l.retryAfter("b", now: 2) == nil)
        l.failed("b", now: 3)
        // Three wrong guesses in all: "b" (one wrong) is held back, the owner "c" (none) is not.
        #expect(l.retryAfter("b", now: 4) != nil)
        #expect(l.retryAfter("c", now: 4) == nil)
        #expect(l.retryAfter("a", now: 61) == nil)
    }
}

/// Levels gathered by a WebSocket handler.
final class LevelBox: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: [Double] = []
    func append(_ v: Double) { lock.withLock { stored.append(v) } }
    var values: [Double] { lock.withLock { stored } }
}
