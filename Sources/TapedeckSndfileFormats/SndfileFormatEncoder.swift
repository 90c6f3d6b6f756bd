import CSndfile
public import Foundation
public import TapedeckCore
#if canImport(Glibc)
import Glibc
#endif

/// The three containers this module writes through libsndfile.
public enum SndfileContainer: String, Sendable, CaseIterable {
    case mp3, vorbis, aiff

    var title: String { switch self { case .mp3: "MP3"; case .vorbis: "Ogg Vorbis"; case .aiff: "AIFF" } }
    var fileExtension: String { switch self { case .mp3: "mp3"; case .vorbis: "ogg"; case .aiff: "aiff" } }
    var mediaType: String { switch self { case .mp3: "audio/mpeg"; case .vorbis: "audio/ogg; codecs=vorbis"; case .aiff: "audio/aiff" } }
    var isLossless: Bool { self == .aiff }

    /// libsndfile's format code for `format` in this container.
    func code(for format: SampleFormat) -> Int32 {
        switch self {
        case .mp3: Int32(SF_FORMAT_MPEG | SF_FORMAT_MPEG_LAYER_III)
        case .vorbis: Int32(SF_FORMAT_OGG | SF_FORMAT_VORBIS)
        case .aiff:
            Int32(SF_FORMAT_AIFF) | Int32(format == .s16 ? SF_FORMAT_PCM_16 : format == .s24 ? SF_FORMAT_PCM_24 : format == .s32 ? SF_FORMAT_PCM_32 : SF_FORMAT_FLOAT)
        }
    }

    /// libsndfile's compression level for a constant MP3 bit rate: it maps level 0…1 onto
    /// 320…32 kbit/s and LAME rounds down to an MP3 rate (measured: 0.5 gives 160k).
    static func mp3Level(bitrate: Int) -> Double {
        min(1, max(0, (320 - Double(bitrate) / 1000 - 0.5) / 288))
    }

    /// libsndfile's compression level for oggenc's quality `q` (0…10): libvorbis quality q/10 is
    /// level 1 − q/10.
    static func vorbisLevel(quality: Int) -> Double { min(1, max(0, 1 - Double(quality) / 10)) }
}

/// MP3, Ogg Vorbis and AIFF files through libsndfile: an encoder and a decoder.
///
/// Writers open the file themselves with `O_EXCL` (never replacing one) and hand it to
/// libsndfile; tags go in before the first audio (ID3v2 for MP3, Vorbis comments, AIFF NAME and
/// ANNO chunks). MP3 and Vorbis are lossy: frames are handed over as 32-bit float and decode to
/// the same length, and a killed file is kept up to its last whole frame or page. AIFF is
/// lossless PCM (AIFF-C for float) and a killed one is repaired by its sizes, as WAV is.
/// Thread: any for the value; each writer and reader is single-owner, blocking on disk I/O.
public struct SndfileFormatEncoder: AudioEncoder, AudioDecoder {
    public let container: SndfileContainer
    /// libsndfile's compression level (lossy containers).
    let level: Double?

    /// - Thread: any. Does not block.
    public init(_ container: SndfileContainer, level: Double? = nil) {
        self.container = container
        self.level = level
    }

    /// `mp3`, `vorbis` or `aiff`. - Thread: any; does not block.
    public var name: String { container.rawValue }
    /// `mp3`, `ogg` or `aiff`. - Thread: any; does not block.
    public var fileExtension: String { container.fileExtension }
    public var mediaType: String { container.mediaType }
    /// The container's own name. - Thread: any; does not block.
    public var encodings: Set<String> { [container.rawValue] }
    /// AIFF only. - Thread: any; does not block.
    public var isLossless: Bool { container.isLossless }

    /// MP3: LAME's start delay and end padding, which a decoder trims only when the file's
    /// first frame holds LAME's tag. At bit rates low for the sample rate the frame is too small
    /// for it (libsndfile maps the default 128 kbit/s to 24 kbit/s at 11.025 and 12 kHz and to
    /// 56 kbit/s at 24 kHz), and the file decodes to 1152 frames more (576 of delay, 576 of
    /// padding) and up to one MPEG frame beyond: 576 samples at the MPEG-2 and 2.5 rates (below
    /// 32 kHz), 1152 at MPEG-1's (measured with libsndfile 1.2, LAME 3.100 and mpg123 at every
    /// rate MP3 holds). Vorbis and AIFF decode to exactly what was written.
    /// - Thread: any; does not block.
    public func maxDecodedExtraFrames(for format: AudioFormat) -> Int64 {
        guard container == .mp3 else { return 0 }
        return 1152 + (format.sampleRate >= 32_000 ? 1152 : 576)
    }

