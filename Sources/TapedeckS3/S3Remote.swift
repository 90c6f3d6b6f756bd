import Crypto
public import Foundation
import Logging
import NIOCore
import NIOHTTP1
import Synchronization
public import TapedeckCore
#if canImport(Glibc)
import Glibc
#endif

/// Takes on S3-compatible object storage: a file up to one part goes up in one `PUT`, larger
/// ones as a multipart upload whose parts (each with its MD5 and SHA-256, both checked by the
/// server) are read in order and sent a few at a time, memory bounded by concurrency × part
/// size; each part is read and hashed off Swift's cooperative pool (`LocalFile`), and every
/// request is retried as `S3RetryPolicy` says. An interrupted upload resumes from `ListParts`,
/// keeping the parts whose ETag is the MD5 of the file's bytes there. Every write is conditional
/// (`If-None-Match: *`) where the server honours it, after a `HEAD` where it may not.
/// Verification compares the size and the server's checksum: `x-amz-checksum-sha256` when the
/// server keeps one, else the ETag (the MD5, or the MD5 of the parts' MD5s) computed from the
/// file again.
///
/// Every object it writes carries its mark, the header `x-amz-meta-tapedeck` (the version that
/// wrote it), which ``sentByTapedeck(_:)`` reads: a bucket may be shared, and what lacks the mark
/// is never Tapedeck's to remove. Listings follow continuation tokens and markers only while
/// they advance (`ListingPages`).
///
/// Every member is async, runs on any task and never blocks a thread of the cooperative pool:
/// file reads and hashing run on a dispatch queue, network I/O on NIO's event loops. (A download
/// writes each chunk it receives with `write(2)` on the task, a short call into the page cache.)
public final class S3Remote: TakeRemote {
    public let name = "s3"
    public let location: String
    let client: S3Client
    /// The prefix with a trailing `/`, or empty.
    let root: String
    let partSize: Int
    let concurrency: Int
    let logger: Logger
    /// The digests of what this remote sent, by key, with the version of the file they are of:
    /// the check after an upload compares the server's answer with them instead of reading the
    /// file again.
    private let sent = Mutex<[String: (LocalFile.Identity, LocalFile.Digest)]>([:])

    /// - Throws: `.configuration` when a setting cannot work (no endpoint or bucket, a bad prefix).
    public init(settings: S3Settings, credentials: S3Credentials, context: PluginContext) throws {
        guard !settings.endpoint.isEmpty else {
            throw TapedeckError(.configuration, "\(context.key(S3Settings.endpoint)) is not set. Set it to the server's address, e.g. --set \(context.key(S3Settings.endpoint))=http://HOST:PORT")
        }
        guard !settings.bucket.isEmpty else {
            throw TapedeckError(.configuration, "\(context.key(S3Settings.bucket)) is not set. Set it to the bucket takes go to.")
        }
        let prefix = settings.prefix.split(separator: "/").joined(separator: "/")
        guard prefix.isEmpty || RemoteKey.isValid(prefix) else {
            throw TapedeckError(.configuration, "\(context.key(S3Settings.prefix)): \"\(settings.prefix)\" cannot be a prefix: use letters, digits, \".\", \"_\", \"-\" and \"/\".")
        }
        root = prefix.isEmpty ? "" : prefix + "/"
        client = try S3Client(endpoint: settings.endpoint, bucket: settings.bucket, region: settings.region, pathStyle: settings.pathStyle,
                              credentials: credentials, logger: context.logger, endpointKey: context.key(S3Settings.endpoint))
        partSize = settings.partSizeMiB * 1024 * 1024
        concurrency = settings.concurrency
        logger = context.logger
        location = "s3://\(settings.bucket)/\(prefix) at \(settings.endpoint)"
    }

    public func shutdown() async { await client.shutdown() }

    /// The header every object Tapedeck writes carries, and its value: Tapedeck's version.
    static let mark = ("x-amz-meta-tapedeck", TapedeckVersion.string)

    private func full(_ key: RemoteKey) -> String { root + key.rawValue }

    /// The part size for a file of `size` bytes: the configured size, grown so that no upload
    /// needs more than S3's 10 000 parts.
    func partSize(for size: Int64) -> Int {
        max(partSize, Int((size + 9_999) / 10_000))
    }

    // MARK: Reading and writing objects

