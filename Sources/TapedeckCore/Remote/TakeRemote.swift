public import Foundation

/// A remote plugin: a place finished takes are copied to, shared by many machines (S3-compatible
/// object storage, a folder on a NAS mount). The local library stays the source of truth; a
/// remote holds copies, each addressed by a ``RemoteKey`` relative to the remote's own root or
/// prefix.
///
/// The contract (`RemoteConformance` in TapedeckTesting checks it):
/// - An object becomes visible whole or not at all; a reader never sees half an upload.
/// - ``upload(_:to:resuming:options:started:progress:)`` never replaces an object another
///   upload made: a key that already holds an object is refused with `.alreadyExists`.
/// - ``put(_:at:)`` creates a small object only where none exists, and says which happened.
/// - ``verify(_:against:)`` compares what the remote holds with the local file, by what the
///   remote itself computed or stored, and never reports a match it did not check.
/// - Every object ``upload(_:to:resuming:options:started:progress:)`` and ``put(_:at:)`` write
///   carries Tapedeck's mark, and ``sentByTapedeck(_:)`` tells it: nothing without it is ever
///   Tapedeck's to remove (a bucket or folder may be shared with other programs).
/// - Listings end: a server that pages without end (a repeated continuation token, a page that
///   adds nothing) is an error, never a loop.
///
/// Every member is async and runs on any task; network and disk work happens inside them
/// (never on the caller's thread). A remote must be ``shutdown()`` before it is dropped.
public protocol TakeRemote: Sendable {
    /// The plugin name, e.g. `s3`.
    var name: String { get }
    /// Where it is, for messages and reports: `s3://BUCKET/PREFIX` at an endpoint, or a folder.
    var location: String { get }

    /// Copies `file` to `key`. A resumable upload (large files, in parts) calls `started` with its
    /// token before the first part is sent, so the caller can record it; `resuming` is such a
    /// token from an earlier, interrupted run: the parts it holds that match the file are kept,
    /// the rest sent. `progress` is called with the bytes sent (or kept) so far.
    /// - Returns: the size and SHA-256 of what was sent (read from the file as it was sent), and
    ///   for a resumed upload the bytes of the parts kept (``ContentDigest/resumedBytes``).
    /// - Throws: `.alreadyExists` when `key` already holds an object; a ``TapedeckError``
    ///   naming the remote otherwise. The object is then absent (an interrupted resumable upload
    ///   stays resumable until ``abandon(_:key:)``).
    func upload(_ file: URL, to key: RemoteKey, resuming: String?, options: UploadOptions,
                started: @escaping @Sendable (String) async throws -> Void,
                progress: @escaping @Sendable (Int64) -> Void) async throws -> ContentDigest

    /// Whether the object at `key` holds exactly the bytes of `file`.
    /// - Returns: ``RemoteCheck/matches(_:how:)`` with the file's digest and how it was checked,
    ///   ``RemoteCheck/missing``, or ``RemoteCheck/differs(_:)`` saying what differs.
    func verify(_ key: RemoteKey, against file: URL) async throws -> RemoteCheck

    /// Creates a small object (a manifest) at `key` unless one exists.
    /// - Returns: `true` when it was written, `false` when `key` already held an object (left
    ///   as it was).
    func put(_ data: Data, at key: RemoteKey) async throws -> Bool

    /// The object at `key`, at most `limit` bytes; `nil` when there is none.
    /// - Throws: when it is larger than `limit`.
    func get(_ key: RemoteKey, limit: Int) async throws -> Data?

    /// Copies the object at `key` into the new file `file` (which must not exist), at most
    /// `limit` bytes of it: an object that holds more, by the length the server announces or by
    /// the bytes that arrive, is refused as soon as that is known, and nothing past `limit` is
    /// written (the caller removes `file` after any failure).
    /// - Returns: the size and SHA-256 of the bytes written.
    /// - Throws: `.corruptFile` for an object larger than `limit`; `.notFound` when there is none.
    func download(_ key: RemoteKey, to file: URL, limit: Int64, progress: @escaping @Sendable (Int64) -> Void) async throws -> ContentDigest

    /// Whether the object at `key` carries the mark Tapedeck's uploads and `put`s set, i.e.
    /// Tapedeck sent it; `false` for an object without the mark (another program's, or one
    /// whose server dropped its metadata) and for no object.
    func sentByTapedeck(_ key: RemoteKey) async throws -> Bool

    /// Every object whose key begins with `prefix` (empty: all), in key order.
    func list(under prefix: String) async throws -> [RemoteObject]

    /// Gives up a resumable upload begun with `token`: its parts are removed. An upload that is
    /// already gone is not an error.
    func abandon(_ token: String, key: RemoteKey) async throws

