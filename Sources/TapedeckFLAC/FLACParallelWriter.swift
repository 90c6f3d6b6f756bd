import CFLAC
import Dispatch
import Foundation
import Synchronization
import TapedeckCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Writes a FLAC file on every core: the audio is cut into segments of whole blocks, each
/// segment is encoded by a libFLAC encoder of its own on a worker (same settings, fixed block
/// size, libFLAC's verify mode on when asked), and the segments' frames are joined in order into
/// one stream: each frame's number rewritten for its place in the whole stream, its header CRC-8
/// and frame CRC-16 recomputed. FLAC frames are independent, so at a fixed block size the frames
/// are the ones a single encoder makes (`FLACParallelTests` compares them frame by frame).
///
/// The header (`fLaC`, STREAMINFO, tags, padding) is the one libFLAC writes for these settings;
/// STREAMINFO's total, frame sizes and MD5 are written at ``finish()``. The MD5 of the input is
/// computed on the writer's thread while the workers encode. At most `threads + 1` segments are
/// in flight, so memory does not grow with the take's length.
///
/// For exports (a temporary file that is verified, then put in place): a recording keeps the
/// serial ``FLACTakeWriter``, whose checkpoints make every second durable. Single owner, not
/// `Sendable`: create, use and finish it on one thread; the workers never touch it.
final class FLACParallelWriter: TakeWriter {
    let format: AudioFormat
    let path: String
    private(set) var verification: String?
    var verifiesOutput: Bool { verify }

    private var fd: Int32
    private let level: Int
    private let verify: Bool
    private let threads: Int
    private let blocksize: Int
    /// Frames per segment: a whole number of blocks.
    private let segmentFrames: Int
    private let blocksPerSegment: Int
    /// The current segment's frames, packed as given (the workers widen them for libFLAC).
    private var pending: [UInt8] = []
    private var pendingFrames = 0
    private var framesSubmitted: Int64 = 0
    private var md5 = MD5()
    /// Segments handed to workers, and the next one to write.
    private var submitted = 0
    private var nextToWrite = 0
    private let results = SegmentResults()
    /// Where the next frame goes, and the frame statistics for STREAMINFO.
    private var position: Int64
    private var minFrameBytes = Int.max
    private var maxFrameBytes = 0
    private var failed: TapedeckError?

    /// Creates the file at `path` (never overwriting) and writes the header libFLAC writes for
    /// these settings and tags.
    /// - Thread: the writer thread that will own it. Blocks on disk I/O.
    init(path: String, format: AudioFormat, metadata: TakeMetadata, level: Int, verify: Bool, paddingBytes: Int, threads: Int) throws {
        self.format = format
        self.path = path
        self.level = level
        self.verify = verify
        self.threads = max(1, threads)
        let file = try PositionalFile.createNew(atPath: path)
        let header: (bytes: [UInt8], blocksize: Int)
        do {
            header = try Self.header(format: format, metadata: metadata, level: level, paddingBytes: paddingBytes)
            let code = header.bytes.withUnsafeBytes { writeFully(file, $0.baseAddress!, $0.count, at: 0) }
            if code != 0 { throw TapedeckError.system(code, while: "write the FLAC header of \(path)") }
        } catch {
            close(file)
            unlink(path)
            throw error
        }
        fd = file
        position = Int64(header.bytes.count)
        blocksize = header.blocksize
        // About a quarter of a million frames a segment: long enough that starting an encoder
        // is noise, short enough that `threads + 1` of them stay small (6 MB of 24-bit stereo).
        blocksPerSegment = max(1, 262_144 / blocksize)
        segmentFrames = blocksize * blocksPerSegment
        pending.reserveCapacity(segmentFrames * format.bytesPerFrame)
    }

    deinit { abandon() }

    /// The bytes libFLAC writes before the first frame for these settings (tags and padding
    /// included), and its block size: an encoder is started, its metadata kept, and discarded.
    private static func header(format: AudioFormat, metadata: TakeMetadata, level: Int, paddingBytes: Int) throws -> ([UInt8], Int) {
        guard let enc = FLAC__stream_encoder_new() else { throw TapedeckError(.io, "Could not create a FLAC encoder: out of memory.") }
        var blocks = try FLACTags.blocks(for: metadata, layout: format.layout, channels: format.channels, paddingBytes: paddingBytes)
        defer {
            FLAC__stream_encoder_delete(enc)
            for block in blocks { if let block { FLAC__metadata_object_delete(block) } }
        }
        FLACTakeWriter.configure(enc, format: format, level: level)
        _ = FLAC__stream_encoder_set_do_md5(enc, 0)
        let count = UInt32(blocks.count)
        _ = blocks.withUnsafeMutableBufferPointer { FLAC__stream_encoder_set_metadata(enc, $0.baseAddress, count) }
        let sink = ByteSink()
        let status = FLAC__stream_encoder_init_stream(enc, { _, buffer, bytes, samples, _, client in
            let sink = Unmanaged<ByteSink>.fromOpaque(client!).takeUnretainedValue()
            if samples == 0, !sink.closed, let buffer { sink.bytes.append(contentsOf: UnsafeBufferPointer(start: buffer, count: bytes)) }
            return FLAC__STREAM_ENCODER_WRITE_STATUS_OK
        }, nil, nil, nil, Unmanaged.passUnretained(sink).toOpaque())
        guard status == FLAC__STREAM_ENCODER_INIT_STATUS_OK else {
            throw TapedeckError(.io, "Could not start a FLAC encoder: libFLAC refused the settings (init status \(status.rawValue)).")
        }
        sink.closed = true  // what deleting the encoder writes is not part of the header
        return (sink.bytes, Int(FLAC__stream_encoder_get_blocksize(enc)))
    }

