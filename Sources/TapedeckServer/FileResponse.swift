import Hummingbird
import HTTPTypes
import NIOCore
import Foundation
import TapedeckCore
#if canImport(Glibc)
import Glibc
#endif

/// Streams a take's file as an HTTP response, whole or one byte range (`Range: bytes=…`, for
/// seeking in an `<audio>` element), in 64 KiB reads off the event loop, never holding more
/// than one block per response. The file is opened without following links; only paths that
/// storage gives for a take id reach here. Any thread.
enum FileResponse {
    static let blockSize = 64 * 1024

    /// A byte range: `nil` for the whole file, `.unsatisfiable` for a range past its end.
    enum Requested: Equatable {
        case whole
        case range(Int64, Int64)
        case unsatisfiable
    }

    /// Parses a `Range` header for a file of `size` bytes. More than one range, or a unit other
    /// than bytes, is answered with the whole file (as RFC 9110 allows).
    static func parseRange(_ header: String?, size: Int64) -> Requested {
        guard let header, header.hasPrefix("bytes=") else { return .whole }
        let spec = header.dropFirst(6).trimmingCharacters(in: .whitespaces)
        guard !spec.contains(","), let dash = spec.firstIndex(of: "-") else { return .whole }
        let first = spec[..<dash].trimmingCharacters(in: .whitespaces)
        let last = spec[spec.index(after: dash)...].trimmingCharacters(in: .whitespaces)
        if first.isEmpty {
            guard let suffix = Int64(last), suffix >= 0 else { return .whole }
            guard suffix > 0 else { return .unsatisfiable }
            guard size > 0 else { return .unsatisfiable }
            return .range(max(0, size - suffix), size - 1)
        }
        guard let start = Int64(first), start >= 0 else { return .whole }
        guard start < size else { return .unsatisfiable }
        if last.isEmpty { return .range(start, size - 1) }
        guard let end = Int64(last), end >= start else { return .whole }
        return .range(start, min(end, size - 1))
    }

    /// The response for `url`: 200 with the file, 206 with the range asked for, or 416.
    /// - Parameters:
    ///   - mediaType: the file's media type (its encoder's).
    ///   - download: a file name to offer as an attachment (`nil`: shown inline).
    static func make(_ url: URL, mediaType: String, request: Request, download: String? = nil, head: Bool = false) throws -> Response {
        var info = stat()
        guard lstat(url.path, &info) == 0 else {
            throw APIError(.notFound, "not-found", "The take's audio file is missing. Run `tapedeck doctor` on the server to see what happened to it.")
        }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            throw APIError(.forbidden, "not-a-file", "The take's audio is not a regular file (a link or device is never served). Run `tapedeck doctor` on the server.")
        }
        let size = Int64(info.st_size)
        let etag = "\"\(info.st_ino)-\(size)-\(info.st_mtim.tv_sec)\""
        var headers: HTTPFields = [
            .contentType: mediaType,
            .acceptRanges: "bytes",
            .eTag: etag,
            .cacheControl: "private, no-cache",
        ]
        if let download {
            let ascii = String(download.unicodeScalars.map { $0.isASCII && $0.value >= 0x20 && $0 != "\"" && $0 != "\\" ? Character($0) : "_" })
            let encoded = download.addingPercentEncoding(withAllowedCharacters: .rfc8187AttrChar) ?? ascii
            headers[.contentDisposition] = "attachment; filename=\"\(ascii)\"; filename*=UTF-8''\(encoded)"
        }
        var requested = parseRange(request.headers[.range], size: size)
        if let ifRange = request.headers[.ifRange], ifRange != etag { requested = .whole }
        switch requested {
        case .unsatisfiable:
            headers[.contentRange] = "bytes */\(size)"
            return Response(status: .rangeNotSatisfiable, headers: headers)
        case .whole:
            headers[.contentLength] = String(size)
            return Response(status: .ok, headers: headers, body: head ? ResponseBody() : body(url, from: 0, count: size, inode: info.st_ino))
        case .range(let start, let end):
            headers[.contentRange] = "bytes \(start)-\(end)/\(size)"
            headers[.contentLength] = String(end - start + 1)
            return Response(status: .partialContent, headers: headers,
                            body: head ? ResponseBody() : body(url, from: start, count: end - start + 1, inode: info.st_ino))
        }
    }

    /// Reads `count` bytes from `start`, block by block, as the client takes them.
    static func body(_ url: URL, from start: Int64, count: Int64, inode: ino_t) -> ResponseBody {
        ResponseBody(contentLength: Int(count)) { writer in
            let path = url.path
            let fd = try await OffMain.run(on: OffMain.files) { () -> Int32 in
                let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
                guard fd >= 0 else { throw TapedeckError.system(errno, while: "open \(path)") }
                var info = stat()
                guard fstat(fd, &info) == 0, info.st_ino == inode else {
                    close(fd)
                    throw TapedeckError(.io, "\(path) changed while it was being sent.")
                }
                return fd
            }
            defer { close(fd) }
            var offset = start
            let end = start + count
            while offset < end {
                let want = Int(min(Int64(blockSize), end - offset))
                let at = offset
                let block = try await OffMain.run(on: OffMain.files) { () -> ByteBuffer in
                    var buffer = ByteBufferAllocator().buffer(capacity: want)
                    let n = buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: want) { raw in
                        max(0, pread(fd, raw.baseAddress, want, off_t(at)))
                    }
                    guard n > 0 else { throw TapedeckError(.io, "\(path) ended early.") }
                    return buffer
                }
                offset += Int64(block.readableBytes)
                try await writer.write(block)
            }
            try await writer.finish(nil)
        }
    }
}

extension CharacterSet {
    /// RFC 8187's attr-char: what a `filename*` value may hold unencoded (ASCII only).
    static let rfc8187AttrChar = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789!#$&+-.^_`|~")
}
