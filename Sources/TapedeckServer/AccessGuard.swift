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
///   the browser to `/login`. Wrong tokens, as a header, a cookie or at `/login`, count toward
///   the address's ``LoginLimiter``: past its limit every token from there is refused (429).
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
    /// Counts wrong tokens, at the login page, as bearer headers and as cookies alike.
    public let limiter: LoginLimiter

    /// The cookie the login page sets.
    public static var cookieName: String { "tapedeck_token" }
    /// The header scripts send instead of an `Origin`.
    public static var scriptHeader: HTTPField.Name { HTTPField.Name("X-Tapedeck-Request")! }

    public init(token: AccessToken?, loopbackOnly: Bool, limiter: LoginLimiter) {
        self.token = token
        self.loopbackOnly = loopbackOnly
        self.limiter = limiter
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
            let cookie = Self.isPublic(path) ? nil : request.cookies[Self.cookieName]?.value
            if let auth = request.headers[.authorization], auth.lowercased().hasPrefix("bearer ") {
                try refuseWhileLimited(context.peer)
                guard token.matches(String(auth.dropFirst(7)).trimmingCharacters(in: .whitespaces)) else {
                    limiter.failed(context.peer)
                    throw APIError(.unauthorized, "wrong-token", "The token is wrong. It is in the server's token file (see `tapedeck serve --help`).")
                }
                context.bearerAuthenticated = true
            } else if let cookie {
                // A cookie is a guess like any other: limited and counted (the same wrong cookie
                // once, so that a browser still holding an old token is not locked out by it).
                try refuseWhileLimited(context.peer)
                guard token.matches(cookie) else {
                    limiter.failed(context.peer, guess: cookie)
                    return try Self.tokenRequired(request, context: context)
                }
            } else if !Self.isPublic(path) {
                return try Self.tokenRequired(request, context: context)
            }
        }
        if changes, !context.bearerAuthenticated {
            if let refusal = Self.crossSiteRefusal(request, host: host) {
                throw APIError(.forbidden, "cross-site", refusal)
            }
        }
        return try await next(request, context)
    }

    /// 429 while `peer` has given too many wrong tokens.
    func refuseWhileLimited(_ peer: String) throws {
        if let wait = limiter.retryAfter(peer) {
            throw APIError(.tooManyRequests, "too-many-tries", "Too many wrong tokens from this address. Try again in \(wait) s.",
                           headers: [.retryAfter: String(wait)])
        }
    }

    /// A request without the token: 401 from the API, the login page for a person's browser.
    static func tokenRequired(_ request: Request, context: ServerContext) throws -> Response {
        guard request.uri.path.hasPrefix("/api/") else {
            return Response(status: .seeOther, headers: [.location: "/login?next=" + Self.safeNext(request.uri.description)])
        }
        var response = try APIError(.unauthorized, "token-required",
            "This server asks for its token: send `Authorization: Bearer TOKEN` (the token is in the server's token file), or log in at /login.")
            .response(from: request, context: context)
        response.headers[.wwwAuthenticate] = "Bearer realm=\"tapedeck\""
        return response
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
            let https = request.headers[HTTPField.Name("X-Forwarded-Proto")!]?.lowercased() == "https"
            let forwarded = request.headers[HTTPField.Name("X-Forwarded-Host")!]
            guard let originPlace = Self.origin(origin),
                  originPlace == Self.place(host, https: false) || forwarded.map({ originPlace == Self.place($0, https: https) }) == true else {
                return "A page of another site (\(origin)) may not change anything here. Use this server's own page, or send the token as `Authorization: Bearer TOKEN`."
            }
            return nil
        }
        if request.headers[scriptHeader] != nil { return nil }
        return "A request that changes something must come from this server's page (with its Origin), or carry the header `X-Tapedeck-Request: 1` or `Authorization: Bearer TOKEN`."
    }

    /// An `Origin` as `host:port` (lowercase, IPv6 in brackets, the scheme's default port
    /// written out); `nil` for `null` or anything but http and https.
    static func origin(_ text: String) -> String? {
        guard let c = URLComponents(string: text), let scheme = c.scheme?.lowercased(), scheme == "http" || scheme == "https",
              var host = c.host?.lowercased(), !host.isEmpty else { return nil }
        if host.contains(":"), !host.hasPrefix("[") { host = "[\(host)]" }
        return "\(host):\(c.port ?? (scheme == "https" ? 443 : 80))"
    }

    /// A Host (or X-Forwarded-Host) as `host:port`, with the default port of the scheme the
    /// request came by when it names none.
    static func place(_ text: String, https: Bool) -> String {
        let s = text.lowercased()
        if s.hasPrefix("["), let close = s.firstIndex(of: "]") {
            let port = s[s.index(after: close)...].dropFirst()
            return "\(s[...close]):\(port.isEmpty ? (https ? "443" : "80") : String(port))"
        }
        if let colon = s.lastIndex(of: ":"), s.firstIndex(of: ":") == colon {
            return "\(s[..<colon]):\(s[s.index(after: colon)...])"
        }
        return "\(s):\(https ? 443 : 80)"
    }

    /// Whether a Host header names this machine: `localhost` (or a name under `.localhost`,
    /// which browsers never look up), an IPv4 address in 127.0.0.0/8, or `[::1]`. Names that
    /// merely start with "127." are someone else's (DNS rebinding).
    static func isLocalHost(_ host: String) -> Bool {
        let h = host.lowercased()
        let name: String
        func isPort(_ s: Substring) -> Bool { s.isEmpty || (s.first == ":" && s.count > 1 && s.dropFirst().allSatisfy(\.isASCII) && s.dropFirst().allSatisfy(\.isNumber)) }
        if h.hasPrefix("[") {
            guard let close = h.firstIndex(of: "]"), isPort(h[h.index(after: close)...]) else { return false }
            name = String(h[h.index(after: h.startIndex)..<close])
            return ServerOptions.isLoopbackAddress(name)
        }
        let colon = h.firstIndex(of: ":") ?? h.endIndex
        guard isPort(h[colon...]) else { return false }
        name = String(h[..<colon])
        return name == "localhost" || (name.hasSuffix(".localhost") && name.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "." })
            || ServerOptions.isLoopbackAddress(name)
    }

    /// A `next` that stays on this server (see ``WebServer/localPath(_:)``), percent-encoded.
    static func safeNext(_ uri: String) -> String {
        WebServer.localPath(uri).addingPercentEncoding(withAllowedCharacters: .rfc3986Unreserved) ?? "/"
    }
}