    /// Appends `frames` interleaved frames, packed little-endian in ``format``; a full segment
    /// goes to a worker, and finished segments are written in order.
    /// - Thread: the owning writer thread. Blocks on disk I/O, and while `threads + 1` segments
    ///   are being encoded.
    func write(_ buffer: UnsafeRawPointer, frames: Int) throws {
        if let failed { throw failed }
        md5.update(buffer, count: frames * format.bytesPerFrame)
        var done = 0
        while done < frames {
            let n = min(frames - done, segmentFrames - pendingFrames)
            pending.append(contentsOf: UnsafeRawBufferPointer(start: buffer + done * format.bytesPerFrame, count: n * format.bytesPerFrame))
            pendingFrames += n
            done += n
            if pendingFrames == segmentFrames { try submit() }
        }
        framesSubmitted += Int64(frames)
    }

    /// Hands the pending segment to a worker, then writes finished segments (waiting for the
    /// oldest while too many are in flight).
    private func submit() throws {
        let samples = pending
        let frames = pendingFrames
        pending.removeAll(keepingCapacity: true)
        pendingFrames = 0
        let index = submitted
        submitted += 1
        let (format, level, verify, results) = (self.format, self.level, self.verify, self.results)
        let firstFrame = UInt64(index * blocksPerSegment)
        DispatchQueue.global(qos: .userInitiated).async {
            results.put(index, Self.encode(samples, frames: frames, format: format, level: level, verify: verify, firstFrame: firstFrame))
        }
        try writeReady(waitingWhileMoreThan: threads)
    }

    /// Writes finished segments in order; while more than `limit` are in flight, waits for the
    /// oldest.
    private func writeReady(waitingWhileMoreThan limit: Int) throws {
        while nextToWrite < submitted {
            let mustWait = submitted - nextToWrite > limit
            guard let result = results.take(nextToWrite, waiting: mustWait) else { return }
            switch result {
            case .failure(let error):
                failed = error
                throw error
            case .success(let frames):
                try append(frames, segment: nextToWrite)
            }
            nextToWrite += 1
        }
    }

    /// Writes one segment's frames (renumbered by the worker for their place in the stream).
    private func append(_ frames: [[UInt8]], segment: Int) throws {
        var out: [UInt8] = []
        out.reserveCapacity(frames.reduce(0) { $0 + $1.count })
        for frame in frames {
            out += frame
            minFrameBytes = min(minFrameBytes, frame.count)
            maxFrameBytes = max(maxFrameBytes, frame.count)
        }
        let code = out.withUnsafeBytes { writeFully(fd, $0.baseAddress!, $0.count, at: position) }
        if code != 0 {
            let error = TapedeckError.system(code, while: "write audio to \(path)")
            failed = error
            throw error
        }
        position += Int64(out.count)
    }

