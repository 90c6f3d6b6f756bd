import Crypto
import Dispatch
import Foundation
import NIOCore
import Synchronization
import TapedeckCore
#if canImport(Glibc)
import Glibc
#endif

/// A take's file opened for upload: its size, its parts read with their digests, and the
/// digests an S3 server's answers are checked against. Every read and every hash runs on this
/// file's own dispatch queue, never on Swift's cooperative pool: the async members suspend the
/// calling task until it is done and block no thread of the pool. Reads are positional, so any
/// task may call them.
final class LocalFile: Sendable {
    let url: URL
    let size: Int64
    private let fd: Int32
    /// Where the blocking reads (`pread`) and the hashing run: one at a time for this file.
    private let queue = DispatchQueue(label: "tapedeck.s3.file", qos: .utility)

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

    /// `count` bytes of the file from `offset`, with their MD5 and SHA-256 (each part of an
    /// upload carries both), also fed to `whole` when given (the whole file's digests, built part
    /// by part: read the parts in order).
    /// - Thread: any task. The read and the hashing run on this file's dispatch queue; the task
    ///   suspends meanwhile (no thread of the cooperative pool blocks). Not cancellable once
    ///   started (it is one part).
    func readPart(at offset: Int64, count: Int, feeding whole: RunningDigest? = nil) async throws -> Part {
        try await withCheckedThrowingContinuation { continuation in
            queue.async {
                continuation.resume(with: Result {
                    let bytes = try self.readBuffer(at: offset, count: count)
                    return bytes.withUnsafeReadableBytes { raw in
                        whole?.update(raw)
                        return Part(bytes: bytes, md5: Data(Insecure.MD5.hash(data: raw)), sha256: Data(SHA256.hash(data: raw)))
                    }
                })
            }
        }
    }

    /// One part of the file as read for upload, with its digests.
    struct Part: Sendable {
        var bytes: ByteBuffer
        var md5: Data
        var sha256: Data
        var md5Hex: String { SigV4Signer.hex(md5) }
        var sha256Hex: String { SigV4Signer.hex(sha256) }
    }

    /// The SHA-256 and MD5 of a whole file, fed one part after the other by ``readPart(at:count:feeding:)``.
    /// - Thread: any; ``update(_:)`` and ``finalize()`` take a lock and do not wait otherwise.
    final class RunningDigest: Sendable {
        private let state = Mutex<(sha256: SHA256, md5: Insecure.MD5)>((SHA256(), Insecure.MD5()))

        fileprivate func update(_ bytes: UnsafeRawBufferPointer) {
            state.withLock {
                $0.sha256.update(bufferPointer: bytes)
                $0.md5.update(bufferPointer: bytes)
            }
        }

        /// The digests of every byte fed so far.
        func finalize() -> (sha256: SHA256.Digest, md5: Insecure.MD5.Digest) {
            state.withLock { ($0.sha256.finalize(), $0.md5.finalize()) }
        }
    }

    /// `count` bytes from `offset`, read straight into a buffer to send.
    /// - Thread: blocks in `pread`; called on ``queue`` only.
    private func readBuffer(at offset: Int64, count: Int) throws -> ByteBuffer {
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

    /// The whole file's ``Digest`` for parts of `partSize`, read from the disk.
    /// - Thread: any task. The reading and hashing run on this file's dispatch queue; the task
    ///   suspends meanwhile (no thread of the cooperative pool blocks).
    func digest(partSize: Int) async throws -> Digest {
        try await withCheckedThrowingContinuation { continuation in
            queue.async {
                continuation.resume(with: Result { try self.computeDigest(partSize: partSize) })
            }
        }
    }

    /// - Thread: blocks while it reads the file; called on ``queue`` only.
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
