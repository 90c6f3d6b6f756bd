import CFLAC
import TapedeckCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Reads one FLAC file frame by frame through libFLAC. Single owner, not `Sendable`.
///
/// Each `process_single` decodes one FLAC frame; the write callback packs it straight into a
/// pending buffer in ``format``'s little-endian layout (no per-sample allocation), and ``read``
/// copies from there. Depths 16, 24 and 32 are delivered as s16, s24 and s32; other depths are
/// shifted up to the next of 16, 24 or 32 bits (8 and 12 → s16, 20 → s24).
final class FLACTakeReader: TakeReader {
    let format: AudioFormat
    /// `8-bit`, `12-bit`, `20-bit`… for depths delivered widened; `nil` for 16, 24 and 32 bits.
    var sourceEncoding: String? { [16, 24, 32].contains(bitsPerSample) ? nil : "\(bitsPerSample)-bit" }
    /// STREAMINFO's total samples; if that is 0 (unknown: a file whose writer never finished),
    /// the file is decoded once at open to count its good frames.
    private(set) var frameCount: Int64 = 0
    let path: String

    private var fd: Int32
    private var source: FLACSource?
    private let bitsPerSample: Int
    private let shift: Int32
    private var pending: UnsafeMutableRawPointer
    private var pendingCapacity: Int
    private var pendingStart = 0
    private var pendingEnd = 0
    private var counting = false
    private var counted: Int64 = 0
    private var mismatch = false