    /// MP3: 8 to 48 kHz, one or two channels; Vorbis: up to 8 channels; AIFF: any format.
    /// - Thread: any. Does not block.
    public func validate(_ format: AudioFormat) throws {
        try format.validate()
        switch container {
        case .mp3:
            guard format.channels <= 2 else {
                throw TapedeckError(.unsupportedFormat, "MP3 holds one or two channels, not \(format.channels).")
            }
            guard [8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000].contains(format.sampleRate) else {
                throw TapedeckError(.unsupportedFormat, "MP3 holds 8 to 48 kHz (32, 44.1 or 48 kHz for full quality), not \(format.sampleRate) Hz: export with --rate 48000.")
            }
        case .vorbis:
            guard format.channels <= 8 else {
                throw TapedeckError(.unsupportedFormat, "Ogg Vorbis holds at most 8 channels, not \(format.channels).")
            }
        case .aiff: break
        }
    }

    /// Creates the file (never replacing one) and writes its header and tags.
    /// - Thread: the writer thread that will own the writer. Blocks on disk I/O.
    public func makeWriter(at url: URL, format: AudioFormat, metadata: TakeMetadata) throws -> any TakeWriter {
        try validate(format)
        return try SndfileFormatWriter(path: url.path, container: container, format: format, level: level, metadata: metadata)
    }

    /// AIFF: sizes rewritten from the file's length, a partial last frame dropped. MP3 and
    /// Vorbis: nothing to rewrite (their frames and pages carry themselves); the frames that
    /// decode are counted. - Thread: any. Blocks on disk I/O.
    public func repair(fileAt url: URL) throws -> RepairResult {
        if container == .aiff { return try AIFFRepair.repair(path: url.path) }
        let reader = try SndfileFormatReader(path: url.path, container: container)
        defer { reader.close() }
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: 4096 * reader.format.bytesPerFrame, alignment: 16)
        defer { buffer.deallocate() }
        var frames: Int64 = 0
        while true {
            let n = (try? reader.read(into: buffer, maxFrames: 4096)) ?? 0
            if n == 0 { break }
            frames += Int64(n)
        }
        return RepairResult(frames: frames, format: reader.format, headerRepaired: false)
    }

    /// Opens a file for reading. - Thread: the reading thread. Blocks on disk I/O.
    public func openReader(at url: URL) throws -> any TakeReader {
        try SndfileFormatReader(path: url.path, container: container)
    }
}

/// Writes one file. Single owner, not `Sendable`: made, used and finished on one thread.
final class SndfileFormatWriter: TakeWriter {
    let format: AudioFormat
    let path: String
    private let container: SndfileContainer
    private var fd: Int32
    private var handle: OpaquePointer?
    private var framesWritten: Int64 = 0
    /// Frames as libsndfile takes them: float (lossy, and float AIFF), 16- or 32-bit integers.
    private var scratch: UnsafeMutableRawPointer?
    private var scratchFrames = 0

