import CFLAC
import Foundation
import TapedeckCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Writes one take's FLAC file through libFLAC's stream encoder, on a descriptor Tapedeck opened.
///
/// libFLAC writes through write/seek/tell callbacks (`pwrite` at the writer's own position), so at
/// ``finish()`` it can go back and fill in STREAMINFO (total samples, MD5, frame sizes). Until
/// then STREAMINFO says "total unknown, no MD5", which is valid FLAC.
///
/// FLAC encodes whole blocks (4096 frames at level 5), so up to one block is always held inside
/// libFLAC. To keep the ``TakeWriter`` promise that a crash after ``checkpoint()`` loses nothing,
/// a checkpoint also writes those pending frames as a ``FLACTail`` record just past the last
/// frame, then `fdatasync`s. The next frame libFLAC writes overwrites the record; ``FLACRepair``
/// turns a record it finds right after the last good frame into a final (verbatim) FLAC frame.
///
/// STREAMINFO's MD5 is computed here, not by libFLAC: over each frame's input as libFLAC writes
/// the frame, so it always describes exactly the frames in the file. When a write fails (a full
/// disk), ``finish()`` therefore finalizes the file at once — cut after the last whole frame,
/// STREAMINFO filled in with those frames' count and MD5 — instead of leaving it for a repair
/// that would decode the whole take. Up to one block that libFLAC held unwritten is lost.
///
/// Single owner, not `Sendable`: create, use and finish it on one thread.
final class FLACTakeWriter: TakeWriter {
    let format: AudioFormat
    let path: String
    private(set) var framesSubmitted: Int64 = 0

    private var fd: Int32
    private var encoder: UnsafeMutablePointer<FLAC__StreamEncoder>?
    private var metadataBlocks: [UnsafeMutablePointer<FLAC__StreamMetadata>?] = []
    /// libFLAC's cursor (where its next write goes) and the furthest byte it has written.
    fileprivate var position: Int64 = 0
    fileprivate var highWater: Int64 = 0
    /// Frames libFLAC has written out as FLAC frames.
    fileprivate var framesEncoded: Int64 = 0
    /// `errno` of the last failed write.
    fileprivate var writeErrno: Int32 = 0
    /// Set by ``abandon()``: libFLAC's clean-up may not touch the file any more.
    fileprivate var refuseIO = false
    /// Allocates the file's blocks a few seconds ahead of the frames.
    fileprivate var preallocation = Preallocation()
    /// Whether libFLAC's own (same-thread) verify mode is on.
    private var inlineVerify = false
    /// How the finished file was checked, for reports.
    private(set) var verification: String?
    /// Whether ``finish()`` verifies (libFLAC's verify mode).
    var verifiesOutput: Bool { inlineVerify }

    /// Conversion buffer for one `write` call's samples; grows only for a bigger chunk.
    private var samples: UnsafeMutablePointer<Int32>
    private var sampleCapacity: Int
    /// The frames libFLAC holds but has not yet written (interleaved), for checkpoint tails.
    private var tail: FLACTail
    /// MD5 of the frames written so far, as FLAC defines it (little-endian samples, interleaved).
    fileprivate var md5 = MD5()
    /// Input bytes (packed as given to ``write(_:frames:)``, which is FLAC's MD5 layout) not yet
    /// in a written frame, from `unhashedStart`.
    fileprivate var unhashed: [UInt8] = []
    fileprivate var unhashedStart = 0
    /// Where the last whole frame ends, and the smallest and largest frames written.
    fileprivate var framesEnd: Int64 = 0
    fileprivate var minFrameBytes = Int.max
    fileprivate var maxFrameBytes = 0

    /// Creates the file at `path` (never overwriting), writes `fLaC`, STREAMINFO, the tags and the
    /// padding, and `fsync`s, so the metadata is on disk before the first audio frame.
    /// With `verify`, every frame is decoded and compared with the input by libFLAC's verify mode
    /// on this thread (an export on several cores uses ``FLACParallelWriter`` instead).
    /// - Thread: the writer thread that will own it. Blocks on disk I/O.
    /// - Throws: `.alreadyExists` if the file exists; `.diskFull`/`.io` if it cannot be written.
    init(path: String, format: AudioFormat, metadata: TakeMetadata, level: Int, verify: Bool, paddingBytes: Int) throws {
        self.format = format
        self.path = path
        fd = try PositionalFile.createNew(atPath: path)
        sampleCapacity = 4096 * format.channels
        samples = .allocate(capacity: sampleCapacity)
        tail = FLACTail(channels: format.channels, bitsPerSample: format.sampleFormat.bitsPerSample, capacityFrames: 1)
        inlineVerify = verify
        do {
            try start(metadata: metadata, level: level, verify: inlineVerify, paddingBytes: paddingBytes)
        } catch {
            discardEncoder()
            close(fd)
            fd = -1
            unlink(path)
            throw error
        }
    }

