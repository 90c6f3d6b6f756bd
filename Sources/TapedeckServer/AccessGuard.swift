public import Hummingbird
public import Foundation
import HTTPTypes
import Synchronization

/// Who may do what: every request passes here first.
///
/// - **Host**: on the loopback address, the Host header must name this machine (`localhost`,
///   `127.0.0.1`, `[::1]`), so a web page on another name that resolves here (DNS rebinding)
///   gets nothing.
/// - **Token** (off the loopback address, or with `--require-token`): as `Authorization: Bearer
///   TOKEN`, or the cookie the login page sets. Without it the API answers 401 and pages send
///   the browser to `/login`.
/// - **Cross-site requests**: a request that changes something (POST, PATCH, DELETE) or opens
///   the live socket must come from this server's own page (its `Origin` names this host, and
///   `Sec-Fetch-Site` is not another site's), or carry the token as a bearer header, or the
///   header `X-Tapedeck-Request` (which no page of another site can send without asking first,
///   and that question is never answered).
///
/// Plain values; any thread. Never blocks.
public struct AccessGuard: RouterMiddleware {
    public typealias Context = ServerContext
    public let token: AccessToken?
    public let loopbackOnly: Bool

    /// The cookie the login page sets.
    public static var cookieName: String { "tapedeck_token" }
    /// The header scripts send instead of an `Origin`.
    public static var scriptHeader: HTTPField.Name { HTTPField.Name("X-Tapedeck-Request")! }

    public init(token: AccessToken?, loopbackOnly: Bool) {
        self.token = token
        self.loopbackOnly = loopbackOnly
    }

    public func handle(_ request: Request, context: ServerContext, next: (Request, ServerContext) async throws -> Response) async throws -> Response {
        var context = context
        let path = request.uri.path
        let host = request.head.authority ?? ""
        if loopbackOnly, !Self.isLocalHost(host) {
            throw APIError(.forbidden, "forbidden-host",
                "This server listens on this machine only and answers to localhost, 127.0.0.1 or [::1], not \"\(host)\". Open http://127.0.0.1:PORT/, or start it with --listen ADDRESS:PORT to reach it from elsewhere.")
        }
        let changes = ![.get, .head, .options].contains(request.method) || request.headers[.upgrade]?.lowercased() == "websocket"
        if let token {
            if let auth = request.headers[.authorization], auth.lowercased().hasPrefix("bearer ") {
                guard token.matches(String(auth.dropFirst(7)).trimmingCharacters(in: .whitespaces)) else {
                    throw APIError(.unauthorized, "wrong-token", "The token is wrong. It is in the server's token file (see `tapedeck serve --help`).")
                }
                context.bearerAuthenticated = true
            } else if !token.matches(request.cookies[Self.cookieName]?.value), !Self.isPublic(path) {
                if path.hasPrefix("/api/") {
                    var response = try APIError(.unauthorized, "token-required",
                        "This server asks for its token: send `Authorization: Bearer TOKEN` (the token is in the server's token file), or log in at /login.")
                        .response(from: request, context: context)
                    response.headers[.wwwAuthenticate] = "Bearer realm=\"tapedeck\""
                    return response
                }
                return Response(status: .seeOther, headers: [.location: "/login?next=" + Self.safeNext(request.uri.description)])
            }
        }
        if changes, !context.bearerAuthenticated {
            if let refusal = Self.crossSiteRefusal(request, host: host) {
                throw APIError(.forbidden, "cross-site", refusal)
            }
        }
        return try await next(request, context)
    }

    /// Paths anyone may load: the login page and the page's own script and style.
    static func isPublic(_ path: String) -> Bool {
        path == "/login" || path.hasPrefix("/assets/") || path == "/api/health"
    }

