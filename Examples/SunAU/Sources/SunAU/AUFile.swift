import Foundation
import TapedeckCore
#if canImport(Glibc)
import Glibc
#endif

/// The 24-byte header of a Sun/NeXT audio file and the annotation after it. Fields are big-endian:
/// `.snd`, the data offset, the data size (all ones: unknown), the encoding, the rate, the channels.
struct AUHeader {
    static let magic: [UInt8] = Array(".snd".utf8)
    static let unknownSize: UInt32 = 0xFFFF_FFFF
    /// The longest annotation written or accepted (a header's offset can say anything).
    static let maxAnnotation = 4096

    /// The sample encodings Tapedeck reads; it writes all but 8-bit.
    enum Encoding: UInt32 {
        case linear8 = 2, linear16 = 3, linear24 = 4, linear32 = 5, float32 = 6

        init(_ format: SampleFormat) {
            switch format {
            case .s16: self = .linear16
            case .s24: self = .linear24
            case .s32: self = .linear32
            case .f32: self = .float32
            }
        }

        /// Bytes of one sample in the file.
        var width: Int {
            switch self {
            case .linear8: 1
            case .linear16: 2
            case .linear24: 3
            case .linear32, .float32: 4
            }
        }

        /// The format Tapedeck hands on (8-bit samples are widened to 16).
        var sampleFormat: SampleFormat {
            switch self {
            case .linear8, .linear16: .s16
            case .linear24: .s24
            case .linear32: .s32
            case .float32: .f32
            }
        }
    }

    var dataOffset: Int
    var dataSize: UInt32
    var encoding: Encoding
    var sampleRate: Int
    var channels: Int
    var annotation: [UInt8] = []

    /// A new file's header: the annotation as UTF-8 (NUL bytes dropped, at most ``maxAnnotation``
    /// bytes, cut between characters), padded with NULs to a multiple of 8 bytes, at least one.
    init(format: AudioFormat, annotation text: String, dataSize: UInt32) {
        var utf8 = Array(text.utf8.filter { $0 != 0 })
        if utf8.count > Self.maxAnnotation - 1 {
            utf8 = Array(utf8.prefix(Self.maxAnnotation - 1))
            while let last = utf8.last, last & 0xC0 == 0x80 { utf8.removeLast() }  // a character's continuation bytes
            if let last = utf8.last, last >= 0xC0 { utf8.removeLast() }              // and the lead byte left alone
        }
        let padded = (utf8.count + 1 + 7) / 8 * 8
        annotation = utf8 + [UInt8](repeating: 0, count: padded - utf8.count)
        dataOffset = 24 + annotation.count
        self.dataSize = dataSize
        encoding = Encoding(format.sampleFormat)
        sampleRate = format.sampleRate
        channels = format.channels
    }

    private init(dataOffset: Int, dataSize: UInt32, encoding: Encoding, sampleRate: Int, channels: Int) {
        self.dataOffset = dataOffset
        self.dataSize = dataSize
        self.encoding = encoding
        self.sampleRate = sampleRate
        self.channels = channels
    }

    /// The format of what a reader hands on.
    var format: AudioFormat { AudioFormat(sampleRate: sampleRate, channels: channels, sampleFormat: encoding.sampleFormat) }
    /// Bytes of one frame in the file.
    var bytesPerFrame: Int { encoding.width * channels }

    /// The header and annotation as written at the start of the file.
    var bytes: [UInt8] {
        Self.magic + Self.bigEndian(UInt32(dataOffset)) + Self.bigEndian(dataSize) + Self.bigEndian(encoding.rawValue)
            + Self.bigEndian(UInt32(sampleRate)) + Self.bigEndian(UInt32(channels)) + annotation
    }

    /// The size field for `bytes` of audio: the size, or "unknown" from 4 GiB on.
    static func sizeField(forDataBytes bytes: Int64) -> UInt32 {
        bytes < Int64(unknownSize) ? UInt32(bytes) : unknownSize
    }

    static func bigEndian(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
    }

    static func number(_ bytes: [UInt8], at offset: Int) -> UInt32 {
        UInt32(bytes[offset]) << 24 | UInt32(bytes[offset + 1]) << 16 | UInt32(bytes[offset + 2]) << 8 | UInt32(bytes[offset + 3])
    }