    /// Encodes one segment with an encoder of its own; returns its frames renumbered from
    /// `firstFrame` (libFLAC numbers them from 0), CRCs recomputed.
    /// - Thread: a worker. Blocks for the segment's encoding.
    private static func encode(_ packed: [UInt8], frames: Int, format: AudioFormat, level: Int, verify: Bool,
                               firstFrame: UInt64) -> Result<[[UInt8]], TapedeckError> {
        var samples = [Int32](repeating: 0, count: frames * format.channels)
        packed.withUnsafeBytes { raw in
            samples.withUnsafeMutableBufferPointer { FLACTakeWriter.unpack(raw.baseAddress!, count: $0.count, format: format, into: $0.baseAddress!) }
        }
        guard let enc = FLAC__stream_encoder_new() else { return .failure(TapedeckError(.io, "Could not create a FLAC encoder: out of memory.")) }
        defer { FLAC__stream_encoder_delete(enc) }
        FLACTakeWriter.configure(enc, format: format, level: level)
        _ = FLAC__stream_encoder_set_verify(enc, verify ? 1 : 0)
        _ = FLAC__stream_encoder_set_do_md5(enc, 0)
        let sink = FrameSink()
        let status = FLAC__stream_encoder_init_stream(enc, { _, buffer, bytes, samples, _, client in
            let sink = Unmanaged<FrameSink>.fromOpaque(client!).takeUnretainedValue()
            if samples > 0, let buffer { sink.frames.append(Array(UnsafeBufferPointer(start: buffer, count: bytes))) }
            return FLAC__STREAM_ENCODER_WRITE_STATUS_OK
        }, nil, nil, nil, Unmanaged.passUnretained(sink).toOpaque())
        guard status == FLAC__STREAM_ENCODER_INIT_STATUS_OK else {
            return .failure(TapedeckError(.io, "Could not start a FLAC encoder: libFLAC refused the settings (init status \(status.rawValue))."))
        }
        let ok = samples.withUnsafeBufferPointer { FLAC__stream_encoder_process_interleaved(enc, $0.baseAddress, UInt32(frames)) != 0 }
        let finished = FLAC__stream_encoder_finish(enc) != 0
        guard ok && finished else {
            let state = FLAC__stream_encoder_get_state(enc)
            if state == FLAC__STREAM_ENCODER_VERIFY_MISMATCH_IN_AUDIO_DATA {
                return .failure(TapedeckError(.io, "libFLAC's verify mode decoded a frame to other samples than it was given. The encoder or memory is faulty; nothing was kept."))
            }
            return .failure(TapedeckError(.io, "Encoding FLAC failed: \(String(cString: FLAC__stream_encoder_get_resolved_state_string(enc)))."))
        }
        var numbered: [[UInt8]] = []
        numbered.reserveCapacity(sink.frames.count)
        for (i, frame) in sink.frames.enumerated() {
            guard let renumbered = firstFrame == 0 ? frame : FLACFrameRenumbering.renumber(frame, to: firstFrame + UInt64(i)) else {
                return .failure(TapedeckError(.internalError, "libFLAC produced a frame Tapedeck cannot renumber (frame \(firstFrame + UInt64(i)))."))
            }
            numbered.append(renumbered)
        }
        return .success(numbered)
    }

    /// Nothing to make durable before the end: an export's file is a temporary until it is
    /// verified and put in place. - Thread: the owning writer thread. Does not block noticeably.
    func checkpoint() throws {
        if let failed { throw failed }
    }

    /// Encodes the last (short) segment, writes every segment, fills in STREAMINFO (total,
    /// frame sizes, MD5 of the input), `fsync`s and closes the file.
    /// - Thread: the owning writer thread. Blocks while the last segments are encoded, and on disk I/O.
    /// - Returns: frames in the file.
    func finish() throws -> Int64 {
        guard fd >= 0 else { throw TapedeckError(.internalError, "Finished the FLAC writer for \(path) twice.") }
        if let failed { throw failed }
        if pendingFrames > 0 { try submit() }
        try writeReady(waitingWhileMoreThan: 0)
        let fd = self.fd
        self.fd = -1
        defer { close(fd) }
        let file = FLACFile(fd: fd, path: path, kind: "FLAC")
        var info = try FLACHeader.read(from: file).streamInfo
        info.totalSamples = UInt64(framesSubmitted)
        info.md5 = md5.finalize()
        (info.minFrameSize, info.maxFrameSize) = framesSubmitted == 0 ? (0, 0) : (minFrameBytes, maxFrameBytes)
        try file.write(info.bytes, at: FLACHeader.streamInfoOffset)
        try file.sync()
        if verify {
            verification = "every frame decoded by libFLAC's verify mode on \(threads) threads and compared with the input; STREAMINFO holds \(framesSubmitted) frames and MD5 \(MD5.hex(info.md5))"
        }
        return framesSubmitted
    }

    /// Closes the file without finishing it (the caller removes it); workers still running
    /// finish into results nobody reads. - Thread: the owning writer thread.
    func abandon() {
        if fd >= 0 { close(fd) }
        fd = -1
    }
}

/// Finished segments, by index, handed from the workers to the writer's thread.
private final class SegmentResults: Sendable {
    private let results = Mutex<[Int: Result<[[UInt8]], TapedeckError>]>([:])
    private let arrived = DispatchSemaphore(value: 0)

    func put(_ index: Int, _ result: Result<[[UInt8]], TapedeckError>) {
        results.withLock { $0[index] = result }
        arrived.signal()
    }

    /// Segment `index`'s result, removed; with `waiting`, waits until it is there.
    func take(_ index: Int, waiting: Bool) -> Result<[[UInt8]], TapedeckError>? {
        while true {
            if let result = results.withLock({ $0.removeValue(forKey: index) }) { return result }
            guard waiting else { return nil }
            arrived.wait()
        }
    }
}

