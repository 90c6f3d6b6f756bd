import Hummingbird
import HummingbirdWebSocket
import HTTPTypes
import NIOCore
import TapedeckApp
import TapedeckCore
import Foundation

/// The pages, their assets, the login, and the live state as a WebSocket and as Server-Sent Events.
extension WebServer {
    nonisolated static func html(_ text: String, status: HTTPResponse.Status = .ok) -> Response {
        Response(status: status, headers: [.contentType: "text/html; charset=utf-8", .cacheControl: "no-store"],
                 body: ResponseBody(byteBuffer: ByteBuffer(string: text)))
    }

    /// Whether the request came with the login cookie (for the "Log out" button).
    func signedIn(_ request: Request) -> Bool {
        token != nil && token!.matches(request.cookies[AccessGuard.cookieName]?.value)
    }

    /// `?page=N` (clamped to the pages there are when rendered); anything but a number is refused.
    nonisolated static func page(_ request: Request) throws -> Int {
        try number(request, "page", in: 1...Int(Int32.max), fallback: 1)
    }

    func addPages(to router: RecordedRoutes) {
        router.get("/") { @MainActor request, _ in
            let sessions = try await self.library.sessions()
            return Self.html(PageRenderer.home(sessions: sessions, page: try Self.page(request), version: self.parts.version, signedIn: self.signedIn(request),
                                               schedule: self.parts.schedule.map { PageRenderer.ScheduleShown($0, from: Date()) },
                                               fleet: self.fleet?.state()))
        }
        router.get("sessions/:id") { @MainActor request, context in
            let s = try await self.library.session(context.parameters.require("id"))
            return Self.html(PageRenderer.session(s, page: try Self.page(request), exportFormats: self.parts.exportFormats,
                                                      defaultFormat: self.parts.defaultExportFormat, version: self.parts.version, signedIn: self.signedIn(request)))
        }
        router.get("takes/:id") { @MainActor request, context in
            let (t, s) = try await self.library.take(context.parameters.require("id"))
            return Self.html(PageRenderer.take(t, in: s, exportFormats: self.parts.exportFormats, defaultFormat: self.parts.defaultExportFormat, version: self.parts.version, signedIn: self.signedIn(request)))
        }
        router.get("metrics") { @MainActor _, _ in
            var libraryError: (any Error)?
            var sessionCount = 0
            do { sessionCount = try await self.library.sessions().count } catch { libraryError = error }
            let state = self.live.snapshot()
            let alerts = self.alertsWaiting()
            let retention = self.retentionDeleted()
            let facts = MetricsExporter.Facts(takesByState: self.library.takesByState, sessionCount: sessionCount, secondsSinceFrames: self.live.secondsSinceFrames(), alertsWaiting: alerts.count,
                                              retentionDeleted: retention,
                                              oldestAlertSeconds: alerts.oldestSeconds, uploadBacklog: self.uploadBacklog(),
                                              healthy: self.healthProblems(state, libraryError: libraryError).isEmpty, version: self.parts.version)
            return Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8", .cacheControl: "no-store"],
                            body: ResponseBody(byteBuffer: ByteBuffer(bytes: self.metrics.scrape(state, facts))))
        }
        router.get("doctor") { @MainActor request, _ in
            let findings = try await self.doctorFindings()
            return Self.html(PageRenderer.doctor(findings, version: self.parts.version, signedIn: self.signedIn(request)))
        }
        router.get("assets/:name") { @MainActor _, context in
            let name = try context.parameters.require("name")
            guard let asset = Self.assets[name] else { throw APIError(.notFound, "not-found", "No such asset.") }
            return Response(status: .ok, headers: [.contentType: asset.type, .cacheControl: "public, max-age=300"],
                            body: ResponseBody(byteBuffer: ByteBuffer(bytes: asset.bytes)))
        }

