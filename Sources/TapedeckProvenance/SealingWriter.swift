public import Foundation
import Crypto
public import TapedeckCore
#if canImport(Glibc)
import Glibc
#endif

/// A ``TakeWriter`` that seals what it passes on: the frames' bytes are hashed as they are
/// written, and at each checkpoint, after the audio itself is durable, a checkpoint line is
/// appended to the take's sidecar and synced; every ``ProvenanceSettings/signEvery`` checkpoints
/// and at the end the chain's head is signed. A crash between the two leaves audio the chain does
/// not cover yet, never a chain ahead of its audio.
///
/// - Thread: the owning writer thread (as every writer); blocks on disk I/O at checkpoints.
final class SealingWriter: TakeWriter {
    let inner: any TakeWriter
    private let key: DeviceKey
    private let signEvery: Int
    private let fd: Int32
    private var hasher = SHA256()
    private var head: Data
    private var written: Int64 = 0
    private var sealed: Int64 = 0
    private var checkpoints = 0
    private var lastSigned = 0
    private let bytesPerFrame: Int
    private let sidecar: URL
    private let takeID: String
    private let stamper: TimeStamper?
    private var lastStamp = Date()

    /// Creates the sidecar at `sidecar` (which must not exist) with its header. With `stamper`,
    /// the head is time-stamped at the end, and every ``TimeStamper/every`` seconds when signed.
    init(_ inner: any TakeWriter, takeID: String, format: AudioFormat, sidecar: URL, key: DeviceKey, signEvery: Int, stamper: TimeStamper? = nil) throws {
        self.inner = inner
        self.key = key
        self.signEvery = max(1, signEvery)
        self.sidecar = sidecar
        self.takeID = takeID
        self.stamper = stamper.flatMap { $0.authority == nil ? nil : $0 }
        bytesPerFrame = format.bytesPerFrame
        fd = open(sidecar.path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            if errno == EEXIST {
                // A chain left beside a file that is gone (moved away by hand): never written over.
                throw TapedeckError(.alreadyExists, "\(sidecar.path) exists already: the chain of an earlier recording whose audio is no longer beside it. Move it away (it still proves that recording), then record again.")
            }
            throw TapedeckError.system(errno, while: "create the take's chain \(sidecar.path)")
        }
        let publicKey = key.publicKey
        head = ProvenanceChain.genesis(takeID: takeID, format: format, publicKey: publicKey.raw)
        let clock = SystemClock.state()
        let header = ProvenanceChain.Header(take: takeID, format: ProvenanceChain.formatText(format), key: publicKey.description,
                                            fingerprint: publicKey.fingerprint, created: UTCTimestamp.format(Date()),
                                            clockSynchronized: clock?.synchronized, clockErrorSeconds: clock?.synchronized == true ? clock?.estimatedError : nil,
                                            tsa: self.stamper?.authority)
        do {
            try append(ProvenanceChain.line(header))
            guard fsync(fd) == 0 else { throw TapedeckError.system(errno, while: "sync the take's chain") }
        } catch {
            close(fd)
            unlink(sidecar.path)
            throw error
        }
    }

    deinit { close(fd) }

    var verifiesOutput: Bool { inner.verifiesOutput }
    var verification: String? { inner.verification }

    func write(_ buffer: UnsafeRawPointer, frames: Int) throws {
        try inner.write(buffer, frames: frames)
        hasher.update(bufferPointer: UnsafeRawBufferPointer(start: buffer, count: frames * bytesPerFrame))
        written += Int64(frames)
    }

    func checkpoint() throws {
        try inner.checkpoint()
        try seal(sign: false)
    }

