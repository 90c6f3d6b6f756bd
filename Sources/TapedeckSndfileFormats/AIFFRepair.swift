import Foundation
import TapedeckCore
#if canImport(Glibc)
import Glibc
#endif

/// Repairs AIFF files whose writer died, as `WAVRepair` does for WAV: never trusting a size,
/// reading a few bytes per chunk, and keeping every whole frame the file holds. Plain functions;
/// any thread; block on disk I/O.
enum AIFFRepair {
    struct Chunk {
        var id: String
        var offset: Int64
        var size: Int64
        var payload: Int64 { offset + 8 }
        var next: Int64 { offset + 8 + size + (size & 1) }
    }

    static func repair(path: String) throws -> RepairResult {
        let fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { throw TapedeckError.system(errno, while: "open \(path) for repair") }
        defer { close(fd) }
        func read(_ count: Int, at offset: Int64) throws -> [UInt8] {
            var bytes = [UInt8](repeating: 0, count: count)
            let n = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress, count, off_t(offset)) }
            guard n == count else { throw TapedeckError(.corruptFile, "\(path) ends inside its AIFF header. It cannot be repaired.") }
            return bytes
        }
        func write(_ bytes: [UInt8], at offset: Int64) throws {
            let n = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, bytes.count, off_t(offset)) }
            guard n == bytes.count else { throw TapedeckError.system(errno, while: "rewrite the header of \(path)") }
        }
        func be32(_ b: [UInt8], _ i: Int) -> UInt32 { UInt32(b[i]) << 24 | UInt32(b[i + 1]) << 16 | UInt32(b[i + 2]) << 8 | UInt32(b[i + 3]) }
        func bytes32(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw TapedeckError.system(errno, while: "inspect \(path)") }
        let length = Int64(st.st_size)
        guard length >= 12 else { throw TapedeckError(.corruptFile, "\(path) is \(length) bytes long, too short for an AIFF header. It cannot be repaired.") }
        let form = try read(12, at: 0)
        let kind = String(decoding: form[8..<12], as: UTF8.self)
        guard String(decoding: form[0..<4], as: UTF8.self) == "FORM", kind == "AIFF" || kind == "AIFC" else {
            throw TapedeckError(.corruptFile, "\(path) is not an AIFF file. It cannot be repaired.")
        }
        var comm: Chunk?, ssnd: Chunk?
        var offset: Int64 = 12
        var walked = 0
        while offset + 8 <= length, walked < 1024 {
            let head = try read(8, at: offset)
            let chunk = Chunk(id: String(decoding: head[0..<4], as: UTF8.self), offset: offset, size: Int64(be32(head, 4)))
            walked += 1
            if chunk.id == "COMM" { comm = chunk }
            if chunk.id == "SSND" { ssnd = chunk; break }
            offset = chunk.next
        }
        guard let comm, comm.size >= 18, comm.next <= length else { throw TapedeckError(.corruptFile, "\(path) has no complete COMM chunk. It cannot be repaired.") }
        guard let ssnd, ssnd.payload + 8 <= length else { throw TapedeckError(.corruptFile, "\(path) has no SSND chunk. It cannot be repaired.") }
        let c = try read(min(Int(comm.size), 26), at: comm.payload)
        let channels = Int(UInt16(c[0]) << 8 | UInt16(c[1]))
        let bits = Int(UInt16(c[6]) << 8 | UInt16(c[7]))
        let rateValue = extended80(Array(c[8..<18]))
        guard rateValue.isFinite, (1...10_000_000).contains(rateValue) else {
            throw TapedeckError(.corruptFile, "\(path) has a COMM chunk whose sample rate is not a rate. It cannot be repaired.")
        }
        let rate = Int(rateValue.rounded())
        let compression = kind == "AIFC" && c.count >= 22 ? String(decoding: c[18..<22], as: UTF8.self).lowercased() : "none"
        let sample: SampleFormat
        switch (compression, bits) {
        case ("none", 16), ("twos", 16): sample = .s16
        case ("none", 24), ("twos", 24): sample = .s24
        case ("none", 32), ("twos", 32): sample = .s32
        case ("fl32", _): sample = .f32
        default:
            throw TapedeckError(.unsupportedFormat, "\(path) holds \(bits)-bit \(compression) audio; Tapedeck repairs 16-, 24- and 32-bit PCM and 32-bit float AIFF.")
        }
        let format = AudioFormat(sampleRate: rate, channels: channels, sampleFormat: sample)
        guard (try? format.validate()) != nil else { throw TapedeckError(.corruptFile, "\(path) has a contradictory COMM chunk. It cannot be repaired.") }
        let dataOffset = Int64(be32(try read(4, at: ssnd.payload), 0))
        let audioStart = ssnd.payload + 8 + dataOffset
        guard audioStart <= length else {
            throw TapedeckError(.corruptFile, "\(path) says its audio starts after its end. It cannot be repaired.")
        }
        let frameBytes = Int64(format.bytesPerFrame)
        // Consistent: the declared audio fits and the FORM size covers the file.
        let declaredFrames = Int64(be32(c, 2))
        let declaredEnd = ssnd.next
        let consistent = declaredEnd <= length && Int64(be32(form, 4)) + 8 == length && (ssnd.size - 8 - dataOffset) / frameBytes == declaredFrames
        if consistent { return RepairResult(frames: declaredFrames, format: format, headerRepaired: false) }
        let frames = max(0, (length - audioStart) / frameBytes)
        var end = audioStart + frames * frameBytes
        if end != length { guard ftruncate(fd, off_t(end)) == 0 else { throw TapedeckError.system(errno, while: "truncate \(path)") } }
        if end & 1 == 1 {  // chunks are padded to even sizes
            guard ftruncate(fd, off_t(end + 1)) == 0 else { throw TapedeckError.system(errno, while: "pad \(path)") }
            end += 1
        }
        try write(bytes32(UInt32(clamping: frames)), at: comm.payload + 2)
        try write(bytes32(UInt32(clamping: 8 + dataOffset + frames * frameBytes)), at: ssnd.offset + 4)
        try write(bytes32(UInt32(clamping: end - 8)), at: 4)
        guard fsync(fd) == 0 else { throw TapedeckError.system(errno, while: "sync \(path)") }
        return RepairResult(frames: frames, format: format, headerRepaired: true)
    }

    /// An IEEE 754 80-bit extended value (AIFF's sample rate), big-endian.
    static func extended80(_ b: [UInt8]) -> Double {
        let exponent = Int(UInt16(b[0] & 0x7F) << 8 | UInt16(b[1])) - 16383
        var mantissa: UInt64 = 0
        for i in 2..<10 { mantissa = mantissa << 8 | UInt64(b[i]) }
        let value = Double(mantissa) * pow(2, Double(exponent - 63))
        return b[0] & 0x80 != 0 ? -value : value
    }
}
