public import Hummingbird
import Foundation
import HTTPTypes
public import TapedeckCore

/// A refusal as the API gives it: an HTTP status and `{"error": {"code", "message"}}`, whose
/// message says what to do next (docs/openapi.yaml, `Error`). A plain value; any thread.
public struct APIError: HTTPResponseError, Sendable {
    public let status: HTTPResponse.Status
    public let code: String
    public let message: String

    public init(_ status: HTTPResponse.Status, _ code: String, _ message: String) {
        self.status = status
        self.code = code
        self.message = message
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

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let data = try encoder.encode(Body(error: Inner(code: code, message: message)))
        return Response(status: status, headers: [.contentType: "application/json; charset=utf-8", .cacheControl: "no-store"],
                        body: ResponseBody(byteBuffer: ByteBuffer(bytes: data)))
    }
}

private struct Body: Encodable { var error: Inner }
private struct Inner: Encodable { var code: String; var message: String }
