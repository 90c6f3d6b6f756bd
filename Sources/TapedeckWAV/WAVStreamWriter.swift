import Foundation
public import TapedeckCore
#if canImport(Glibc)
import Glibc
#endif

/// Writes WAV to a stream that cannot seek: a header whose RIFF and data sizes are 0xFFFFFFFF
/// ("until the end", as `arecord` and `sox` write to a pipe), then the samples as they come.
/// WAVE_FORMAT_EXTENSIBLE with the take's channel mask for more than two channels or a layout
/// other than the conventional one, as the file writer does. When the stream turns out to be a
/// regular file (`tapedeck record -o - > take.wav`), the sizes are written in at the end, as
/// `sox` does, so the file is an ordinary WAV; a file killed before the end keeps the "until
/// the end" sizes, which every reader accepts. Single owner.
final class WAVStreamWriter: TakeWriter {
    private let fd: Int32
    private let format: AudioFormat
    private var frames: Int64 = 0
    /// Where the header begins when `fd` is a seekable regular file; `nil` for a pipe, a
    /// terminal or a socket.
    private let headerOffset: Int64?
    private let headerSize: Int

    /// - Parameter expectedFrames: the length the recording will have (`-d`): the header says it
    ///   (as `arecord -d` does), so a pipe's reader knows the length; `nil`: "until the end".
    init(fd: Int32, format: AudioFormat, expectedFrames: Int64? = nil) throws {
        self.fd = fd
        self.format = format
        let header = Self.header(format, dataBytes: expectedFrames.map { $0 * Int64(format.bytesPerFrame) })
        headerSize = header.count
        var status = stat()
        if fstat(fd, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG, fcntl(fd, F_GETFL) & O_APPEND == 0 {
            let at = lseek(fd, 0, SEEK_CUR)
            headerOffset = at >= 0 ? Int64(at) : nil
        } else {
            headerOffset = nil
        }
        try header.withUnsafeBytes { try StreamOutput.write(fd, $0.baseAddress!, $0.count) }
    }

    static func header(_ format: AudioFormat, dataBytes: Int64? = nil) -> [UInt8] {
        var b: [UInt8] = []
        func u16(_ v: UInt16) { b += [UInt8(v & 0xFF), UInt8(v >> 8)] }
        func u32(_ v: UInt32) { for i in 0..<4 { b.append(UInt8((v >> (8 * UInt32(i))) & 0xFF)) } }
        let bits = UInt16(format.sampleFormat.bitsPerSample)
        let blockAlign = UInt16(format.bytesPerFrame)
        let extensible = format.channels > 2 || format.layout != .conventional(channels: format.channels)
        let tag: UInt16 = format.sampleFormat.isFloat ? 3 : 1
        b += Array("RIFF".utf8); u32(0xFFFF_FFFF); b += Array("WAVE".utf8)
        let riffAt = 4
        b += Array("fmt ".utf8); u32(extensible ? 40 : 16)
        u16(extensible ? 0xFFFE : tag); u16(UInt16(format.channels)); u32(UInt32(format.sampleRate))
        u32(UInt32(format.sampleRate) * UInt32(blockAlign)); u16(blockAlign); u16(bits)
        if extensible {
            u16(22); u16(bits); u32(format.layout.mask)
            u16(tag); b += [0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xAA, 0x00, 0x38, 0x9B, 0x71]
        }
        b += Array("data".utf8); u32(0xFFFF_FFFF)
        // A known length that fits 32 bits goes in both sizes.
        if let dataBytes, dataBytes + Int64(b.count) - 8 <= Int64(UInt32.max) {
            func put(_ v: Int64, at i: Int) { for k in 0..<4 { b[i + k] = UInt8((UInt64(v) >> (8 * UInt64(k))) & 0xFF) } }
            put(dataBytes + Int64(b.count) - 8, at: riffAt)
            put(dataBytes, at: b.count - 4)
        }
        return b
    }

    func write(_ buffer: UnsafeRawPointer, frames: Int) throws {
        try StreamOutput.write(fd, buffer, frames * format.bytesPerFrame)
        self.frames += Int64(frames)
    }

    /// Nothing to bring up to date: a stream's header is final from the start.
    func checkpoint() throws {}

    func finish() throws -> Int64 {
        if let start = headerOffset {
            let data = frames * Int64(format.bytesPerFrame)
            let riff = data + Int64(headerSize) - 8
            if riff <= Int64(UInt32.max) {
                func put(_ value: Int64, at offset: Int) {
                    var le = UInt32(value).littleEndian
                    _ = withUnsafeBytes(of: &le) { pwrite(fd, $0.baseAddress!, 4, off_t(start) + off_t(offset)) }
                }
                put(riff, at: 4)
                put(data, at: headerSize - 4)
            }
        }
        return frames
    }

    func abandon() {}
}

extension WAVEncoder {
    /// A WAV stream to `fd` (`WAVStreamWriter`). - Thread: the owning writer thread.
    public func makeStreamWriter(to fd: Int32, format: AudioFormat, metadata: TakeMetadata) throws -> any TakeWriter {
        try validate(format)
        return try WAVStreamWriter(fd: fd, format: format, expectedFrames: metadata.expectedFrames)
    }
}
