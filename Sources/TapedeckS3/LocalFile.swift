import Crypto
import Dispatch
import Foundation
import NIOCore
import TapedeckCore
#if canImport(Glibc)
import Glibc
#endif

/// A take's file opened for upload: its size, reads at an offset, and the digests an S3 server's
/// answers are checked against. Reading the whole file (``digest(partSize:)``) runs on a
/// dispatch queue, never on Swift's cooperative pool; ``read(at:count:)`` blocks briefly (one
/// part). Not shared between tasks except for reads, which are positional.
final class LocalFile: Sendable {
    let url: URL
    let size: Int64
    private let fd: Int32

    init(_ url: URL) throws {
        self.url = url
        let fd = open(url.path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw TapedeckError.system(errno, while: "open \(url.path)") }
        var st = stat()
        guard fstat(fd, &st) == 0 else {
            let code = errno
            close(fd)
            throw TapedeckError.system(code, while: "read \(url.path)")
        }
        self.fd = fd
        size = Int64(st.st_size)
        identity = Identity(device: UInt64(st.st_dev), inode: UInt64(st.st_ino), size: Int64(st.st_size),
                            modified: Int64(st.st_mtim.tv_sec) * 1_000_000_000 + Int64(st.st_mtim.tv_nsec))
    }

    /// What tells this version of the file from another: device, inode, size and change time.
    struct Identity: Hashable, Sendable {
        var device: UInt64
        var inode: UInt64
        var size: Int64
        var modified: Int64
    }

    let identity: Identity

    /// `count` bytes from `offset`, read straight into a buffer to send.
    func readBuffer(at offset: Int64, count: Int) throws -> ByteBuffer {
        var buffer = ByteBufferAllocator().buffer(capacity: count)
        var done = 0
        while done < count {
            let n = try buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: count - done) { raw -> Int in
                while true {
                    let n = pread(fd, raw.baseAddress!, count - done, off_t(offset) + off_t(done))
                    if n < 0 && errno == EINTR { continue }
                    if n < 0 { throw TapedeckError.system(errno, while: "read \(url.path)") }
                    return n
                }
            }
            guard n > 0 else { throw TapedeckError(.io, "\(url.path) became shorter while it was read. Run the command again.") }
            done += n
        }
        return buffer
    }

    deinit { close(fd) }

    /// The file's digests: SHA-256 (hex and base64), MD5 (hex) and, for parts of `partSize`,
    /// each part's MD5 and the multipart ETag S3 computes from them.
    struct Digest: Sendable {
        var sha256: String
        var sha256Base64: String
        var md5: String
        var partMD5s: [String]
        var multipartETag: String
    }

    func digest(partSize: Int) async throws -> Digest {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(with: Result { try self.computeDigest(partSize: partSize) })
            }
        }
    }

    private func computeDigest(partSize: Int) throws -> Digest {
        var sha = SHA256()
        var md5 = Insecure.MD5()
        var partMD5s: [String] = []
        var partsConcatenated = Data()
        var offset: Int64 = 0
        let chunk = PositionalFile.maxRead
        var part = Insecure.MD5()
        var inPart = 0
        while offset < size {
            let n = Int(min(Int64(min(chunk, partSize - inPart)), size - offset))
            let bytes = try PositionalFile(fd: fd, path: url.path, kind: "audio").read(n, at: offset)
            sha.update(data: bytes)
            md5.update(data: bytes)
            part.update(data: bytes)
            offset += Int64(n)
            inPart += n
            if inPart == partSize || offset == size {
                let d = part.finalize()
                partMD5s.append(SigV4Signer.hex(d))
                partsConcatenated.append(contentsOf: d)
                part = Insecure.MD5()
                inPart = 0
            }
        }
        if partMD5s.isEmpty { partMD5s.append(SigV4Signer.hex(Insecure.MD5.hash(data: Data()))) }
        let shaDigest = sha.finalize()
        return Digest(sha256: SigV4Signer.hex(shaDigest), sha256Base64: Data(shaDigest).base64EncodedString(), md5: SigV4Signer.hex(md5.finalize()),
                      partMD5s: partMD5s, multipartETag: SigV4Signer.hex(Insecure.MD5.hash(data: partsConcatenated)) + "-\(partMD5s.count)")
    }
}