    deinit {
        abandon()
        samples.deallocate()
    }

    private func start(metadata: TakeMetadata, level: Int, verify: Bool, paddingBytes: Int) throws {
        guard let enc = FLAC__stream_encoder_new() else {
            throw TapedeckError(.io, "Could not create a FLAC encoder for \(path): out of memory.")
        }
        encoder = enc
        let bits = UInt32(format.sampleFormat.bitsPerSample)
        Self.configure(enc, format: format, level: level)
        _ = FLAC__stream_encoder_set_verify(enc, verify ? 1 : 0)
        _ = FLAC__stream_encoder_set_do_md5(enc, 0)  // computed in the write callback instead

        metadataBlocks = try FLACTags.blocks(for: metadata, layout: format.layout, channels: format.channels, paddingBytes: paddingBytes)
        let count = UInt32(metadataBlocks.count)
        _ = metadataBlocks.withUnsafeMutableBufferPointer { FLAC__stream_encoder_set_metadata(enc, $0.baseAddress, count) }

        let status = FLAC__stream_encoder_init_stream(
            enc,
            { _, buffer, bytes, frames, _, client in
                let me = Unmanaged<FLACTakeWriter>.fromOpaque(client!).takeUnretainedValue()
                guard !me.refuseIO, let buffer else { return FLAC__STREAM_ENCODER_WRITE_STATUS_FATAL_ERROR }
                me.preallocation.cover(me.fd, through: me.position + Int64(bytes))
                let code = writeFully(me.fd, buffer, bytes, at: me.position)
                guard code == 0 else {
                    me.writeErrno = code
                    return FLAC__STREAM_ENCODER_WRITE_STATUS_FATAL_ERROR
                }
                me.position += Int64(bytes)
                me.highWater = max(me.highWater, me.position)
                if frames > 0 { me.frameWritten(frames: Int(frames), bytes: bytes) }
                return FLAC__STREAM_ENCODER_WRITE_STATUS_OK
            },
            { _, offset, client in
                let me = Unmanaged<FLACTakeWriter>.fromOpaque(client!).takeUnretainedValue()
                guard !me.refuseIO else { return FLAC__STREAM_ENCODER_SEEK_STATUS_ERROR }
                me.position = Int64(offset)
                return FLAC__STREAM_ENCODER_SEEK_STATUS_OK
            },
            { _, offset, client in
                let me = Unmanaged<FLACTakeWriter>.fromOpaque(client!).takeUnretainedValue()
                offset?.pointee = FLAC__uint64(me.position)
                return FLAC__STREAM_ENCODER_TELL_STATUS_OK
            },
            nil,
            Unmanaged.passUnretained(self).toOpaque())
        guard status == FLAC__STREAM_ENCODER_INIT_STATUS_OK else {
            if writeErrno != 0 { throw TapedeckError.system(writeErrno, while: "write the FLAC header of \(path)") }
            throw TapedeckError(.io, "Could not start the FLAC file \(path): libFLAC refused the settings (init status \(status.rawValue), \(stateText(enc))).")
        }
        let blocksize = Int(FLAC__stream_encoder_get_blocksize(enc))
        tail = FLACTail(channels: format.channels, bitsPerSample: Int(bits), capacityFrames: blocksize + 1)
        guard fsync(fd) == 0 else { throw TapedeckError.system(errno, while: "flush the FLAC header of \(path) to disk") }
    }

    /// Appends `frames` interleaved frames, packed little-endian in ``format``.
    /// - Thread: the owning writer thread. Blocks on disk I/O (libFLAC writes whole frames).
    /// - Throws: `.diskFull` for ENOSPC/EDQUOT, `.io` for other failures (including a verify
    ///   mismatch); after a failure, ``finish()`` finalizes what was written whole.
    func write(_ buffer: UnsafeRawPointer, frames: Int) throws {
        guard let enc = encoder else {
            throw TapedeckError(.internalError, "Wrote to the FLAC writer for \(path) after it was closed.")
        }
        guard frames > 0 else { return }
        let count = frames * format.channels
        if count > sampleCapacity {
            samples.deallocate()
            samples = .allocate(capacity: count)
            sampleCapacity = count
        }
        let out = samples
        Self.unpack(buffer, count: count, format: format, into: out)
        if unhashedStart > 0 && unhashedStart >= unhashed.count / 2 {
            unhashed.removeFirst(unhashedStart)
            unhashedStart = 0
        }
        unhashed.append(contentsOf: UnsafeRawBufferPointer(start: buffer, count: frames * format.bytesPerFrame))
        guard FLAC__stream_encoder_process_interleaved(enc, out, UInt32(frames)) != 0 else {
            throw failure(enc, while: "write audio to \(path)")
        }
        framesSubmitted += Int64(frames)
        tail.keep(pending: Int(framesSubmitted - framesEncoded), of: out, frames: frames)
    }

