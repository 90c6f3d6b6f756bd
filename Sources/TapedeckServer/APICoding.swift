public import Hummingbird
import NIOCore
public import Foundation
import TapedeckCore

/// How the server writes JSON: every API body, refusal and live state (``ServerContext``'s
/// ``ServerContext/responseEncoder``). Keys sorted, slashes as they are, dates as ISO 8601 UTC
/// (docs/openapi.yaml); `Content-Type: application/json; charset=utf-8` and `Cache-Control:
/// no-store`. A plain value; any thread (the thread the route's response is made on). Never blocks.
public struct APIResponseEncoder: ResponseEncoder {
    public init() {}

    /// A `JSONEncoder` set up as every JSON of the server is written (a new one per use).
    public static func jsonEncoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(date.iso8601UTC)
        }
        return encoder
    }

    /// `value` as a 200 response; a route that answers otherwise wraps it in `EditedResponse`.
    public func encode(_ value: some Encodable, from request: Request, context: some RequestContext) throws -> Response {
        Response(status: .ok, headers: [.contentType: "application/json; charset=utf-8", .cacheControl: "no-store"],
                 body: ResponseBody(byteBuffer: ByteBuffer(bytes: try Self.jsonEncoder().encode(value))))
    }
}

/// How the server reads request bodies (``ServerContext``'s ``ServerContext/requestDecoder``):
/// a JSON object of at most the context's `maxUploadSize` bytes (an empty body is `{}`), parsed
/// once. A type that is an ``APIRequestBody`` takes only its ``APIRequestBody/keys``: a body that
/// names another key is refused (a typo must not quietly do something else), as is one that is
/// not such an object, saying what was expected. Every refusal is an ``APIError`` (400, or 413
/// for a body too large).
///
/// A plain value; any thread (the route's). Suspends while the body arrives; never blocks.
public struct APIRequestDecoder: RequestDecoder {
    public init() {}

    public func decode<T: Decodable>(_ type: T.Type, from request: Request, context: some RequestContext) async throws -> T {
        let buffer: ByteBuffer
        do { buffer = try await request.body.collect(upTo: context.maxUploadSize) } catch {
            throw APIError(.contentTooLarge, "too-large", "The request body is larger than \(context.maxUploadSize) bytes.")
        }
        let data = buffer.readableBytes == 0 ? Data("{}".utf8) : Data(buffer.readableBytesView)
        do {
            return try JSONDecoder().decode(CheckedBody<T>.self, from: data).body
        } catch let refusal as APIError {
            throw refusal
        } catch {
            throw APIError(.badRequest, "invalid-argument", "The body must be a JSON object like \(CheckedBody<T>.example).")
        }
    }
}

/// A JSON body a route accepts: the keys it may name, and an example of it that refusals show.
/// Its types are plain values; any thread.
protocol APIRequestBody: Decodable, Sendable {
    /// Every key the body may name (each optional unless the type says otherwise).
    static var keys: Set<String> { get }
    /// The body as a person would write it, e.g. `{"label": "chorus"}`.
    static var example: String { get }
}

/// `Body` decoded from a JSON object that names only the keys `Body` takes (when it is an
/// ``APIRequestBody``): the keys are checked before the body is decoded, from the same parse.
private struct CheckedBody<Body: Decodable>: Decodable {
    var body: Body

    /// The example a refusal shows (a generic one for a type that gives none).
    static var example: String { (Body.self as? any APIRequestBody.Type)?.example ?? "{…}" }

    init(from decoder: any Decoder) throws {
        if let shape = Body.self as? any APIRequestBody.Type {
            let given = try decoder.container(keyedBy: AnyKey.self).allKeys.map(\.stringValue)
            if let unknown = given.sorted().first(where: { !shape.keys.contains($0) }) {
                let known = shape.keys.sorted().map { "\"\($0)\"" }.joined(separator: ", ")
                throw APIError(.badRequest, "invalid-argument", "Unknown key \"\(unknown.prefix(64))\": this request takes \(known), as in \(shape.example).")
            }
        }
        body = try Body(from: decoder)
    }
}

/// Any key of a JSON object.
private struct AnyKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { return nil }
}

/// `GET /api/state` and the 202 answers of the recording's routes are the live state.
extension LiveSnapshot: ResponseEncodable {}
