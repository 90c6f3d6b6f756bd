public import Hummingbird
import HTTPTypes
public import TapedeckCore

/// A refusal as the API gives it: an HTTP status and `{"error": {"code", "message"}}`, whose
/// message says what to do next (docs/openapi.yaml, `Error`). A plain value; any thread. Never blocks.
public struct APIError: HTTPResponseError, Sendable {
    public let status: HTTPResponse.Status
    public let code: String
    public let message: String
    /// Headers the refusal carries (`Allow` for 405, `Retry-After` for 429, `Upgrade` for 426).
    public let headers: HTTPFields

    public init(_ status: HTTPResponse.Status, _ code: String, _ message: String, headers: HTTPFields = [:]) {
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers
    }

    /// A library or recorder failure, with the status its code stands for.
    public init(_ error: TapedeckError) {
        let status: HTTPResponse.Status = switch error.code {
        case .notFound: .notFound
        case .invalidArgument, .confirmationRequired, .unsupportedFormat: .badRequest
        case .alreadyExists, .busy: .conflict
        case .deviceUnavailable, .deviceLost, .configuration: .serviceUnavailable
        case .diskFull: HTTPResponse.Status(code: 507, reasonPhrase: "Insufficient Storage")
        default: .internalServerError
        }
        self.init(status, error.code.rawValue, error.message)
    }

    /// The refusal as JSON, written by the context's response encoder.
    public func response(from request: Request, context: some RequestContext) throws -> Response {
        var response = try context.responseEncoder.encode(Body(error: Inner(code: code, message: message)), from: request, context: context)
        response.status = status
        for field in headers { response.headers[field.name] = field.value }
        return response
    }
}

private struct Body: Encodable { var error: Inner }
private struct Inner: Encodable { var code: String; var message: String }

/// The one place a failure becomes a response: an ``APIError`` as it is, a ``TapedeckError``
/// with the status its code stands for, and Hummingbird's
/// own refusals (no such route, a body too large) in the same shape. Under `/api/` the refusal is
/// JSON; elsewhere it is a page for a person's browser. Other errors go on to Hummingbird.
///
/// A plain value; any thread (the request's). Never blocks.
struct APIErrorMiddleware: RouterMiddleware {
    typealias Context = ServerContext

    func handle(_ request: Request, context: ServerContext, next: (Request, ServerContext) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as APIError {
            return try Self.refusal(error, request, context)
        } catch let error as TapedeckError {
            return try Self.refusal(APIError(error), request, context)
        } catch let error as any HTTPResponseError {
            let refusal = error.status == .notFound
                ? APIError(.notFound, "not-found", request.uri.path.hasPrefix("/api/")
                    ? "There is no \(request.method) \(request.uri.path) in the API. The server describes its API at /api/openapi.yaml."
                    : "There is no page at \(request.uri.path).")
                : APIError(error.status, "refused", "\(error.status.code) \(error.status.reasonPhrase).")
            return try Self.refusal(refusal, request, context)
        }
    }

    /// A refusal: JSON for the API, a page for a person's browser.
    static func refusal(_ error: APIError, _ request: Request, _ context: ServerContext) throws -> Response {
        guard !request.uri.path.hasPrefix("/api/") else { return try error.response(from: request, context: context) }
        let body = "<h1>\(error.status.code) \(PageRenderer.escape(error.status.reasonPhrase))</h1>\n<p class=\"message\">\(PageRenderer.escape(error.message))</p>\n<p><a href=\"/\">Back to the library</a></p>"
        var response = WebServer.html(PageRenderer.page(title: error.status.reasonPhrase, body: body, version: TapedeckVersion.string), status: error.status)
        for field in error.headers { response.headers[field.name] = field.value }
        return response
    }
}