    init(path: String, container: SndfileContainer, format: AudioFormat, level: Double?, metadata: TakeMetadata) throws {
        self.path = path
        self.container = container
        self.format = format
        fd = try PositionalFile.createNew(atPath: path)
        var info = SF_INFO()
        info.samplerate = Int32(format.sampleRate)
        info.channels = Int32(format.channels)
        info.format = container.code(for: format.sampleFormat)
        guard let handle = sf_open_fd(fd, Int32(SFM_WRITE), &info, 0 /* the writer closes fd */) else {
            let reason = String(cString: sf_strerror(nil))
            close(fd)
            fd = -1
            unlink(path)
            throw TapedeckError(.unsupportedFormat, "Could not start the \(container.title) file \(path): libsndfile says \(reason).")
        }
        self.handle = handle
        if container == .mp3 {
            var mode = Int32(SF_BITRATE_MODE_CONSTANT)
            _ = sf_command(handle, Int32(SFC_SET_BITRATE_MODE), &mode, Int32(MemoryLayout<Int32>.size))
        }
        if var level {
            _ = sf_command(handle, Int32(SFC_SET_COMPRESSION_LEVEL), &level, Int32(MemoryLayout<Double>.size))
        }
        // The take's tags: ID3v2 for MP3, Vorbis comments, AIFF NAME/ANNO (libsndfile writes
        // those it has a place for in each container).
        let fields = Dictionary(metadata.commentFields) { _, last in last }
        for (name, field) in [("TITLE", SF_STR_TITLE), ("ALBUM", SF_STR_ALBUM), ("TRACKNUMBER", SF_STR_TRACKNUMBER),
                              ("DATE", SF_STR_DATE), ("DESCRIPTION", SF_STR_COMMENT), ("ARTIST", SF_STR_ARTIST),
                              ("COPYRIGHT", SF_STR_COPYRIGHT), ("GENRE", SF_STR_GENRE)] {
            if let value = fields[name], !value.isEmpty { _ = sf_set_string(handle, Int32(field), value) }
        }
        _ = sf_set_string(handle, Int32(SF_STR_SOFTWARE), "Tapedeck \(TapedeckVersion.string)")
    }

    deinit {
        abandon()
        scratch?.deallocate()
    }

    private func room(_ frames: Int, bytesPerSample: Int) -> UnsafeMutableRawPointer {
        if scratchFrames < frames {
            scratch?.deallocate()
            scratch = UnsafeMutableRawPointer.allocate(byteCount: frames * format.channels * bytesPerSample, alignment: 16)
            scratchFrames = frames
        }
        return scratch!
    }

    func write(_ buffer: UnsafeRawPointer, frames: Int) throws {
        guard let handle else { throw TapedeckError(.internalError, "Wrote to the \(container.title) writer for \(path) after it was closed.") }
        guard frames > 0 else { return }
        let done: Int64
        switch (container, format.sampleFormat) {
        case (.aiff, .s16):
            done = sf_writef_short(handle, buffer.assumingMemoryBound(to: Int16.self), sf_count_t(frames))
        case (.aiff, .s24):
            let wide = room(frames, bytesPerSample: 4).assumingMemoryBound(to: Int32.self)
            for i in 0..<(frames * format.channels) { wide[i] = Sample24.load(buffer, index: i) << 8 }
            done = sf_writef_int(handle, wide, sf_count_t(frames))
        case (.aiff, .s32):
            done = sf_writef_int(handle, buffer.assumingMemoryBound(to: Int32.self), sf_count_t(frames))
        case (_, .f32):
            done = sf_writef_float(handle, buffer.assumingMemoryBound(to: Float.self), sf_count_t(frames))
        default:
            // Lossy codecs take floats.
            let floats = room(frames, bytesPerSample: 4)
            SampleConverter(from: format, to: .f32).convert(buffer, into: floats, frames: frames)
            done = sf_writef_float(handle, floats.assumingMemoryBound(to: Float.self), sf_count_t(frames))
        }
        framesWritten += done
        guard done == frames else {
            let code = errno
            throw code == ENOSPC || code == EDQUOT ? TapedeckError.system(code, while: "write \(path)")
                : TapedeckError(.io, "Could not write \(path): \(String(cString: sf_strerror(handle))).")
        }
    }

    /// AIFF: the header brought up to date; every container: synced.
    func checkpoint() throws {
        guard let handle else { return }
        if container == .aiff { _ = sf_command(handle, Int32(SFC_UPDATE_HEADER_NOW), nil, 0) }
        guard fdatasync(fd) == 0 else { throw TapedeckError.system(errno, while: "flush \(path) to disk") }
    }

    func finish() throws -> Int64 {
        guard let handle else { throw TapedeckError(.internalError, "Finished the \(container.title) writer for \(path) twice.") }
        self.handle = nil
        let status = sf_close(handle)
        defer {
            close(fd)
            fd = -1
        }
        guard status == 0 else {
            throw TapedeckError(.io, "Could not finish \(path): \(String(cString: sf_error_number(status))).")
        }
        guard fsync(fd) == 0 else { throw TapedeckError.system(errno, while: "sync \(path)") }
        return framesWritten
    }