    /// Reads and checks the header of `file`, and its length. Every field is checked before it
    /// is used, so a damaged or hostile file is refused with a message, never trusted.
    /// - Throws: `.corruptFile` (not an AU file, an impossible field), `.unsupportedFormat` (an
    ///   encoding Tapedeck does not read: µ-law, A-law, ADPCM), or an I/O error.
    static func read(_ file: PositionalFile) throws -> (AUHeader, Int64) {
        let length = try file.length()
        guard length >= 24 else {
            throw TapedeckError(.corruptFile, "\(file.path) is not a Sun/NeXT audio file: it is shorter than the 24-byte header.")
        }
        let head = try file.read(24, at: 0)
        guard head.prefix(4).elementsEqual(magic) else {
            throw TapedeckError(.corruptFile, "\(file.path) is not a Sun/NeXT audio file (it does not begin with .snd).")
        }
        let offset = Int(number(head, at: 4))
        guard offset >= 24, offset <= 24 + maxAnnotation, Int64(offset) <= length else {
            throw TapedeckError(.corruptFile, "\(file.path) has an impossible data offset (\(offset)) in its header: the file is damaged.")
        }
        let code = number(head, at: 12)
        guard let encoding = Encoding(rawValue: code) else {
            throw TapedeckError(.unsupportedFormat, "\(file.path) holds audio of encoding \(code) (µ-law, A-law or ADPCM), which this build does not read. Convert it to linear PCM first, e.g. sox IN.au -e signed-integer OUT.au.")
        }
        let header = AUHeader(dataOffset: offset, dataSize: number(head, at: 8), encoding: encoding,
                              sampleRate: Int(number(head, at: 16)), channels: Int(number(head, at: 20)))
        do { try header.format.validate() } catch {
            throw TapedeckError(.corruptFile, "\(file.path) has an impossible format in its header (\(header.sampleRate) Hz, \(header.channels) channels): the file is damaged.")
        }
        return (header, length)
    }
}

/// Reverses the bytes of each `width`-byte sample from `source` into `target` (little-endian
/// samples to big-endian ones and back).
func swapSamples(_ source: UnsafeRawPointer, _ target: UnsafeMutableRawPointer, bytes: Int, width: Int) {
    switch width {
    case 2:
        for i in stride(from: 0, to: bytes, by: 2) {
            target.storeBytes(of: source.loadUnaligned(fromByteOffset: i, as: UInt16.self).byteSwapped, toByteOffset: i, as: UInt16.self)
        }
    case 4:
        for i in stride(from: 0, to: bytes, by: 4) {
            target.storeBytes(of: source.loadUnaligned(fromByteOffset: i, as: UInt32.self).byteSwapped, toByteOffset: i, as: UInt32.self)
        }
    default:
        let s = source.assumingMemoryBound(to: UInt8.self)
        let t = target.assumingMemoryBound(to: UInt8.self)
        for i in stride(from: 0, to: bytes, by: width) {
            for k in 0..<width { t[i + k] = s[i + width - 1 - k] }
        }
    }
}

/// Writes one file (or stream) of big-endian samples. Single owner: created, used and finished
/// on the writer thread; every method blocks on disk I/O or on the pipe's reader.
final class AUWriter: TakeWriter {
    let file: PositionalFile
    let format: AudioFormat
    let dataOffset: Int
    /// A file (the size is written at each checkpoint and at the end), or a pipe (never sought).
    let seekable: Bool
    private var position: Int64 = 0
    private var frames: Int64 = 0
    private var closed = false
    /// A write failed part way: the file may hold bytes `frames` does not count.
    private var writeFailed = false
    private var scratch = [UInt8](repeating: 0, count: 1 << 16)

    init(file: PositionalFile, format: AudioFormat, dataOffset: Int, seekable: Bool) {
        self.file = file
        self.format = format
        self.dataOffset = dataOffset
        self.seekable = seekable
        position = seekable ? Int64(dataOffset) : 0
    }

    /// Appends bytes where the last write ended.
    func append(_ bytes: [UInt8]) throws {
        try bytes.withUnsafeBytes { try put($0.baseAddress!, count: $0.count) }
    }