    func finish() throws -> Int64 {
        let frames = try inner.finish()
        try seal(sign: true, force: true)
        let clock = SystemClock.state()
        try ChainFile.locked(fd) {
            let sig = try key.sign(ProvenanceChain.endMessage(checkpoint: checkpoints, frames: written, head: head))
            try append(ProvenanceChain.line(ProvenanceChain.End(end: checkpoints, frames: written,
                                                               clockSynchronized: clock?.synchronized, clockErrorSeconds: clock?.synchronized == true ? clock?.estimatedError : nil,
                                                               sig: sig.base64EncodedString())))
            guard fsync(fd) == 0 else { throw TapedeckError.system(errno, while: "sync the take's chain") }
        }
        stamper?.request(chain: sidecar, take: takeID, checkpoint: checkpoints, head: head)
        return frames
    }

    func abandon() { inner.abandon() }

    func began(at date: Date, preRollFrames: Int64) { inner.began(at: date, preRollFrames: preRollFrames) }

    func measured(_ loudness: Loudness) { inner.measured(loudness) }

    /// Chains the frames written since the last checkpoint (when there are any, or `force`),
    /// then signs the head when `sign` and it is not signed yet; syncs the sidecar.
    private func seal(sign: Bool, force: Bool = false) throws {
        let signed = try ChainFile.locked(fd) { try sealLocked(sign: sign, force: force) }
        // A long take's head is stamped every so often (its end always is, in finish()).
        if signed, !force, let stamper, stamper.every > 0, -lastStamp.timeIntervalSinceNow >= Double(stamper.every) {
            lastStamp = Date()
            stamper.request(chain: sidecar, take: takeID, checkpoint: checkpoints, head: head)
        }
    }

    /// ``seal(sign:force:)`` holding the chain's lock; whether it signed.
    private func sealLocked(sign: Bool, force: Bool) throws -> Bool {
        var signed = false
        if written > sealed || (force && checkpoints == 0) {
            let hash = Data(hasher.finalize())
            hasher = SHA256()
            checkpoints += 1
            head = ProvenanceChain.next(head: head, from: sealed, to: written, hash: hash)
            try append(ProvenanceChain.line(ProvenanceChain.Checkpoint(k: checkpoints, from: sealed, to: written,
                                                                      hash: ProvenanceChain.hex(hash), head: ProvenanceChain.hex(head))))
            sealed = written
        }
        if sign || checkpoints - lastSigned >= signEvery, checkpoints > lastSigned {
            let message = ProvenanceChain.signedMessage(checkpoint: checkpoints, frames: sealed, head: head)
            let signature = try key.sign(message)
            try append(ProvenanceChain.line(ProvenanceChain.Signature(k: checkpoints, to: sealed, sig: signature.base64EncodedString())))
            lastSigned = checkpoints
            signed = true
        }
        guard fsync(fd) == 0 else { throw TapedeckError.system(errno, while: "sync the take's chain") }
        return signed
    }

    private func append(_ data: Data) throws { try ChainFile.write(data, to: fd) }
}

/// The machine's sealer: seals each take with its key (``SealingWriter``). A plain value; any thread.
public struct ProvenanceSealer: TakeSealing {
    let key: DeviceKey
    let signEvery: Int
    /// Asks an authority to time-stamp each take's heads (`provenance.tsa`); `nil`: none.
    public var stamper: TimeStamper?
    /// Checks an export's source against its chain before a statement names it (the
    /// composition root's, with the build's decoders); `nil`: sources are not checked.
    public var sourceCheck: (@Sendable (URL) -> ChainVerdict?)?

    /// The key's fingerprint: each take it seals is tagged `SIGNED=` with it.
    public var signer: String? { key.publicKey.fingerprint }

    /// Signs with `key`, every `signEvery` checkpoints and at each take's end.
    public init(key: DeviceKey, signEvery: Int = 10) {
        self.key = key
        self.signEvery = signEvery
    }

    public func seal(_ writer: any TakeWriter, takeID: String, format: AudioFormat, audioURL: URL) throws -> any TakeWriter {
        try SealingWriter(writer, takeID: takeID, format: format, sidecar: ProvenanceChain.sidecar(of: audioURL), key: key, signEvery: signEvery, stamper: stamper)
    }
}