        router.get("login") { @MainActor request, context in
            let next = request.uri.queryParameters.get("next") ?? "/"
            guard let token = self.token else { return Response(status: .seeOther, headers: [.location: "/"]) }
            // A one-time link (printed by `serve`, scanned from its QR code): logs in once.
            if let once = request.uri.queryParameters.get("once") {
                if let wait = self.limiter.retryAfter(context.peer) {
                    var response = Self.html(PageRenderer.login(next: "/", message: "Too many wrong tokens. Try again in \(wait) s.", version: self.parts.version),
                                             status: .tooManyRequests)
                    response.headers[.retryAfter] = String(wait)
                    return response
                }
                guard self.loginLinks.redeem(String(once)) else {
                    self.limiter.failed(context.peer)
                    self.parts.logger.warning("A used, expired or wrong login link was opened from \(context.peer.isEmpty ? "an unknown address" : context.peer).")
                    return Self.html(PageRenderer.login(next: "/", message: "That login link was used already or has expired (a link logs in once, within 15 minutes). Log in with the token, or restart the server for a new link.",
                                                        version: self.parts.version), status: .unauthorized)
                }
                self.parts.logger.notice("Logged in with a one-time link from \(context.peer.isEmpty ? "an unknown address" : context.peer).")
                return Self.loggedIn(token: token, request: request, next: "/")
            }
            return Self.html(PageRenderer.login(next: Self.localPath(next), message: nil, version: self.parts.version))
        }
        router.post("login") { @MainActor request, context in
            guard let token = self.token else { return Response(status: .seeOther, headers: [.location: "/"]) }
            if let wait = self.limiter.retryAfter(context.peer) {
                var response = Self.html(PageRenderer.login(next: "/", message: "Too many wrong tokens. Try again in \(wait) s.", version: self.parts.version),
                                         status: .tooManyRequests)
                response.headers[.retryAfter] = String(wait)
                return response
            }
            let body = try await request.body.collect(upTo: 4096)
            struct Form: Decodable { var token: String?; var next: String? }
            let form = (try? URLEncodedFormDecoder().decode(Form.self, from: String(buffer: body))) ?? Form()
            let next = Self.localPath(form.next ?? "/")
            guard token.matches(form.token?.trimmingCharacters(in: .whitespacesAndNewlines)) else {
                self.limiter.failed(context.peer)
                self.parts.logger.warning("A wrong token was given at /login from \(context.peer.isEmpty ? "an unknown address" : context.peer).")
                return Self.html(PageRenderer.login(next: next, message: "That token is wrong.", version: self.parts.version), status: .unauthorized)
            }
            return Self.loggedIn(token: token, request: request, next: next)
        }
        router.post("logout") { @MainActor _, _ in
            var response = Response(status: .seeOther, headers: [.location: self.token == nil ? "/" : "/login"])
            response.setCookie(Cookie(name: AccessGuard.cookieName, value: "", maxAge: 0, path: "/", httpOnly: true, sameSite: .strict))
            return response
        }
    }

    /// The answer that logs a browser in: the token's cookie, and on to `next`.
    nonisolated static func loggedIn(token: AccessToken, request: Request, next: String) -> Response {
        var response = Response(status: .seeOther, headers: [.location: next])
        let secure = request.headers[HTTPField.Name("X-Forwarded-Proto")!]?.lowercased() == "https"
        response.setCookie(Cookie(name: AccessGuard.cookieName, value: token.value, maxAge: 30 * 24 * 3600, path: "/",
                                  secure: secure, httpOnly: true, sameSite: .strict))
        return response
    }

    /// A `next` that is a path on this server, never another site: it starts with one `/`, holds
    /// no backslash, whitespace or control character (browsers drop tabs and newlines, so
    /// `/\t/evil.example` would become `//evil.example`), and parses with no scheme or host.
    nonisolated static func localPath(_ text: String) -> String {
        guard text.hasPrefix("/"), !text.hasPrefix("//"), text.utf8.count <= 2048,
              !text.unicodeScalars.contains(where: { $0 == "\\" || $0.properties.isWhitespace || $0.properties.generalCategory == .control }),
              let c = URLComponents(string: text), c.scheme == nil, c.host == nil else { return "/" }
        return text
    }

    func addLive(to router: RecordedRoutes) {
        let live = self.live
        router.ws("api/live") { request, _ in
            // Without an upgrade (a plain GET, or HEAD), there is no socket to give: 426.
            guard request.headers[.upgrade]?.lowercased().contains("websocket") == true else {
                throw APIError(.upgradeRequired, "upgrade-required",
                               "/api/live is a WebSocket: open it with a WebSocket client (as the page does), or read the same state as Server-Sent Events from /api/events.",
                               headers: [.upgrade: "websocket"])
            }
            return .upgrade([:])
        } onUpgrade: { inbound, outbound, _ in
            let stream = live.subscribe()
            // The client's messages are not needed, but reading them handles pings and its close.
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    for try await _ in inbound {}
                }
                group.addTask {
                    for await text in stream { try await outbound.write(.text(text)) }
                }
                try await group.next()
                group.cancelAll()
            }
        }
        router.get("api/events") { request, _ in
            let headers: HTTPFields = [.contentType: "text/event-stream", .cacheControl: "no-store"]
            // HEAD: the headers alone, without becoming a listener.
            if request.method == .head { return Response(status: .ok, headers: headers) }
            let stream = live.subscribe()
            return Response(status: .ok, headers: headers,
                            body: ResponseBody { writer in
                                for await text in stream {
                                    try await writer.write(ByteBuffer(string: "event: state\ndata: \(text)\n\n"))
                                }
                                try await writer.finish(nil)
                            })
        }
    }

    /// The page's script and style: files of this module (Page/), embedded in the binary at
    /// build time, so an installed `tapedeck` needs nothing beside it.
    nonisolated static let assets: [String: (type: String, bytes: [UInt8])] = [
        "app.js": ("text/javascript; charset=utf-8", PackageResources.app_js),
        "app.css": ("text/css; charset=utf-8", PackageResources.app_css),
        "favicon.svg": ("image/svg+xml", PackageResources.favicon_svg),
    ]
}
