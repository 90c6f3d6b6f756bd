import TapedeckCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The frames libFLAC holds but has not yet written, and the checkpoint record that keeps them.
///
/// Record layout, written by ``FLACTakeWriter/checkpoint()`` just past the last FLAC frame (the
/// next frame overwrites it), all integers little-endian:
///
/// | bytes | field |
/// |---|---|
/// | 0–7 | `TDFLTAIL` |
/// | 8 | version (1) |
/// | 9 | channels |
/// | 10 | bits per sample |
/// | 11 | 0 |
/// | 12–15 | frames in the record |
/// | 16–23 | sample number of its first frame (frames libFLAC had written) |
/// | 24–39 | MD5 of bytes 0–23 followed by the samples |
/// | 40… | samples, interleaved, 4 bytes each |
///
/// Repair accepts a record only at the exact end of the last good frame, with matching channels,
/// bits and sample number and a matching checksum; anything else is ignored.
/// Single owner, not `Sendable`. Thread: the writer's (or repair's) thread.
final class FLACTail {
    static let magic = Array("TDFLTAIL".utf8)
    static let headerSize = 40

    let channels: Int
    let bitsPerSample: Int
    let capacityFrames: Int
    /// Frames currently held.
    private(set) var frames = 0
    /// False once the pending count could not be followed (then no record is written).
    private(set) var isValid = true
    private let samples: UnsafeMutablePointer<Int32>
    private var record: [UInt8] = []

    init(channels: Int, bitsPerSample: Int, capacityFrames: Int) {
        self.channels = channels
        self.bitsPerSample = bitsPerSample
        self.capacityFrames = capacityFrames
        samples = .allocate(capacity: capacityFrames * channels)
    }

    deinit { samples.deallocate() }

    /// Records that `pending` frames are held by libFLAC after it was given the `frames` frames at
    /// `buffer`: they are the last `pending` frames submitted. Copies at most one block.
    func keep(pending: Int, of buffer: UnsafePointer<Int32>, frames n: Int) {
        guard isValid else { return }
        guard pending >= 0, pending <= capacityFrames, pending <= frames + n else { isValid = false; return }
        let ch = channels
        if pending <= n {
            samples.update(from: buffer + (n - pending) * ch, count: pending * ch)
        } else {
            let old = pending - n
            memmove(samples, samples + (frames - old) * ch, old * ch * 4)
            (samples + old * ch).update(from: buffer, count: n * ch)
        }
        frames = pending
    }

    /// Writes the record at `offset`. - Returns: 0 or the `errno` of a failed write.
    func write(to fd: Int32, at offset: Int64, sampleNumber: UInt64) -> Int32 {
        record.removeAll(keepingCapacity: true)
        record += Self.magic
        record += [1, UInt8(channels), UInt8(bitsPerSample), 0]
        for i in 0..<4 { record.append(UInt8(truncatingIfNeeded: UInt32(frames) >> (8 * UInt32(i)))) }
        for i in 0..<8 { record.append(UInt8(truncatingIfNeeded: sampleNumber >> (8 * UInt64(i)))) }
        let headerEnd = record.count
        record += [UInt8](repeating: 0, count: 16)
        for i in 0..<(frames * channels) {
            let v = UInt32(bitPattern: samples[i])
            record.append(UInt8(truncatingIfNeeded: v))
            record.append(UInt8(truncatingIfNeeded: v >> 8))
            record.append(UInt8(truncatingIfNeeded: v >> 16))
            record.append(UInt8(truncatingIfNeeded: v >> 24))
        }
        let digest = Self.checksum(record, headerEnd: headerEnd)
        record.replaceSubrange(headerEnd..<(headerEnd + 16), with: digest)
        return record.withUnsafeBytes { writeFully(fd, $0.baseAddress!, $0.count, at: offset) }
    }

    /// MD5 of the header fields followed by the samples (the checksum field itself excluded).
    static func checksum(_ record: [UInt8], headerEnd: Int) -> [UInt8] {
        var md5 = MD5()
        md5.update(Array(record[0..<headerEnd]))
        md5.update(Array(record[(headerEnd + 16)...]))
        return md5.finalize()
    }

    /// Reads a record at `offset` if a valid one for this stream is there.
    /// - Returns: the interleaved samples and their frame count, or nil.
    static func read(from file: FLACFile, at offset: Int64, fileLength: Int64, channels: Int, bitsPerSample: Int,
                     sampleNumber: UInt64, maxFrames: Int) throws -> (samples: [Int32], frames: Int)? {
        guard offset + Int64(headerSize) <= fileLength else { return nil }
        let head = try file.read(headerSize, at: offset)
        guard head[0..<8].elementsEqual(magic), head[8] == 1, Int(head[9]) == channels, Int(head[10]) == bitsPerSample else { return nil }
        let frames = Int(head[12]) | Int(head[13]) << 8 | Int(head[14]) << 16 | Int(head[15]) << 24
        let number = (0..<8).reduce(UInt64(0)) { $0 | UInt64(head[16 + $1]) << (8 * UInt64($1)) }
        guard number == sampleNumber, frames > 0, frames <= maxFrames else { return nil }
        let payload = frames * channels * 4
        guard offset + Int64(headerSize + payload) <= fileLength, payload <= 4 << 20 else { return nil }
        let body = try file.read(payload, at: offset + Int64(headerSize))
        guard checksum(Array(head[0..<24]) + [UInt8](repeating: 0, count: 16) + body, headerEnd: 24) == Array(head[24..<40]) else {
            return nil
        }
        let limit = Int64(1) << (bitsPerSample - 1)
        var samples = [Int32](repeating: 0, count: frames * channels)
        for i in 0..<samples.count {
            let v = Int32(bitPattern: UInt32(body[4 * i]) | UInt32(body[4 * i + 1]) << 8 | UInt32(body[4 * i + 2]) << 16 | UInt32(body[4 * i + 3]) << 24)
            guard Int64(v) >= -limit, Int64(v) < limit else { return nil }
            samples[i] = v
        }
        return (samples, frames)
    }
}