    public func put(_ data: Data, at key: RemoteKey) async throws -> Bool {
        if try await head(key) != nil { return false }
        let body = ByteBuffer(bytes: data)
        let response = try await client.send(.PUT, key: full(key), headers: [
            ("if-none-match", "*"), ("content-md5", Data(Insecure.MD5.hash(data: data)).base64EncodedString()),
            ("content-type", "application/json"), Self.mark,
        ], body: body)
        if response.status == 412 || response.status == 409 { return false }
        guard (200..<300).contains(response.status) else { throw client.failure(response, "write \(key)") }
        return true
    }

    public func get(_ key: RemoteKey, limit: Int) async throws -> Data? {
        let response = try await client.send(.GET, key: full(key), limit: limit)
        if response.status == 404 { return nil }
        guard response.status == 200 else { throw client.failure(response, "read \(key)") }
        return Data(response.body.readableBytesView)
    }

    public func remove(_ key: RemoteKey) async throws {
        let response = try await client.send(.DELETE, key: full(key))
        guard (200..<300).contains(response.status) || response.status == 404 else { throw client.failure(response, "remove \(key)") }
    }

    /// The object's size, ETag (unquoted), full-object SHA-256 when the server keeps one, and
    /// the SHA-256 Tapedeck stored in its metadata; `nil` when there is no object.
    struct Head {
        var size: Int64
        var etag: String
        var checksumSHA256: String?
        var metadataSHA256: String?
        /// The part size Tapedeck stored with a multipart upload.
        var partSize: Int?
        /// Whether the object carries Tapedeck's mark (``mark``).
        var marked: Bool
    }

    func head(_ key: RemoteKey) async throws -> Head? {
        let response = try await client.send(.HEAD, key: full(key), headers: [("x-amz-checksum-mode", "ENABLED")])
        if response.status == 404 { return nil }
        guard response.status == 200 else { throw client.failure(response, "look up \(key)") }
        let size = response.headers.first(name: "content-length").flatMap { Int64($0) } ?? -1
        let etag = (response.headers.first(name: "etag") ?? "").trimmingCharacters(in: CharacterSet(charactersIn: "\" "))
        return Head(size: size, etag: etag, checksumSHA256: response.headers.first(name: "x-amz-checksum-sha256"),
                    metadataSHA256: response.headers.first(name: "x-amz-meta-sha256"),
                    partSize: response.headers.first(name: "x-amz-meta-part-size").flatMap { Int($0) }.flatMap { $0 > 0 && $0 <= 5 << 30 ? $0 : nil },
                    marked: !(response.headers.first(name: Self.mark.0) ?? "").isEmpty)
    }

    public func sentByTapedeck(_ key: RemoteKey) async throws -> Bool {
        try await head(key)?.marked ?? false
    }

    public func list(under prefix: String) async throws -> [RemoteObject] {
        var out: [RemoteObject] = []
        var seen = Set<String>()
        var pages = ListingPages(endpoint: client.endpoint, what: "the objects under \"\(root + prefix)\"")
        var token: String?
        repeat {
            var query = [("list-type", "2"), ("prefix", root + prefix)]
            if let token { query.append(("continuation-token", token)) }
            let response = try await client.send(.GET, key: "", query: query, limit: 16 << 20)
            guard response.status == 200 else { throw client.failure(response, "list the bucket") }
            let text = response.text
            var added = 0
            for entry in S3XML.elements("Contents", in: text) {
                guard let key = S3XML.text("Key", in: entry), seen.insert(key).inserted else { continue }
                added += 1
                guard key.hasPrefix(root), let size = S3XML.text("Size", in: entry).flatMap({ Int64($0) }) else { continue }
                let modified = S3XML.text("LastModified", in: entry).flatMap { try? Date($0, strategy: .iso8601) }
                let etag = S3XML.text("ETag", in: entry).flatMap { $0.isEmpty ? nil : $0 }
                out.append(RemoteObject(key: String(key.dropFirst(root.count)), size: size, modified: modified, etag: etag))
            }
            token = try pages.next(truncated: S3XML.text("IsTruncated", in: text) == "true",
                                   marker: S3XML.text("NextContinuationToken", in: text), added: added)
        } while token != nil
        return out.sorted { $0.key < $1.key }
    }

