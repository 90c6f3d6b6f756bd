import CFLAC
public import Foundation
public import TapedeckCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Writes takes as FLAC files through libFLAC (lossless; 16-, 24- and 32-bit integer samples,
/// up to 8 channels).
///
/// Each file holds STREAMINFO, a VORBIS_COMMENT with the take's tags (see `FLACTags`) and a
/// PADDING block, then the audio. STREAMINFO's total samples and MD5 are filled in at
/// `TakeWriter.finish()`; a file whose writer died is made whole again by ``repair(fileAt:)``.
public struct FLACEncoder: AudioEncoder {
    /// Compression level, 0 (fastest) to 8 (smallest), as `flac -0` … `-8`.
    public let level: Int
    /// Whether every frame is decoded while encoding and compared with the input. Off by default,
    /// as with `flac` and sox: STREAMINFO always carries the MD5 of the input, so `flac -t` (or
    /// any reader that checks it) finds a frame that does not decode to what was recorded, and a
    /// recording that stopped at such a frame would lose everything after it. Exports verify
    /// every file regardless (`WriterOptions.verifyWhileWriting`).
    public let verify: Bool
    /// Bytes of PADDING kept after the tags, so they can be edited without rewriting the file.
    public let paddingBytes: Int

    /// `flac`. Thread: any; does not block.
    public var name: String { "flac" }
    /// `flac`. Thread: any; does not block.
    public var fileExtension: String { "flac" }
    public var mediaType: String { "audio/flac" }

    /// Creates the encoder from its settings (the declared defaults when none are given).
    /// `level` is clamped to its setting's range and `padding` to 0...16 777 215 (the largest
    /// metadata block FLAC allows).
    /// - Thread: any. Does not block.
    public init(settings: FLACSettings = FLACSettings()) {
        level = FLACSettings.level.clamp(settings.level)
        verify = settings.verify
        paddingBytes = min(max(settings.padding, 0), (1 << 24) - 1)
    }

    /// Checks that FLAC can store `format`: integer samples (s16, s24, s32), at most 8 channels,
    /// and Tapedeck's own ranges.
    /// - Thread: any. Does not block.
    /// - Throws: `TapedeckError` `.unsupportedFormat` for float samples or too many channels;
    ///   `.invalidArgument` for a rate or channel count outside Tapedeck's ranges.
    public func validate(_ format: AudioFormat) throws {
        if format.sampleFormat.isFloat {
            throw TapedeckError(.unsupportedFormat,
                "FLAC stores integer samples (s16, s24, s32), so 32-bit float audio cannot be written to it.")
        }
        try format.validate()
        guard format.channels <= Int(FLAC__MAX_CHANNELS) else {
            throw TapedeckError(.unsupportedFormat,
                "FLAC holds at most \(FLAC__MAX_CHANNELS) channels; this take has \(format.channels).")
        }
        guard FLAC__format_sample_rate_is_valid(UInt32(format.sampleRate)) != 0 else {
            throw TapedeckError(.unsupportedFormat, "FLAC cannot store a sample rate of \(format.sampleRate) Hz. Choose a standard rate such as 44100 or 48000.")
        }
    }

    /// Creates the file at `url` (never overwriting: `.alreadyExists` if it exists; mode 0664 less
    /// the umask), writes `fLaC`, STREAMINFO, the tags and the padding, and `fsync`s.
    /// - Thread: the writer thread that will own the returned writer. Blocks on disk I/O.
    /// - Throws: `TapedeckError` from ``validate(_:)``, `.alreadyExists`, `.diskFull` or `.io`.
    public func makeWriter(at url: URL, format: AudioFormat, metadata: TakeMetadata) throws -> any TakeWriter {
        try makeWriter(at: url, format: format, metadata: metadata, options: WriterOptions())
    }

    /// Creates the writer. Frames are verified while writing when ``verify`` is on or the caller
    /// asks (`options.verifyWhileWriting`), by libFLAC's verify mode. With `options.threads` of 2
    /// or more (an export) the take is encoded on that many cores at once
    /// (`FLACParallelWriter`: segments of whole blocks, one encoder each, joined into the
    /// stream a single encoder makes); otherwise by one encoder on the calling thread, as a
    /// recording is (`FLACTakeWriter`, whose checkpoints make the file durable as it grows).
    /// - Thread: the writer thread that will own the writer. Blocks on disk I/O.
    public func makeWriter(at url: URL, format: AudioFormat, metadata: TakeMetadata, options: WriterOptions) throws -> any TakeWriter {
        try validate(format)
        let verify = self.verify || options.verifyWhileWriting
        if options.threads >= 2 {
            return try FLACParallelWriter(path: url.path, format: format, metadata: metadata, level: level,
                                          verify: verify, paddingBytes: paddingBytes, threads: options.threads)
        }
        return try FLACTakeWriter(path: url.path, format: format, metadata: metadata, level: level,
                                  verify: verify, paddingBytes: paddingBytes)
    }

    /// Markers as Vorbis comment chapters (`FLACMarkers`).
    public func writeMarkers(_ markers: [TakeMarker], toFileAt url: URL) throws {
        try FLACMarkers.write(markers, toFileAt: url.path)
    }

    /// Vorbis comments (`FLACComments.facts(_:rate:)`), replacing those written before.
    public func writeFacts(_ metadata: TakeMetadata, toFileAt url: URL) throws {
        try FLACComments.edit(url.path, purpose: "its tags", removing: { FLACComments.factNames.contains($0) },
                              adding: { FLACComments.facts(metadata, rate: $0) })
    }

    /// Repairs a file whose writer died: keeps every frame that decodes cleanly (up to the first
    /// lost sync, damaged frame, CRC error or the end), turns a checkpoint's saved tail into a
    /// final frame, cuts the rest, rewrites STREAMINFO's total samples, MD5 and frame sizes, and
    /// `fsync`s. Idempotent: repairing a repaired (or finished) file changes nothing.
    /// - Thread: any. Blocks on disk I/O (decodes the whole file).
    /// - Throws: `TapedeckError` `.notFound`; `.corruptFile` naming the file if it has no valid
    ///   `fLaC` marker and STREAMINFO or its metadata runs past the end.
    public func repair(fileAt url: URL) throws -> RepairResult {
        let path = url.path
        let fd = open(path, O_RDWR | O_CLOEXEC)
        guard fd >= 0 else { throw TapedeckError.system(errno, while: "open \(path) for repair") }
        defer { close(fd) }
        let result = try FLACRepair.repair(FLACFile(fd: fd, path: path, kind: "FLAC"))
        Preallocation.trim(fd)  // blocks a killed writer had allocated ahead
        return result
    }

    /// Decodes the whole file at `url` with libFLAC's MD5 checking, as export does after encoding.
    /// - Thread: any. Blocks on disk I/O and decoding.
    /// - Returns: the frames, format, MD5 and tags.
    /// - Throws: `.notFound`; `.corruptFile` if any frame fails to decode, the frame count differs
    ///   from STREAMINFO, the file has no MD5 signature (it was never finished) or it does not match.
    public static func verifyFile(at url: URL) throws -> FLACFileSummary {
        try FLACVerifier.verify(path: url.path)
    }
}

/// What ``FLACEncoder/verifyFile(at:)`` found in a good FLAC file.
public struct FLACFileSummary: Sendable, Hashable {
    /// Frames (samples per channel) decoded.
    public var frames: Int64
    /// The format the audio is delivered in by ``FLACDecoder``.
    public var format: AudioFormat
    /// STREAMINFO's MD5 signature, 32 lowercase hex digits.
    public var md5: String
    /// VORBIS_COMMENT fields, names upper-cased.
    public var tags: [String: String]

    public init(frames: Int64, format: AudioFormat, md5: String, tags: [String: String]) {
        self.frames = frames
        self.format = format
        self.md5 = md5
        self.tags = tags
    }
}
