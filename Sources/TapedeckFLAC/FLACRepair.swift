import CFLAC
import TapedeckCore

/// Repairs FLAC files whose writer died (see ``FLACEncoder/repair(fileAt:)``).
///
/// Decodes frame by frame from the end of the metadata and keeps every frame up to the first lost
/// sync, damaged header, CRC mismatch or end of file, computing the MD5 of their samples as FLAC
/// defines it (each sample little-endian in ceil(bits/8) bytes, interleaved). A checkpoint tail
/// record right after the last good frame becomes one more (verbatim) frame. The file is cut
/// after the last good frame, STREAMINFO's total samples, MD5 and frame sizes are rewritten in
/// place, and the file is synced. Running it again changes nothing.
/// Thread: any. Blocks on disk I/O.
enum FLACRepair {
    struct Scan {
        var frames: Int64 = 0
        var end: Int64 = 0
        var frameCount: UInt64 = 0
        var allFull = true
        var minFrame = Int.max
        var maxFrame = 0
        var md5 = MD5()
    }

    static func repair(_ file: FLACFile) throws -> RepairResult {
        let header = try FLACHeader.read(from: file)
        let info = header.streamInfo
        let format = header.audioFormat
        // Tapedeck writes only formats it supports: any other in a file to repair is a damaged
        // STREAMINFO (a power cut that garbled it), not a format to keep.
        guard (try? format.validate()) != nil else {
            throw TapedeckError(.corruptFile,
                "\(file.path) cannot be repaired: its STREAMINFO is damaged (it names \(info.sampleRate) Hz, \(info.channels) channels, \(info.bitsPerSample) bits).")
        }
        var scan = try scanFrames(file, header)
        var changed = false

        // Frames a checkpoint saved but libFLAC never wrote: append them as a verbatim frame.
        if scan.allFull, info.minBlockSize == info.maxBlockSize,
           let tail = try FLACTail.read(from: file, at: scan.end, fileLength: header.fileLength, channels: info.channels,
                                        bitsPerSample: info.bitsPerSample, sampleNumber: UInt64(scan.frames),
                                        maxFrames: info.maxBlockSize),
           let frame = FLACVerbatimFrame.make(samples: tail.samples, frames: tail.frames, channels: info.channels,
                                              bitsPerSample: info.bitsPerSample, sampleRate: info.sampleRate,
                                              frameNumber: scan.frameCount) {
            try file.write(frame, at: scan.end)
            tail.samples.withUnsafeBufferPointer { addToMD5(&scan.md5, $0.baseAddress!, count: $0.count, bits: info.bitsPerSample) }
            scan.end += Int64(frame.count)
            scan.frames += Int64(tail.frames)
            scan.minFrame = min(scan.minFrame, frame.count)
            scan.maxFrame = max(scan.maxFrame, frame.count)
            changed = true
        }
        if scan.end != header.fileLength {
            try file.truncate(to: scan.end)
            changed = true
        }
        var fixed = info
        fixed.totalSamples = UInt64(scan.frames)
        fixed.md5 = scan.md5.finalize()
        fixed.minFrameSize = scan.frameCount == 0 ? 0 : scan.minFrame
        fixed.maxFrameSize = scan.maxFrame
        let old = try file.read(FLACHeader.streamInfoLength, at: FLACHeader.streamInfoOffset)
        let new = fixed.bytes
        if old != new {
            try file.write(new, at: FLACHeader.streamInfoOffset)
            changed = true
        }
        try file.sync()
        return RepairResult(frames: scan.frames, format: format, headerRepaired: changed)
    }

    /// Decodes every good frame, stopping at the first error or the end.
    static func scanFrames(_ file: FLACFile, _ header: FLACHeader) throws -> Scan {
        let info = header.streamInfo
        let source = try FLACSource(fd: file.fd, path: file.path)
        var scan = Scan()
        scan.end = header.audioStart
        let bytes = (info.bitsPerSample + 7) / 8
        let scratch = UnsafeMutableRawPointer.allocate(byteCount: 65_536 * 8 * 4, alignment: 8)
        defer { scratch.deallocate() }
        var accepted = 0
        source.onFrame = { frame, buffer in
            let h = frame.pointee.header
            let n = Int(h.blocksize)
            guard Int(h.channels) == info.channels, Int(h.bits_per_sample) == info.bitsPerSample,
                  Int(h.sample_rate) == info.sampleRate, n <= info.maxBlockSize else { return false }
            var o = 0
            for i in 0..<n {
                for c in 0..<info.channels {
                    let v = UInt32(bitPattern: buffer[c]![i])
                    for b in 0..<bytes { scratch.storeBytes(of: UInt8(truncatingIfNeeded: v >> (8 * UInt32(b))), toByteOffset: o + b, as: UInt8.self) }
                    o += bytes
                }
            }
            scan.md5.update(scratch, count: o)
            accepted = n
            return true
        }
        guard source.processMetadata(), source.error == nil, source.streamInfo != nil else { return scan }
        var idle = 0
        while idle < 64 {
            accepted = 0
            guard source.processSingle(), source.error == nil else { break }
            if accepted > 0 {
                guard let position = source.decodePosition, position > scan.end else { break }
                if Int64(accepted) != Int64(info.maxBlockSize) { scan.allFull = false }
                let size = Int(position - scan.end)
                scan.minFrame = min(scan.minFrame, size)
                scan.maxFrame = max(scan.maxFrame, size)
                scan.end = position
                scan.frames += Int64(accepted)
                scan.frameCount += 1
                idle = 0
            } else if source.atEnd {
                break
            } else {
                idle += 1
            }
        }
        return scan
    }

    /// Adds interleaved samples to `md5` the way FLAC's signature defines them.
    static func addToMD5(_ md5: inout MD5, _ samples: UnsafePointer<Int32>, count: Int, bits: Int) {
        let bytes = (bits + 7) / 8
        var chunk = [UInt8](repeating: 0, count: 4096 * bytes)
        var i = 0
        while i < count {
            let n = min(4096, count - i)
            for k in 0..<n {
                let v = UInt32(bitPattern: samples[i + k])
                for b in 0..<bytes { chunk[k * bytes + b] = UInt8(truncatingIfNeeded: v >> (8 * UInt32(b))) }
            }
            chunk.withUnsafeBytes { md5.update($0.baseAddress!, count: n * bytes) }
            i += n
        }
    }
}