    /// Opens `path` and reads its metadata.
    /// - Thread: the thread that will read it. Blocks on disk I/O.
    /// - Throws: `.notFound` if missing; `.corruptFile` if it is not a readable FLAC file.
    init(path: String) throws {
        self.path = path
        fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw TapedeckError.system(errno, while: "open \(path)") }
        let info: FLACHeader.StreamInfo
        let header: FLACHeader
        do {
            header = try FLACHeader.read(from: FLACFile(fd: fd, path: path, kind: "FLAC"))
            info = header.streamInfo
            source = try FLACSource(fd: fd, path: path)
        } catch {
            closeDescriptor(fd)
            throw error
        }
        bitsPerSample = info.bitsPerSample
        format = header.audioFormat
        shift = Int32(format.sampleFormat.bitsPerSample - info.bitsPerSample)
        pendingCapacity = max(info.maxBlockSize, 4096) * format.bytesPerFrame
        pending = .allocate(byteCount: pendingCapacity, alignment: 16)
        source?.onFrame = { [unowned self] frame, buffer in self.deliver(frame, buffer) }
        guard let source, source.processMetadata(), source.error == nil, source.streamInfo != nil else {
            close()
            throw TapedeckError(.corruptFile, "\(path) cannot be read as FLAC: its metadata is damaged.")
        }
        // STREAMINFO is a claim: a frame takes at least 9 bytes (header, subframes, CRC) and holds
        // at most the maximum block size, so more samples than that bound cannot be in the file.
        // Such a claim (or none) is replaced by counting the frames really there.
        let audioBytes = max(0, header.fileLength - header.audioStart)
        let bound = Int64(max(info.maxBlockSize, 16)) * (audioBytes / 9 + 1)
        frameCount = Int64(info.totalSamples)
        if frameCount == 0 || frameCount > bound || audioBytes == 0 { countFrames(source) }
    }

    deinit {
        close()
        pending.deallocate()
    }

    /// Decodes the whole stream once to count its good frames, then rewinds.
    private func countFrames(_ source: FLACSource) {
        counting = true
        var idle = 0
        while !source.atEnd && idle < 64 {
            let before = counted
            guard source.processSingle(), source.error == nil else { break }
            idle = counted == before ? idle + 1 : 0
        }
        counting = false
        frameCount = counted
        _ = source.reset()
        _ = source.processMetadata()
    }

    /// The write callback's work: packs one decoded frame into the pending buffer.
    private func deliver(_ frame: UnsafePointer<FLAC__Frame>, _ buffer: UnsafePointer<UnsafePointer<FLAC__int32>?>) -> Bool {
        let header = frame.pointee.header
        let n = Int(header.blocksize)
        let ch = format.channels
        guard Int(header.channels) == ch, Int(header.bits_per_sample) == bitsPerSample else { mismatch = true; return false }
        if counting { counted += Int64(n); return true }
        let stride = format.bytesPerFrame
        if n * stride > pendingCapacity {
            pending.deallocate()
            pendingCapacity = n * stride
            pending = .allocate(byteCount: pendingCapacity, alignment: 16)
        }
        let shift = self.shift
        switch format.sampleFormat {
        case .s16:
            let out = pending.assumingMemoryBound(to: Int16.self)
            for c in 0..<ch {
                guard let src = buffer[c] else { return false }
                var j = c
                for i in 0..<n {
                    out[j] = Int16(truncatingIfNeeded: src[i] &<< shift).littleEndian
                    j &+= ch
                }
            }
        case .s24:
            for c in 0..<ch {
                guard let src = buffer[c] else { return false }
                var p = pending + c * 3
                for i in 0..<n {
                    let v = UInt32(bitPattern: src[i] &<< shift)
                    p.storeBytes(of: UInt8(truncatingIfNeeded: v), as: UInt8.self)
                    (p + 1).storeBytes(of: UInt8(truncatingIfNeeded: v &>> 8), as: UInt8.self)
                    (p + 2).storeBytes(of: UInt8(truncatingIfNeeded: v &>> 16), as: UInt8.self)
                    p += stride
                }
            }
        case .s32, .f32:
            let out = pending.assumingMemoryBound(to: Int32.self)
            for c in 0..<ch {
                guard let src = buffer[c] else { return false }
                var j = c
                for i in 0..<n {
                    out[j] = (src[i] &<< shift).littleEndian
                    j &+= ch
                }
            }
        }
        pendingStart = 0
        pendingEnd = n * stride
        return true
    }

    /// Reads up to `maxFrames` interleaved frames into `buffer`, packed little-endian in
    /// ``format``; returns 0 at the end.
    /// - Thread: the owning thread. Blocks on disk I/O and decoding.
    /// - Throws: `.corruptFile` if a frame is damaged; `.io` if reading fails.
    func read(into buffer: UnsafeMutableRawPointer, maxFrames: Int) throws -> Int {
        guard let source, maxFrames > 0 else { return 0 }
        let stride = format.bytesPerFrame
        var total = 0
        var idle = 0
        while total < maxFrames {
            if pendingStart < pendingEnd {
                let bytes = min(pendingEnd - pendingStart, (maxFrames - total) * stride)
                (buffer + total * stride).copyMemory(from: pending + pendingStart, byteCount: bytes)
                pendingStart += bytes
                total += bytes / stride
                continue
            }
            if source.atEnd { break }
            guard source.processSingle() else {
                if source.readErrno != 0 { throw TapedeckError.system(source.readErrno, while: "read \(path)") }
                throw TapedeckError(.corruptFile, "Could not read \(path): \(mismatch ? "a frame's format differs from STREAMINFO" : source.stateText). The file is damaged.")
            }
            if let error = source.error {
                throw TapedeckError(.corruptFile, "Could not read \(path): \(FLACSource.describe(error)). The file is damaged; try repairing it.")
            }
            idle = pendingStart < pendingEnd ? 0 : idle + 1
            if idle > 64 { throw TapedeckError(.corruptFile, "Could not read \(path): the decoder stopped making progress.") }
        }
        return total
    }

    /// Closes the file. Safe to call twice.
    /// - Thread: the owning thread. Does not block noticeably.
    func close() {
        source = nil
        if fd >= 0 { closeDescriptor(fd) }
        fd = -1
    }
}

/// Closes a descriptor (the reader's own `close()` hides the C function inside the class).
private func closeDescriptor(_ fd: Int32) {
    _ = close(fd)
}