    public func download(_ key: RemoteKey, to file: URL, limit: Int64, progress: @escaping @Sendable (Int64) -> Void) async throws -> ContentDigest {
        let fd = open(file.path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, FileModes.file)
        guard fd >= 0 else { throw TapedeckError.system(errno, while: "create \(file.path)") }
        defer { close(fd) }
        let response = try await client.stream(full(key))
        guard response.status == .ok else {
            var body = ByteBuffer()
            for try await var chunk in response.body where body.readableBytes < 65536 { body.writeBuffer(&chunk) }
            if response.status == .notFound { throw TapedeckError(.notFound, "\(key) is not on \(location).") }
            throw client.failure(S3Client.Response(status: Int(response.status.code), headers: response.headers, body: body), "read \(key)")
        }
        func tooLarge(_ what: String) -> TapedeckError {
            TapedeckError(.corruptFile, "\(key) on \(location) holds more than the \(limit) bytes expected of it (\(what)); the download was stopped there and nothing of it is kept. Run `tapedeck fleet doctor` to see the remote's problems.")
        }
        // Refused before a byte is written when the server announces more, and as soon as more
        // arrives when it does not: a server cannot fill the disk.
        if let announced = response.headers.first(name: "content-length").flatMap({ Int64($0) }), announced > limit {
            throw tooLarge("the server announced \(announced)")
        }
        var hasher = SHA256()
        var written: Int64 = 0
        var pace = DownloadPace(window: client.timeouts.answer, minimumBytes: 64 * 1024)
        for try await chunk in response.body {
            try Task.checkCancellation()
            guard written + Int64(chunk.readableBytes) <= limit else { throw tooLarge("it sent more") }
            if let slow = pace.received(chunk.readableBytes) {
                throw TapedeckError(.remoteUnavailable, "The S3 server \(client.endpoint) sent \(key) too slowly (\(slow) bytes in \(client.timeouts.answer.nanoseconds / 1_000_000_000) s); the download was stopped and nothing of it is kept. Run the pull again later.")
            }
            try chunk.withUnsafeReadableBytes { raw in
                hasher.update(bufferPointer: raw)
                var offset = 0
                while offset < raw.count {
                    let n = Glibc.write(fd, raw.baseAddress! + offset, raw.count - offset)
                    if n < 0 {
                        if errno == EINTR { continue }
                        throw TapedeckError.system(errno, while: "write \(file.path)")
                    }
                    offset += n
                }
            }
            written += Int64(chunk.readableBytes)
            progress(written)
        }
        guard fsync(fd) == 0 else { throw TapedeckError.system(errno, while: "sync \(file.path)") }
        return ContentDigest(size: written, sha256: SigV4Signer.hex(hasher.finalize()))
    }

    // MARK: Verification

    public func verify(_ key: RemoteKey, against file: URL) async throws -> RemoteCheck {
        guard let head = try await head(key) else { return .missing }
        let local = try LocalFile(file)
        guard head.size == local.size else {
            return .differs("it holds \(head.size) bytes, the take \(local.size)")
        }
        let parts = head.etag.split(separator: "-")
        let layout: Int? = parts.count == 2 ? Int(parts[1]) : nil
        let partSize = layout.map { _ in head.partSize ?? self.partSize(for: local.size) } ?? Int(max(local.size, 1))
        let digest: LocalFile.Digest
        if let (identity, known) = sent.withLock({ $0[key.rawValue] }), identity == local.identity,
           layout == nil || known.partMD5s.count == layout {
            digest = known
        } else {
            digest = try await local.digest(partSize: partSize)
        }
        if let metadata = head.metadataSHA256, metadata.lowercased() != digest.sha256 {
            return .differs("its recorded SHA-256 is \(ForeignText.printable(metadata, limit: 80)), the take's \(digest.sha256)")
        }
        if let checksum = head.checksumSHA256, !checksum.contains("-") {
            guard checksum == digest.sha256Base64 else { return .differs("the server's SHA-256 differs from the take's") }
            return .matches(ContentDigest(size: local.size, sha256: digest.sha256), how: "size and the SHA-256 the server computed")
        }
        let expected = layout == nil ? digest.md5 : digest.multipartETag
        if let layout, layout != digest.partMD5s.count {
            return .differs("it was uploaded in \(layout) parts, not in parts of \(partSize) bytes as this take would be, so its ETag cannot be compared (if sync.s3.part-size-mib changed since it was uploaded, set it back)")
        }
        guard head.etag.lowercased() == expected else {
            return .differs("its ETag \(ForeignText.printable(head.etag, limit: 80)) is not the MD5 \(expected) of the take's bytes")
        }
        return .matches(ContentDigest(size: local.size, sha256: digest.sha256), how: "size and the ETag (MD5) the server computed")
    }

    // MARK: Uploading

