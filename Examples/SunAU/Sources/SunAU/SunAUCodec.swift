public import Foundation
public import TapedeckCore
#if canImport(Glibc)
import Glibc
#endif

/// The `au` encoder and decoder: Sun/NeXT audio files.
///
/// A 24-byte big-endian header (`.snd`, the data offset, the data size, the encoding, the rate,
/// the channels), an annotation, then interleaved big-endian samples: linear PCM of 16, 24 or 32
/// bits, or 32-bit float, as Tapedeck records them. Reading also takes 8-bit linear PCM (as
/// 16-bit). While a take is written the size field says how much was written at the last
/// checkpoint; a killed writer's file reads to that point, and ``repair(fileAt:)`` trusts the
/// file's length instead. Files of 4 GiB of audio or more say "size unknown" (all ones), which
/// sox and ffmpeg read to the end, as they do a stream (`tapedeck-au record -o -`).
///
/// A plain value; every member is safe on any thread. Each method says whether it blocks.
public struct SunAUCodec: AudioEncoder, AudioDecoder {
    /// `au`. - Thread: any; does not block.
    public var name: String { "au" }
    /// `au`. - Thread: any; does not block.
    public var fileExtension: String { "au" }
    /// `audio/basic`, as browsers and web servers know `.au`. - Thread: any; does not block.
    public var mediaType: String { "audio/basic" }
    /// `["au"]`. - Thread: any; does not block.
    public var encodings: Set<String> { ["au"] }

    /// The encoder's settings (the decoder has none).
    public var settings: SunAUSettings

    /// A codec with `settings`. - Thread: any; does not block.
    public init(settings: SunAUSettings = SunAUSettings()) {
        self.settings = settings
    }

    /// Every format Tapedeck records fits: s16, s24, s32 and f32, any rate and channel count.
    /// - Thread: any; does not block.
    public func validate(_ format: AudioFormat) throws { try format.validate() }

    /// Creates the file (never replacing one) and writes its header.
    /// - Thread: the writer thread. Blocks on disk I/O.
    public func makeWriter(at url: URL, format: AudioFormat, metadata: TakeMetadata) throws -> any TakeWriter {
        try validate(format)
        let header = AUHeader(format: format, annotation: annotation(for: metadata), dataSize: 0)
        let fd = try PositionalFile.createNew(atPath: url.path)
        let file = PositionalFile(fd: fd, path: url.path, kind: "AU")
        do {
            try file.write(header.bytes, at: 0)
        } catch {
            close(fd)
            unlink(url.path)
            throw error
        }
        return AUWriter(file: file, format: format, dataOffset: header.dataOffset, seekable: true)
    }

    /// Writes to a pipe: the header says "size unknown" and nothing is written back.
    /// - Thread: the writer thread. Blocks while the reader is slow.
    public func makeStreamWriter(to fd: Int32, format: AudioFormat, metadata: TakeMetadata) throws -> any TakeWriter {
        try validate(format)
        let header = AUHeader(format: format, annotation: annotation(for: metadata), dataSize: AUHeader.unknownSize)
        let file = PositionalFile(fd: fd, path: "standard output", kind: "AU")
        let writer = AUWriter(file: file, format: format, dataOffset: header.dataOffset, seekable: false)
        try writer.append(header.bytes)
        return writer
    }

    /// Keeps every whole frame after the header, drops a partial last one, and writes the size
    /// of what is kept into the header; a second repair changes nothing.
    /// - Thread: any. Blocks on disk I/O.
    public func repair(fileAt url: URL) throws -> RepairResult {
        let fd = open(url.path, O_RDWR | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { throw TapedeckError.system(errno, while: "open \(url.path)") }
        defer { close(fd) }
        let file = PositionalFile(fd: fd, path: url.path, kind: "AU")
        let (header, length) = try AUHeader.read(file)
        let frames = (length - Int64(header.dataOffset)) / Int64(header.bytesPerFrame)
        let end = Int64(header.dataOffset) + frames * Int64(header.bytesPerFrame)
        let size = AUHeader.sizeField(forDataBytes: end - Int64(header.dataOffset))
        let changed = end != length || header.dataSize != size
        if end != length { try file.truncate(to: end) }
        if header.dataSize != size { try file.write(AUHeader.bigEndian(size), at: 8) }
        if changed { try file.sync() }
        return RepairResult(frames: frames, format: header.format, headerRepaired: changed)
    }

    /// What ``repair(fileAt:)`` would find, without changing the file.
    /// - Thread: any. Blocks on disk I/O.
    public func inspect(fileAt url: URL) throws -> RepairResult? {
        let fd = open(url.path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { throw TapedeckError.system(errno, while: "open \(url.path)") }
        defer { close(fd) }
        let (header, length) = try AUHeader.read(PositionalFile(fd: fd, path: url.path, kind: "AU"))
        let dataBytes = length - Int64(header.dataOffset)
        let frames = dataBytes / Int64(header.bytesPerFrame)
        let whole = frames * Int64(header.bytesPerFrame)
        return RepairResult(frames: frames, format: header.format,
                            headerRepaired: whole != dataBytes || header.dataSize != AUHeader.sizeField(forDataBytes: whole))
    }

    /// Opens a file for reading: its audio up to the header's size, or to the end of the file
    /// when the size is unknown or larger than what the file holds.
    /// - Thread: the reading thread. Blocks on disk I/O.
    public func openReader(at url: URL) throws -> any TakeReader {
        let fd = open(url.path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            let code = errno
            throw code == ENOENT ? TapedeckError(.notFound, "\(url.path) does not exist.") : TapedeckError.system(code, while: "open \(url.path)")
        }
        let file = PositionalFile(fd: fd, path: url.path, kind: "AU")
        do {
            let (header, length) = try AUHeader.read(file)
            var dataBytes = length - Int64(header.dataOffset)
            if header.dataSize != AUHeader.unknownSize { dataBytes = min(dataBytes, Int64(header.dataSize)) }
            return AUReader(file: file, header: header, frameCount: dataBytes / Int64(header.bytesPerFrame))
        } catch {
            close(fd)
            throw error
        }
    }

    /// `.snd` at the start. - Thread: any. Blocks briefly on disk I/O.
    public func hasSignature(of encoding: String, at url: URL) -> Bool? {
        guard encoding == name else { return nil }
        return Self.head(of: url, count: 4).elementsEqual(AUHeader.magic)
    }

    /// An `.au` file whose header agrees with its audio is kept as it is, annotation and all (as
    /// Tapedeck keeps a WAV file); one cut short or of unknown size is decoded and written again.
    /// - Thread: any. Blocks briefly on disk I/O.
    public func storesVerbatim(_ url: URL) -> VerbatimEncoding? {
        guard hasSignature(of: name, at: url) == true, let check = try? inspect(fileAt: url),
              !check.headerRepaired, check.format.sampleFormat != .s16 || (try? isSixteenBit(url)) == true else { return nil }
        return VerbatimEncoding(encoding: name, fileExtension: fileExtension)
    }

    /// Whether a file read as s16 holds 16-bit samples (not 8-bit ones widened on reading).
    private func isSixteenBit(_ url: URL) throws -> Bool {
        let head = Self.head(of: url, count: 16)
        return head.count == 16 && AUHeader.number(head, at: 12) == AUHeader.Encoding.linear16.rawValue
    }

    /// The annotation written into a new file: the setting, else the session and take name.
    func annotation(for metadata: TakeMetadata) -> String {
        settings.annotation.isEmpty ? "\(metadata.sessionName) / \(metadata.takeName)" : settings.annotation
    }
}