    /// Why a request that changes something is refused as cross-site, or `nil`.
    static func crossSiteRefusal(_ request: Request, host: String) -> String? {
        let fetchSite = request.headers[HTTPField.Name("Sec-Fetch-Site")!]?.lowercased()
        if let fetchSite, fetchSite != "same-origin", fetchSite != "none" {
            return "A page of another site may not change anything here (Sec-Fetch-Site: \(fetchSite)). Use this server's own page, or send the token as `Authorization: Bearer TOKEN`."
        }
        if let origin = request.headers[.origin] {
            let forwarded = request.headers[HTTPField.Name("X-Forwarded-Host")!]
            guard let originHost = URLComponents(string: origin).flatMap({ c in c.host.map { h in c.port.map { "\(h):\($0)" } ?? h } }),
                  Self.sameHost(originHost, host) || forwarded.map({ Self.sameHost(originHost, $0) }) == true else {
                return "A page of another site (\(origin)) may not change anything here. Use this server's own page, or send the token as `Authorization: Bearer TOKEN`."
            }
            return nil
        }
        if request.headers[scriptHeader] != nil { return nil }
        return "A request that changes something must come from this server's page (with its Origin), or carry the header `X-Tapedeck-Request: 1` or `Authorization: Bearer TOKEN`."
    }

    /// Whether two `host[:port]` texts name the same place (the default port may be left out).
    static func sameHost(_ a: String, _ b: String) -> Bool {
        func split(_ s: String) -> (String, String) {
            let s = s.lowercased()
            if s.hasPrefix("["), let close = s.firstIndex(of: "]") {
                let port = s[s.index(after: close)...].dropFirst()
                return (String(s[...close]), String(port))
            }
            if let colon = s.lastIndex(of: ":"), s.firstIndex(of: ":") == colon {
                return (String(s[..<colon]), String(s[s.index(after: colon)...]))
            }
            return (s, "")
        }
        let (ha, pa) = split(a), (hb, pb) = split(b)
        let hostA = ha.hasPrefix("[") ? ha : (ha.contains(":") ? "[\(ha)]" : ha)
        let hostB = hb.hasPrefix("[") ? hb : (hb.contains(":") ? "[\(hb)]" : hb)
        return hostA == hostB && (pa == pb || pa.isEmpty || pb.isEmpty)
    }

    /// Whether a Host header names this machine.
    static func isLocalHost(_ host: String) -> Bool {
        let h = host.lowercased()
        let name: Substring
        if h.hasPrefix("[") { name = h.prefix { $0 != "]" }.dropFirst() } else { name = h.split(separator: ":", maxSplits: 1).first ?? "" }
        return name == "localhost" || name == "::1" || name.hasPrefix("127.") || name.hasSuffix(".localhost")
    }

    /// A `next` that stays on this server (a path, never another site), percent-encoded.
    static func safeNext(_ uri: String) -> String {
        let local = uri.hasPrefix("/") && !uri.hasPrefix("//") && !uri.contains("\\") ? uri : "/"
        return local.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "/"
    }
}

/// Counts failed logins per address: after ``limit`` failures within ``window`` the address is
/// refused (429) until the oldest falls out of the window; all addresses together get
/// ``globalLimit`` in the same window (a guesser with many addresses). Any thread; never blocks
/// beyond a lock held for a dictionary update.
public final class LoginLimiter: Sendable {
    public let limit: Int
    public let globalLimit: Int
    public let window: Double
    private let failures = Mutex<[String: [Double]]>([:])

    public init(limit: Int = 5, globalLimit: Int = 30, window: Double = 60) {
        self.limit = limit
        self.globalLimit = globalLimit
        self.window = window
    }

    /// Seconds to wait before `peer` may try again, or `nil` when it may now.
    public func retryAfter(_ peer: String, now: Double = Date().timeIntervalSince1970) -> Int? {
        failures.withLock { all in
            prune(&all, now)
            let mine = all[peer] ?? []
            let every = all.values.flatMap { $0 }
            if mine.count >= limit, let oldest = mine.min() { return max(1, Int((oldest + window - now).rounded(.up))) }
            if every.count >= globalLimit, let oldest = every.min() { return max(1, Int((oldest + window - now).rounded(.up))) }
            return nil
        }
    }

    public func failed(_ peer: String, now: Double = Date().timeIntervalSince1970) {
        failures.withLock { all in
            prune(&all, now)
            all[peer, default: []].append(now)
        }
    }

    private func prune(_ all: inout [String: [Double]], _ now: Double) {
        for (k, v) in all {
            let kept = v.filter { now - $0 < window }
            all[k] = kept.isEmpty ? nil : kept
        }
    }
}