    public func upload(_ file: URL, to key: RemoteKey, resuming: String?, options: UploadOptions,
                       started: @escaping @Sendable (String) async throws -> Void,
                       progress: @escaping @Sendable (Int64) -> Void) async throws -> ContentDigest {
        let local = try LocalFile(file)
        // A server that ignores If-None-Match would let a PUT replace an object: look first.
        if resuming == nil, try await head(key) != nil {
            throw TapedeckError(.alreadyExists, "\(key) already exists on \(location); it was left as it is.")
        }
        let limiter = options.bytesPerSecond.map { RateLimiter(bytesPerSecond: $0) }
        var pace: (@Sendable (Int) async throws -> Void)?
        if let limiter { pace = { try await limiter.pace($0) } }
        let size = partSize(for: local.size)
        if local.size <= Int64(size) && resuming == nil {
            return try await uploadWhole(local, key: key, pace: pace, progress: progress)
        }
        do {
            return try await uploadParts(local, key: key, partSize: size, resuming: resuming, pace: pace, started: started, progress: progress)
        } catch let broken as BrokenUpload {
            // A server may keep an upload it can no longer write (rclone serve s3 answers 500 to
            // every part of one a full disk broke, also once there is room): resuming it would
            // fail on every push. It is abandoned and begun anew, once; a failure then is said.
            logger.notice("The server failed a resumed upload; beginning it anew", metadata: ["key": "\(key)", "reason": "\(broken.error.message)"])
            try? await abandon(broken.uploadID, key: key)
            return try await uploadParts(local, key: key, partSize: size, resuming: nil, pace: pace, started: started, progress: progress)
        }
    }

    /// A part of a resumed upload the server answered with a server error (5xx, after the
    /// retries): the upload may be broken on the server.
    private struct BrokenUpload: Error {
        var uploadID: String
        var error: TapedeckError
    }

    private func uploadWhole(_ local: LocalFile, key: RemoteKey, pace: (@Sendable (Int) async throws -> Void)?,
                             progress: @escaping @Sendable (Int64) -> Void) async throws -> ContentDigest {
        let part = try await local.readPart(at: 0, count: Int(local.size))
        let shaHex = part.sha256Hex
        let md5Hex = part.md5Hex
        let response = try await client.send(.PUT, key: full(key), headers: [
            ("if-none-match", "*"),
            ("content-md5", part.md5.base64EncodedString()),
            ("x-amz-checksum-sha256", part.sha256.base64EncodedString()),
            ("x-amz-meta-sha256", shaHex), Self.mark,
        ], body: part.bytes, payloadHash: shaHex, pace: pace, sending: { progress(Int64($0)) })
        if response.status == 412 || response.status == 409 {
            throw TapedeckError(.alreadyExists, "\(key) already exists on \(location); it was left as it is.")
        }
        guard (200..<300).contains(response.status) else { throw client.failure(response, "write \(key)") }
        remember(key, local, LocalFile.Digest(sha256: shaHex, sha256Base64: part.sha256.base64EncodedString(), md5: md5Hex, partMD5s: [md5Hex],
                                              multipartETag: ""))
        progress(local.size)
        return ContentDigest(size: local.size, sha256: shaHex)
    }

    /// One part already on the server (from ListParts).
    private struct ServerPart { var etag: String; var size: Int64 }