extension CharacterSet {
    /// RFC 3986's unreserved characters (ASCII letters, digits, `-._~`).
    static let rfc3986Unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
}

/// Counts wrong tokens per address: after ``limit`` failures within ``window`` the address is
/// refused (429) until the oldest falls out of the window; all addresses together get
/// ``globalLimit`` in the same window (a guesser with many addresses), which holds back only
/// addresses that guessed wrong themselves: an address with no wrong guess is never refused, so
/// others' guessing cannot lock the owner out. Any thread; never blocks
/// beyond a lock held for a dictionary update.
public final class LoginLimiter: Sendable {
    public let limit: Int
    public let globalLimit: Int
    public let window: Double
    private let failures = Mutex<[String: [Double]]>([:])
    /// Per address, the wrong guesses counted once only (cookies) and when each was counted.
    private let guesses = Mutex<[String: [Int: Double]]>([:])

    public init(limit: Int = 5, globalLimit: Int = 200, window: Double = 60) {
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
            // Only an address that guessed wrong itself: others' guessing never locks out the
            // owner, who sends the right token.
            if !mine.isEmpty, every.count >= globalLimit, let oldest = every.min() { return max(1, Int((oldest + window - now).rounded(.up))) }
            return nil
        }
    }

    /// Counts a wrong token from `peer`. - Parameter guess: the wrong token, when the same one
    /// given again within ``window`` is not counted again (a cookie a browser sends with every
    /// request: one stale cookie must not lock its owner out, and repeating a guess learns nothing).
    public func failed(_ peer: String, guess: String? = nil, now: Double = Date().timeIntervalSince1970) {
        if let guess {
            let window = self.window
            let seen = guesses.withLock { all -> Bool in
                for (k, v) in all {
                    let kept = v.filter { now - $0.value < window }
                    all[k] = kept.isEmpty ? nil : kept
                }
                if all[peer]?[guess.hashValue] != nil { return true }
                all[peer, default: [:]][guess.hashValue] = now
                return false
            }
            if seen { return }
        }
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