    /// Sets a new encoder's format and level, and the streamable subset where the format is in it
    /// (the subset stops at 24 bits and at rates a frame header can spell). - Thread: any.
    static func configure(_ enc: UnsafeMutablePointer<FLAC__StreamEncoder>, format: AudioFormat, level: Int) {
        let bits = UInt32(format.sampleFormat.bitsPerSample)
        _ = FLAC__stream_encoder_set_channels(enc, UInt32(format.channels))
        _ = FLAC__stream_encoder_set_bits_per_sample(enc, bits)
        _ = FLAC__stream_encoder_set_sample_rate(enc, UInt32(format.sampleRate))
        _ = FLAC__stream_encoder_set_compression_level(enc, UInt32(level))
        let subset = bits <= 24 && FLAC__format_sample_rate_is_subset(UInt32(format.sampleRate)) != 0
        _ = FLAC__stream_encoder_set_streamable_subset(enc, subset ? 1 : 0)
    }

    /// Widens `count` packed little-endian samples of `format` at `buffer` to the 32-bit
    /// integers libFLAC takes. - Thread: any; never blocks.
    static func unpack(_ buffer: UnsafeRawPointer, count: Int, format: AudioFormat, into out: UnsafeMutablePointer<Int32>) {
        switch format.sampleFormat {
        case .s16:
            for i in 0..<count { out[i] = Int32(Int16(littleEndian: buffer.loadUnaligned(fromByteOffset: i &* 2, as: Int16.self))) }
        case .s24:
            for i in 0..<count { out[i] = Sample24.load(buffer, index: i) }
        case .s32, .f32:
            for i in 0..<count { out[i] = Int32(littleEndian: buffer.loadUnaligned(fromByteOffset: i &* 4, as: Int32.self)) }
        }
    }

    /// Takes a frame of `frames` frames that libFLAC has just written (`bytes` long, ending at
    /// ``position``) into the MD5 and the frame statistics. - Thread: the owning writer thread.
    fileprivate func frameWritten(frames: Int, bytes: Int) {
        let count = frames * format.bytesPerFrame
        unhashed.withUnsafeBytes { md5.update($0.baseAddress! + unhashedStart, count: min(count, $0.count - unhashedStart)) }
        unhashedStart = min(unhashedStart + count, unhashed.count)
        framesEncoded += Int64(frames)
        framesEnd = position
        minFrameBytes = min(minFrameBytes, bytes)
        maxFrameBytes = max(maxFrameBytes, bytes)
    }

    /// `fdatasync`s the frames libFLAC has written, after recording the frames it still holds as a
    /// tail record (see the type's documentation), so a crash after it loses nothing written before.
    /// STREAMINFO keeps "total unknown" until ``finish()``.
    /// - Thread: the owning writer thread. Blocks on disk I/O.
    func checkpoint() throws {
        guard encoder != nil else { return }
        if tail.isValid && tail.frames > 0 {
            let code = tail.write(to: fd, at: position, sampleNumber: UInt64(framesEncoded))
            if code != 0 { throw TapedeckError.system(code, while: "write a checkpoint to \(path)") }
        }
        guard fdatasync(fd) == 0 else { throw TapedeckError.system(errno, while: "flush \(path) to disk") }
    }

    /// Encodes the last block, lets libFLAC rewrite STREAMINFO (total samples, frame sizes), cuts
    /// off any checkpoint tail, writes Tapedeck's own MD5 of the input (``writeSignature(to:)``),
    /// `fsync`s and closes the file.
    /// - Thread: the owning writer thread. Blocks on disk I/O.
    /// - Returns: frames in the file.
    /// - Throws: `.diskFull`/`.io`, including when libFLAC's verify mode found a mismatch.
    func finish() throws -> Int64 {
        guard let enc = encoder else { throw TapedeckError(.internalError, "Finished the FLAC writer for \(path) twice.") }
        if writeErrno != 0 { return try finishAfterWriteFailure() }
        let ok = FLAC__stream_encoder_finish(enc) != 0
        let problem = ok ? nil : failure(enc, while: "finish \(path)")
        discardEncoder()
        let fd = self.fd
        self.fd = -1
        defer { close(fd) }
        if let problem { throw problem }
        let file = FLACFile(fd: fd, path: path, kind: "FLAC")
        if try file.length() > highWater { try file.truncate(to: highWater) }
        Preallocation.trim(fd)
        try writeSignature(to: file)
        try file.sync()
        if inlineVerify {
            let how = "every frame decoded by libFLAC's verify mode and compared with the input"
            // STREAMINFO as it reached the disk holds the true length and the MD5 of the input.
            let info = try FLACHeader.read(from: file).streamInfo
            guard Int64(info.totalSamples) == framesSubmitted, info.md5.contains(where: { $0 != 0 }) else {
                throw TapedeckError(.io, "Verifying \(path) failed: STREAMINFO says \(info.totalSamples) frames and holds no MD5. Nothing was kept.")
            }
            verification = "\(how); STREAMINFO holds \(framesSubmitted) frames and MD5 \(MD5.hex(info.md5))"
        }
        return framesSubmitted
    }