    private func put(_ bytes: UnsafeRawPointer, count: Int) throws {
        if seekable {
            try file.write(bytes, count: count, at: position)
        } else {
            var done = 0
            while done < count {
                let n = Glibc.write(file.fd, bytes + done, count - done)
                if n < 0 {
                    if errno == EINTR { continue }
                    throw TapedeckError.system(errno, while: "write to \(file.path)")
                }
                done += n
            }
        }
        position += Int64(count)
    }

    func write(_ buffer: UnsafeRawPointer, frames n: Int) throws {
        let width = format.sampleFormat.bytesPerSample
        let total = n * format.bytesPerFrame
        let chunk = scratch.count / format.bytesPerFrame * format.bytesPerFrame
        var done = 0
        do {
            while done < total {
                let count = min(chunk, total - done)
                try scratch.withUnsafeMutableBytes { raw in
                    swapSamples(buffer + done, raw.baseAddress!, bytes: count, width: width)
                    try put(raw.baseAddress!, count: count)
                }
                done += count
            }
        } catch {
            writeFailed = true
            throw error
        }
        frames += Int64(n)
    }

    /// The size of what is written goes into the header, then the file is synced.
    func checkpoint() throws {
        guard seekable else { return }
        try file.write(AUHeader.bigEndian(AUHeader.sizeField(forDataBytes: frames * Int64(format.bytesPerFrame))), at: 8)
        guard fdatasync(file.fd) == 0 else { throw TapedeckError.system(errno, while: "sync \(file.path)") }
    }

    func finish() throws -> Int64 {
        defer { abandon() }
        // After a failed write the file may hold bytes `frames` does not count: throw, and the
        // recorder repairs the file from its length (TakeWriter.finish).
        if writeFailed { throw TapedeckError(.io, "\(file.path) was cut short by a failed write; it is repaired from its length.") }
        if seekable {
            try file.write(AUHeader.bigEndian(AUHeader.sizeField(forDataBytes: frames * Int64(format.bytesPerFrame))), at: 8)
            try file.sync()
        }
        return frames
    }

    func abandon() {
        if seekable && !closed {
            close(file.fd)
        }
        closed = true
    }
}

/// Reads a file's samples as little-endian interleaved frames. Single owner: the reading thread;
/// `read` blocks on disk I/O.
final class AUReader: TakeReader {
    let file: PositionalFile
    let header: AUHeader
    let format: AudioFormat
    let frameCount: Int64
    private var frame: Int64 = 0
    private var closed = false

    init(file: PositionalFile, header: AUHeader, frameCount: Int64) {
        self.file = file
        self.header = header
        format = header.format
        self.frameCount = frameCount
    }

    /// `s8` for 8-bit files, whose samples are handed on widened to 16 bits.
    var sourceEncoding: String? { header.encoding == .linear8 ? "s8" : nil }

    func read(into buffer: UnsafeMutableRawPointer, maxFrames: Int) throws -> Int {
        let wanted = Int(min(Int64(maxFrames), frameCount - frame))
        guard wanted > 0 else { return 0 }
        let perRead = max(1, PositionalFile.maxRead / header.bytesPerFrame)
        var done = 0
        while done < wanted {
            let n = min(perRead, wanted - done)
            let bytes = try file.read(n * header.bytesPerFrame, at: Int64(header.dataOffset) + (frame + Int64(done)) * Int64(header.bytesPerFrame))
            let target = buffer + done * format.bytesPerFrame
            bytes.withUnsafeBytes { raw in
                if header.encoding == .linear8 {
                    // Signed 8-bit to 16-bit: the byte becomes the high byte.
                    for i in 0..<raw.count {
                        target.storeBytes(of: Int16(Int8(bitPattern: raw[i])) << 8, toByteOffset: i * 2, as: Int16.self)
                    }
                } else {
                    swapSamples(raw.baseAddress!, target, bytes: raw.count, width: header.encoding.width)
                }
            }
            done += n
        }
        frame += Int64(wanted)
        return wanted
    }

    func close() {
        if !closed { Glibc.close(file.fd) }
        closed = true
    }
}