/// libFLAC's output collected in a callback (one encoder, one thread).
private final class FrameSink {
    var frames: [[UInt8]] = []
}

private final class ByteSink {
    var bytes: [UInt8] = []
    var closed = false
}

/// Rewrites a FLAC frame's number (fixed block size: the frame number is in the header, UTF-8
/// coded, so its length may change) and recomputes the header's CRC-8 and the frame's CRC-16.
enum FLACFrameRenumbering {
    /// The frame with number `number`, or `nil` if `frame` is not a fixed-block-size frame.
    static func renumber(_ frame: [UInt8], to number: UInt64) -> [UInt8]? {
        guard frame.count >= 8, frame[0] == 0xFF, frame[1] == 0xF8 else { return nil }
        let lead = frame[4]
        let length: Int = lead < 0x80 ? 1 : lead & 0xE0 == 0xC0 ? 2 : lead & 0xF0 == 0xE0 ? 3 : lead & 0xF8 == 0xF0 ? 4
            : lead & 0xFC == 0xF8 ? 5 : lead & 0xFE == 0xFC ? 6 : lead == 0xFE ? 7 : 0
        guard length > 0 else { return nil }
        let blockCode = frame[2] >> 4, rateCode = frame[2] & 0x0F
        var crcAt = 4 + length
        crcAt += blockCode == 6 ? 1 : blockCode == 7 ? 2 : 0
        crcAt += rateCode == 12 ? 1 : rateCode == 13 || rateCode == 14 ? 2 : 0
        guard crcAt + 3 <= frame.count else { return nil }
        var out: [UInt8] = Array(frame[0..<4]) + FLACVerbatimFrame.utf8Coded(number) + frame[(4 + length)..<crcAt]
        out.append(FLACVerbatimFrame.crc8(out))
        // The frame's CRC-16 from the old one: only the header changed, so the rest of the frame
        // (most of its bytes) is not read again (``crc16(replacingHeader:of:with:)``).
        let crc = crc16(replacingHeader: Array(frame[0...crcAt]), of: frame, with: out)
        out += frame[(crcAt + 1)..<(frame.count - 2)]
        out.append(UInt8(crc >> 8))
        out.append(UInt8(crc & 0xFF))
        return out
    }

    /// The CRC-16 of `frame` (without its last two bytes, its CRC) with its first bytes `old`
    /// replaced by `new`. CRCs are linear: crc(A ‖ B) = crc(A)·x^(8·|B|) + crc(B) (mod the
    /// polynomial; initial value 0, nothing xored at the end, as FLAC's), so the new CRC is the
    /// frame's stored one plus (crc(new) + crc(old))·x^(8·|B|), B the bytes after the header.
    static func crc16(replacingHeader old: [UInt8], of frame: [UInt8], with new: [UInt8]) -> UInt16 {
        let stored = UInt16(frame[frame.count - 2]) << 8 | UInt16(frame[frame.count - 1])
        let tail = frame.count - 2 - old.count
        return multiply(crc16(new) ^ crc16(old), xToThe8Times(tail)) ^ stored
    }

    /// a·b modulo the polynomial x¹⁶ + x¹⁵ + x² + 1 (bit i is the coefficient of xⁱ).
    static func multiply(_ a: UInt16, _ b: UInt16) -> UInt16 {
        var product: UInt16 = 0
        for bit in stride(from: 15, through: 0, by: -1) {
            product = product & 0x8000 != 0 ? (product << 1) ^ 0x8005 : product << 1
            if b >> bit & 1 != 0 { product ^= a }
        }
        return product
    }

    /// x^(8·n) modulo the polynomial, by squaring.
    static func xToThe8Times(_ n: Int) -> UInt16 {
        var (result, base, n): (UInt16, UInt16, Int) = (1, 0x0100, n)
        while n > 0 {
            if n & 1 != 0 { result = multiply(result, base) }
            base = multiply(base, base)
            n >>= 1
        }
        return result
    }

    /// CRC-16 (polynomial 0x8005, initial 0) by table, for whole frames.
    static func crc16(_ bytes: [UInt8]) -> UInt16 {
        var crc: UInt16 = 0
        for byte in bytes { crc = (crc << 8) ^ table[Int(UInt8(truncatingIfNeeded: crc >> 8) ^ byte)] }
        return crc
    }

    private static let table: [UInt16] = (0..<256).map { i -> UInt16 in
        var crc = UInt16(i) << 8
        for _ in 0..<8 { crc = crc & 0x8000 != 0 ? (crc << 1) ^ 0x8005 : crc << 1 }
        return crc
    }
}