    private func uploadParts(_ local: LocalFile, key: RemoteKey, partSize: Int, resuming: String?,
                             pace: (@Sendable (Int) async throws -> Void)?,
                             started: @escaping @Sendable (String) async throws -> Void,
                             progress: @escaping @Sendable (Int64) -> Void) async throws -> ContentDigest {
        var uploadID: String?
        var existing: [Int: ServerPart] = [:]
        if let resuming, let parts = try await listParts(key, uploadID: resuming) {
            uploadID = resuming
            existing = parts
            logger.info("Resuming an upload", metadata: ["key": "\(key)", "parts": "\(parts.count)"])
        }
        if uploadID == nil {
            // The part size goes with the object: a later check rebuilds its ETag from it, whatever
            // sync.s3.part-size-mib says by then.
            let response = try await client.send(.POST, key: full(key), query: [("uploads", "")], headers: [("x-amz-meta-part-size", String(partSize)), Self.mark])
            guard response.status == 200, let id = S3XML.text("UploadId", in: response.text), !id.isEmpty else {
                throw client.failure(response, "begin uploading \(key)")
            }
            uploadID = id
            try await started(id)
        }
        guard let uploadID else { throw TapedeckError(.internalError, "No upload id.") }
        let count = max(1, Int((local.size + Int64(partSize) - 1) / Int64(partSize)))
        let whole = LocalFile.RunningDigest()
        var etags = [String](repeating: "", count: count)
        let sent = SentBytes()
        var resumed: Int64 = 0
        try await withThrowingTaskGroup(of: (Int, String).self) { group in
            var inFlight = 0
            for index in 0..<count {
                let offset = Int64(index) * Int64(partSize)
                let length = Int(min(Int64(partSize), local.size - offset))
                // Read and hashed off the cooperative pool while the parts before this one are sent;
                // fed in order to the whole file's SHA-256 (for the manifest) and MD5 (some
                // servers' ETag for a multipart object). At most `concurrency` parts are in flight
                // and one more is read, so memory stays bounded.
                let part = try await local.readPart(at: offset, count: length, feeding: whole)
                let number = index + 1
                if let there = existing[number], there.size == Int64(length), there.etag.lowercased() == part.md5Hex {
                    etags[index] = there.etag.lowercased()
                    resumed += Int64(length)
                    progress(sent.set(part: index, Int64(length)))
                    continue
                }
                if inFlight == concurrency, let (done, etag) = try await group.next() {
                    etags[done] = etag
                    inFlight -= 1
                }
                inFlight += 1
                group.addTask { [client, full = full(key)] in
                    // Each part carries its own MD5 and SHA-256; the server checks both.
                    let md5Hex = part.md5Hex
                    let response = try await client.send(.PUT, key: full, query: [("partNumber", String(number)), ("uploadId", uploadID)], headers: [
                        ("content-md5", part.md5.base64EncodedString()),
                    ], body: part.bytes, payloadHash: part.sha256Hex, pace: pace, sending: { progress(sent.set(part: index, Int64($0))) })
                    if response.status == 404 {
                        throw TapedeckError(.remoteUnavailable, "The upload of \(key) was abandoned on the server (NoSuchUpload). Run push again to start it anew.")
                    }
                    guard response.status == 200 else {
                        let failure = client.failure(response, "write part \(number) of \(key)")
                        if resuming == uploadID, response.status >= 500 { throw BrokenUpload(uploadID: uploadID, error: failure) }
                        throw failure
                    }
                    let etag = (response.headers.first(name: "etag") ?? "").trimmingCharacters(in: CharacterSet(charactersIn: "\" ")).lowercased()
                    guard etag == md5Hex else {
                        throw TapedeckError(.remoteUnavailable, "The S3 server \(client.endpoint) answered part \(number) of \(key) with the ETag \(etag.isEmpty ? "(none)" : ForeignText.printable(etag, limit: 80)), not the MD5 \(md5Hex) of the bytes sent: the part may be damaged. Run push again; it is sent anew.")
                    }
                    progress(sent.set(part: index, Int64(length)))
                    return (index, etag)
                }
            }
            while let (done, etag) = try await group.next() { etags[done] = etag }
        }
        let (shaDigest, md5Digest) = whole.finalize()
        let sha256 = SigV4Signer.hex(shaDigest)
        let document = "<CompleteMultipartUpload>" + etags.enumerated().map { "<Part><PartNumber>\($0.offset + 1)</PartNumber><ETag>\"\($0.element)\"</ETag></Part>" }.joined() + "</CompleteMultipartUpload>"
        let response = try await client.send(.POST, key: full(key), query: [("uploadId", uploadID)], headers: [("if-none-match", "*")],
                                             body: ByteBuffer(string: document), limit: 1 << 20, answerWithin: client.timeouts.completion)
        if response.status == 412 || response.status == 409 {
            throw TapedeckError(.alreadyExists, "\(key) already exists on \(location); it was left as it is.")
        }
        // S3 may answer 200 and put the failure in the body.
        guard response.status == 200, S3XML.elements("Error", in: response.text).isEmpty else {
            throw client.failure(response, "finish uploading \(key)")
        }
        let concatenated = etags.reduce(into: [UInt8]()) { out, hex in
            var i = hex.startIndex
            while i < hex.endIndex, let j = hex.index(i, offsetBy: 2, limitedBy: hex.endIndex), let byte = UInt8(hex[i..<j], radix: 16) {
                out.append(byte)
                i = j
            }
        }
        remember(key, local, LocalFile.Digest(sha256: sha256, sha256Base64: Data(shaDigest).base64EncodedString(), md5: SigV4Signer.hex(md5Digest), partMD5s: etags,
                                              multipartETag: SigV4Signer.hex(Insecure.MD5.hash(data: concatenated)) + "-\(etags.count)"))
        return ContentDigest(size: local.size, sha256: sha256, resumedBytes: resuming == nil ? nil : resumed)
    }