    func abandon() {
        if let handle { _ = sf_close(handle) }
        handle = nil
        if fd >= 0 { close(fd) }
        fd = -1
    }
}

/// Reads one file through libsndfile. Single owner, not `Sendable`; blocks on disk I/O.
final class SndfileFormatReader: TakeReader {
    let format: AudioFormat
    let frameCount: Int64
    private var handle: OpaquePointer?
    private var wide: UnsafeMutablePointer<Int32>?
    private var wideFrames = 0

    init(path: String, container: SndfileContainer) throws {
        var info = SF_INFO()
        if container == .mp3, Self.holdsNoFrames(path) {
            // MP3 has no header of its own: a take with no audio is an empty file (or a tag).
            format = AudioFormat(sampleRate: 48_000, channels: 2, sampleFormat: .f32)
            frameCount = 0
            return
        }
        guard let handle = sf_open(path, Int32(SFM_READ), &info) else {
            let reason = String(cString: sf_strerror(nil))
            if access(path, F_OK) != 0 { throw TapedeckError(.notFound, "\(path) does not exist.") }
            throw TapedeckError(.corruptFile, "\(path) is not a readable \(container.title) file: libsndfile says \(reason).")
        }
        self.handle = handle
        let sub = Int(info.format) & SF_FORMAT_SUBMASK
        let sample: SampleFormat = switch sub {
        case SF_FORMAT_PCM_16, SF_FORMAT_PCM_S8, SF_FORMAT_PCM_U8: .s16
        case SF_FORMAT_PCM_24: .s24
        case SF_FORMAT_PCM_32: .s32
        default: .f32
        }
        let candidate = AudioFormat(sampleRate: Int(info.samplerate), channels: Int(info.channels), sampleFormat: sample)
        guard (try? candidate.validate()) != nil else {
            sf_close(handle)
            self.handle = nil
            throw TapedeckError(.corruptFile, "\(path) claims \(info.channels) channels at \(info.samplerate) Hz, which Tapedeck cannot read.")
        }
        format = candidate
        frameCount = max(0, Int64(info.frames))
    }

    deinit {
        close()
        wide?.deallocate()
    }

    /// Whether the file is empty or nothing but an ID3v2 tag.
    static func holdsNoFrames(_ path: String) -> Bool {
        guard let handle = FileHandle(forReadingAtPath: path) else { return false }
        defer { try? handle.close() }
        let size = (try? handle.seekToEnd()) ?? 1
        if size == 0 { return true }
        try? handle.seek(toOffset: 0)
        let head = [UInt8]((try? handle.read(upToCount: 10)) ?? Data())
        guard head.count == 10, head[0] == 0x49, head[1] == 0x44, head[2] == 0x33 else { return false }
        // The tag's size: four 7-bit bytes, plus its header (and footer, when flagged).
        let tag = head[6...9].reduce(UInt64(0)) { $0 << 7 | UInt64($1 & 0x7F) } + 10 + (head[5] & 0x10 != 0 ? 10 : 0)
        return tag >= size
    }

    func read(into buffer: UnsafeMutableRawPointer, maxFrames: Int) throws -> Int {
        guard let handle else { return 0 }
        let n: Int64
        switch format.sampleFormat {
        case .s16: n = sf_readf_short(handle, buffer.assumingMemoryBound(to: Int16.self), sf_count_t(maxFrames))
        case .s32: n = sf_readf_int(handle, buffer.assumingMemoryBound(to: Int32.self), sf_count_t(maxFrames))
        case .f32: n = sf_readf_float(handle, buffer.assumingMemoryBound(to: Float.self), sf_count_t(maxFrames))
        case .s24:
            if wideFrames < maxFrames {
                wide?.deallocate()
                wide = .allocate(capacity: maxFrames * format.channels)
                wideFrames = maxFrames
            }
            n = sf_readf_int(handle, wide!, sf_count_t(maxFrames))
            for i in 0..<(Int(n) * format.channels) { Sample24.store(wide![i] >> 8, buffer, index: i) }
        }
        if n < 0 { throw TapedeckError(.corruptFile, "Reading failed: \(String(cString: sf_strerror(handle))).") }
        return Int(n)
    }

    func close() {
        if let handle { sf_close(handle) }
        handle = nil
    }
}
