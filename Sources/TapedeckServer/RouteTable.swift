import Hummingbird
import HTTPTypes
import Synchronization

/// Every route the server has (path pattern and methods), as it was added to the router: so a
/// request with a method its path does not take is answered `405 Method Not Allowed` with an
/// `Allow` header, not `404` (``MethodGuard``). `HEAD` is allowed wherever `GET` is (the router
/// answers it as `GET` without the body).
///
/// Filled on the main actor while the router is made; read by requests on any thread. Never
/// blocks beyond a lock held for a lookup.
final class RouteTable: Sendable {
    private let routes = Mutex<[(path: RouterPath, methods: Set<HTTPRequest.Method>)]>([])

    func add(_ path: RouterPath, _ method: HTTPRequest.Method) {
        routes.withLock { all in
            if let i = all.firstIndex(where: { $0.path == path }) {
                all[i].methods.insert(method)
            } else {
                all.append((path, [method]))
            }
        }
    }

    /// The methods routes of `path` take (with `HEAD` where `GET` is), or `nil` when no route
    /// has that path.
    func methods(for path: String) -> Set<HTTPRequest.Method>? {
        let segments = path.split(separator: "/", omittingEmptySubsequences: true)
        let found = routes.withLock { all in
            all.filter { route in
                route.path.count == segments.count && zip(route.path, segments).allSatisfy { element, segment in element ~= segment }
            }.reduce(into: Set<HTTPRequest.Method>()) { $0.formUnion($1.methods) }
        }
        guard !found.isEmpty else { return nil }
        return found.contains(.get) ? found.union([.head]) : found
    }
}

/// A router that writes each route it is given into a ``RouteTable`` before passing it on.
/// A plain value; made and used on the main actor while the router is made.
struct RecordedRoutes: RouterMethods {
    typealias Context = ServerContext
    let router: Router<ServerContext>
    let table: RouteTable

    @discardableResult func on<Responder: HTTPResponder>(_ path: RouterPath, method: HTTPRequest.Method, responder: Responder) -> Self
    where Responder.Context == ServerContext {
        router.on(path, method: method, responder: responder)
        table.add(path, method)
        return self
    }

    @discardableResult func add(middleware: any MiddlewareProtocol<Request, Response, ServerContext>) -> Self {
        router.add(middleware: middleware)
        return self
    }
}

/// Answers a request whose path has routes but none for its method: `405` with the methods it
/// takes in `Allow` (before the access checks: a method no route has changes nothing, so it
/// needs no token and cannot be a cross-site change). Other requests pass on. A plain value;
/// any thread. Never blocks.
struct MethodGuard: RouterMiddleware {
    typealias Context = ServerContext
    let routes: RouteTable

    func handle(_ request: Request, context: ServerContext, next: (Request, ServerContext) async throws -> Response) async throws -> Response {
        if let allowed = routes.methods(for: request.uri.path), !allowed.contains(request.method) {
            let allow = allowed.map(\.rawValue).sorted().joined(separator: ", ")
            throw APIError(.methodNotAllowed, "method-not-allowed",
                           "\(request.uri.path) does not take \(request.method.rawValue.prefix(32)); it takes \(allow). The server describes its API at /api/openapi.yaml.",
                           headers: [.allow: allow])
        }
        return try await next(request, context)
    }
}