    /// Keeps the digests of what was just sent for the check that follows.
    private func remember(_ key: RemoteKey, _ local: LocalFile, _ digest: LocalFile.Digest) {
        sent.withLock { $0[key.rawValue] = (local.identity, digest) }
    }

    /// The parts of upload `uploadID` already on the server, by part number; `nil` when the
    /// upload no longer exists.
    private func listParts(_ key: RemoteKey, uploadID: String) async throws -> [Int: ServerPart]? {
        var parts: [Int: ServerPart] = [:]
        var pages = ListingPages(endpoint: client.endpoint, what: "the parts of \(key)")
        var marker: String?
        repeat {
            var query = [("uploadId", uploadID)]
            if let marker { query.append(("part-number-marker", marker)) }
            let response = try await client.send(.GET, key: full(key), query: query, limit: 16 << 20)
            if response.status == 404 { return nil }
            guard response.status == 200 else { throw client.failure(response, "list the parts of \(key)") }
            var added = 0
            for part in S3XML.elements("Part", in: response.text) {
                guard let number = S3XML.text("PartNumber", in: part).flatMap({ Int($0) }), let size = S3XML.text("Size", in: part).flatMap({ Int64($0) }) else { continue }
                let etag = (S3XML.text("ETag", in: part) ?? "").trimmingCharacters(in: CharacterSet(charactersIn: "\" "))
                if parts.updateValue(ServerPart(etag: etag, size: size), forKey: number) == nil { added += 1 }
            }
            marker = try pages.next(truncated: S3XML.text("IsTruncated", in: response.text) == "true",
                                    marker: S3XML.text("NextPartNumberMarker", in: response.text), added: added)
        } while marker != nil
        return parts
    }

    public func abandon(_ token: String, key: RemoteKey) async throws {
        let response = try await client.send(.DELETE, key: full(key), query: [("uploadId", token)])
        guard (200..<300).contains(response.status) || response.status == 404 else { throw client.failure(response, "abandon the upload of \(key)") }
    }

    public func unfinishedUploads(under prefix: String) async throws -> [UnfinishedUpload] {
        var out: [UnfinishedUpload] = []
        var seen = Set<String>()
        var pages = ListingPages(endpoint: client.endpoint, what: "the unfinished uploads under \"\(root + prefix)\"")
        var markers: (String, String)?
        repeat {
            var query = [("uploads", ""), ("prefix", root + prefix)]
            if let markers { query += [("key-marker", markers.0), ("upload-id-marker", markers.1)] }
            let response = try await client.send(.GET, key: "", query: query, limit: 16 << 20)
            // rclone serve s3 answers NoSuchUpload for a bucket that never had one.
            if response.status == 404, S3XML.text("Code", in: response.text) == "NoSuchUpload" { return out }
            guard response.status == 200 else { throw client.failure(response, "list unfinished uploads") }
            var added = 0
            for upload in S3XML.elements("Upload", in: response.text) {
                guard let key = S3XML.text("Key", in: upload), let id = S3XML.text("UploadId", in: upload),
                      seen.insert(key + "\n" + id).inserted else { continue }
                added += 1
                guard key.hasPrefix(root) else { continue }
                out.append(UnfinishedUpload(key: String(key.dropFirst(root.count)), token: id,
                                            started: S3XML.text("Initiated", in: upload).flatMap { try? Date($0, strategy: .iso8601) }))
            }
            // Both markers go on together; a page may give an empty upload-id marker.
            let k = S3XML.text("NextKeyMarker", in: response.text)
            let u = S3XML.text("NextUploadIdMarker", in: response.text) ?? ""
            let next = try pages.next(truncated: S3XML.text("IsTruncated", in: response.text) == "true",
                                      marker: k.map { $0 + "\n" + u }, added: added)
            markers = next.map { _ in (k ?? "", u) }
        } while markers != nil
        return out
    }
}

/// The bytes of each part handed to the server so far, shared by the tasks sending parts.
final class SentBytes: Sendable {
    private let parts = Mutex<(byPart: [Int: Int64], total: Int64)>(([:], 0))
    /// Records that `bytes` of part `part` are sent; returns the total over every part.
    func set(part: Int, _ bytes: Int64) -> Int64 {
        parts.withLock { p in
            p.total += bytes - (p.byPart[part] ?? 0)
            p.byPart[part] = bytes
            return p.total
        }
    }
}