    /// After a failed write (the disk is full): keeps the frames written whole, without touching
    /// the disk beyond shortening the file and rewriting STREAMINFO in place, and without decoding
    /// anything, so the take is final at once however long it is. The frames libFLAC still held,
    /// and any checkpoint tail, are dropped.
    /// - Returns: the frames kept.
    private func finishAfterWriteFailure() throws -> Int64 {
        refuseIO = true
        discardEncoder()
        let fd = self.fd
        self.fd = -1
        defer { close(fd) }
        let file = FLACFile(fd: fd, path: path, kind: "FLAC")
        let end = max(framesEnd, try FLACHeader.read(from: file).audioStart)
        if try file.length() > end { try file.truncate(to: end) }
        Preallocation.trim(fd)
        try writeSignature(to: file)
        try file.sync()
        return framesEncoded
    }

    /// Writes the frames' count, MD5 and frame sizes into STREAMINFO.
    private func writeSignature(to file: FLACFile) throws {
        var info = try FLACHeader.read(from: file).streamInfo
        info.totalSamples = UInt64(framesEncoded)
        var digest = md5
        info.md5 = digest.finalize()
        (info.minFrameSize, info.maxFrameSize) = framesEncoded == 0 ? (0, 0) : (minFrameBytes, maxFrameBytes)
        try file.write(info.bytes, at: FLACHeader.streamInfoOffset)
    }

    /// Closes the file exactly as a killed process would leave it: libFLAC's clean-up (which
    /// would encode the last block and rewrite STREAMINFO) is refused any file access, nothing
    /// is synced, and the last checkpoint's tail record stays for repair.
    /// - Thread: the owning writer thread. Does not block noticeably.
    func abandon() {
        refuseIO = true
        discardEncoder()
        if fd >= 0 { close(fd) }
        fd = -1
    }

    private func discardEncoder() {
        if let encoder { FLAC__stream_encoder_delete(encoder) }
        encoder = nil
        for block in metadataBlocks { if let block { FLAC__metadata_object_delete(block) } }
        metadataBlocks = []
    }

    private func stateText(_ enc: UnsafeMutablePointer<FLAC__StreamEncoder>) -> String {
        String(cString: FLAC__stream_encoder_get_resolved_state_string(enc))
    }

    /// Maps a libFLAC failure (and the write callback's `errno`) to a ``TapedeckError``.
    private func failure(_ enc: UnsafeMutablePointer<FLAC__StreamEncoder>, while action: String) -> TapedeckError {
        if writeErrno != 0 { return TapedeckError.system(writeErrno, while: action) }
        let state = FLAC__stream_encoder_get_state(enc)
        switch state {
        case FLAC__STREAM_ENCODER_VERIFY_MISMATCH_IN_AUDIO_DATA:
            var sample: FLAC__uint64 = 0
            var frame: UInt32 = 0, channel: UInt32 = 0, offset: UInt32 = 0
            var expected: FLAC__int32 = 0, got: FLAC__int32 = 0
            FLAC__stream_encoder_get_verify_decoder_error_stats(enc, &sample, &frame, &channel, &offset, &expected, &got)
            return TapedeckError(.io,
                "Could not \(action): libFLAC's verify mode decoded sample \(sample) (frame \(frame), channel \(channel)) as \(got) instead of \(expected). The encoder or memory is faulty; record to another format and report this.")
        case FLAC__STREAM_ENCODER_VERIFY_DECODER_ERROR:
            let verifyState = FLAC__stream_encoder_get_verify_decoder_state(enc)
            return TapedeckError(.io, "Could not \(action): libFLAC's verify decoder failed (state \(verifyState.rawValue)). Record to another format and report this.")
        case FLAC__STREAM_ENCODER_MEMORY_ALLOCATION_ERROR:
            return TapedeckError(.io, "Could not \(action): out of memory.")
        default:
            return TapedeckError(.io, "Could not \(action): \(stateText(enc)).")
        }
    }
}