    /// Resumable uploads that were begun and neither finished nor abandoned, under `prefix`.
    func unfinishedUploads(under prefix: String) async throws -> [UnfinishedUpload]

    /// Removes the object at `key`; one already gone is not an error.
    func remove(_ key: RemoteKey) async throws

    /// Closes connections. Called once, last.
    func shutdown() async
}

/// A key under a remote's root: `/`-separated segments of letters, digits, `.`, `_` and `-`,
/// none of them empty, `.` or `..`. Keys are made from machine names, ids and extensions, so
/// they never need escaping and never leave the remote's root. A plain value.
public struct RemoteKey: Sendable, Hashable, Comparable, CustomStringConvertible {
    public let rawValue: String

    /// - Throws: `.invalidArgument` naming the key when it breaks the rules above.
    public init(_ text: String) throws {
        guard Self.isValid(text) else {
            throw TapedeckError(.invalidArgument, "\"\(text)\" cannot be a remote key: use letters, digits, \".\", \"_\" and \"-\" between single slashes.")
        }
        rawValue = text
    }

    /// Whether `text` keeps the rules of a key (or, with `segment`, of one part of one).
    /// - Thread: any. Never blocks.
    public static func isValid(_ text: String, segment: Bool = false) -> Bool {
        guard !text.isEmpty, text.utf8.count <= 1024 else { return false }
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        if segment && parts.count != 1 { return false }
        return parts.allSatisfy { part in
            !part.isEmpty && part != "." && part != ".." &&
                part.utf8.allSatisfy { c in
                    (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x2E || c == 0x5F || c == 0x2D
                }
        }
    }

    public var description: String { rawValue }
    public static func < (a: RemoteKey, b: RemoteKey) -> Bool { a.rawValue < b.rawValue }

    /// The key's last segment.
    public var lastSegment: String { rawValue.split(separator: "/").last.map(String.init) ?? rawValue }
}

/// An object a remote holds. A plain value.
public struct RemoteObject: Sendable, Hashable {
    public var key: String
    public var size: Int64
    public var modified: Date?
    /// The remote's tag of this version of the object (S3's ETag), when it gives one: it
    /// changes whenever the object does.
    public var etag: String?

    public init(key: String, size: Int64, modified: Date?, etag: String?) {
        self.key = key
        self.size = size
        self.modified = modified
        self.etag = etag
    }

    /// An object whose remote gives no ETag.
    public init(key: String, size: Int64, modified: Date?) {
        self.init(key: key, size: size, modified: modified, etag: nil)
    }
}

/// A resumable upload begun and not finished. A plain value.
public struct UnfinishedUpload: Sendable, Hashable {
    public var key: String
    public var token: String
    public var started: Date?

    public init(key: String, token: String, started: Date?) {
        self.key = key
        self.token = token
        self.started = started
    }
}

/// The size and SHA-256 (lowercase hex) of some bytes. A plain value.
public struct ContentDigest: Sendable, Hashable, Codable {
    public var size: Int64
    public var sha256: String
    /// For an upload that resumed one stopped before: the bytes the remote already held and
    /// were not sent again; `nil` when nothing was resumed. About the upload, not the content:
    /// two digests of the same bytes are equal whatever it says.
    public var resumedBytes: Int64?

    public init(size: Int64, sha256: String, resumedBytes: Int64? = nil) {
        self.size = size
        self.sha256 = sha256
        self.resumedBytes = resumedBytes
    }

    public static func == (a: ContentDigest, b: ContentDigest) -> Bool { a.size == b.size && a.sha256 == b.sha256 }
    public func hash(into hasher: inout Hasher) {
        hasher.combine(size)
        hasher.combine(sha256)
    }
}

/// What ``TakeRemote/verify(_:against:)`` found.
public enum RemoteCheck: Sendable, Hashable {
    /// The object holds the file's bytes; `how` says what was compared (for reports).
    case matches(ContentDigest, how: String)
    case missing
    /// The object differs; the reason names what (size, checksum).
    case differs(String)
}

/// How an upload is made. A plain value.
public struct UploadOptions: Sendable, Hashable {
    /// Bytes per second at most; `nil` for no limit.
    public var bytesPerSecond: Int64?

    public init(bytesPerSecond: Int64? = nil) {
        self.bytesPerSecond = bytesPerSecond
    }
}

extension TapedeckError.Code {
    /// A remote (object storage, a network folder) could not be reached or failed a request.
    /// Exit 69 (`EX_UNAVAILABLE`): try again later; uploads resume.
    public static let remoteUnavailable = TapedeckError.Code(rawValue: "remote-unavailable", exitStatus: 69)
}
