public import Foundation
public import TapedeckCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Writes takes as WAV files through libsndfile.
///
/// Files are opened as RF64 with automatic downgrade: a take under 4 GiB ends up as a plain
/// RIFF/WAVE file, a larger one as RF64 — a 32-bit size is never silently wrapped. The `fmt `
/// chunk is WAVE_FORMAT_EXTENSIBLE only where the format needs it (more than 2 channels); see
/// `WAVHeader` for the exact rule. Accepts s16, s24, s32 and f32, 8–192 kHz, 1–32 channels.
public struct WAVEncoder: AudioEncoder {
    /// `wav`. Thread: any; does not block.
    public var name: String { "wav" }
    /// `wav`. Thread: any; does not block.
    public var fileExtension: String { "wav" }
    public var mediaType: String { "audio/wav" }

    /// Creates the encoder.
    /// - Thread: any. Does not block.
    public init() {}

    /// Checks that `format` is within Tapedeck's ranges; every sample format is supported.
    /// - Thread: any. Does not block.
    /// - Throws: `TapedeckError` `.invalidArgument` for a rate or channel count out of range.
    public func validate(_ format: AudioFormat) throws {
        try format.validate()
    }

    /// Creates the file at `url` (never overwriting: `.alreadyExists` if it exists), honouring the
    /// umask, and writes its header. The take's metadata is stored in a `LIST`/`INFO` chunk.
    /// - Thread: the writer thread that will own the returned writer. Blocks on disk I/O.
    public func makeWriter(at url: URL, format: AudioFormat, metadata: TakeMetadata) throws -> any TakeWriter {
        try validate(format)
        return try WAVTakeWriter(path: url.path, format: format, metadata: metadata)
    }

    /// Repairs a file whose writer died: trusts the file's length, not its header, drops a partial
    /// last frame and rewrites the RIFF/RF64, `data` and `fact` sizes to match, then fsyncs.
    /// - Thread: any. Blocks on disk I/O.
    /// - Throws: `TapedeckError` `.notFound`; `.corruptFile` naming the file if it is too short or
    ///   has no `fmt ` or `data` chunk; `.unsupportedFormat` for encodings Tapedeck does not write.
    public func repair(fileAt url: URL) throws -> RepairResult {
        let path = url.path
        let fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { throw TapedeckError.system(errno, while: "open \(path) for repair") }
        defer { close(fd) }
        let result = try WAVRepair.repair(RawFile(fd: fd, path: path, kind: "WAV"))
        Preallocation.trim(fd)  // blocks a killed writer had allocated ahead
        return result
    }

    /// Reads the header and checks it against the file's length; changes nothing.
    /// - Thread: any. Blocks on disk I/O.
    /// Markers as a `cue ` chunk and `LIST adtl` labels after the audio (`WAVMarkers`).
    public func writeMarkers(_ markers: [TakeMarker], toFileAt url: URL) throws {
        let path = url.path
        let fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { throw TapedeckError.system(errno, while: "open \(path) to write its markers") }
        defer { close(fd) }
        try WAVMarkers.write(markers, to: RawFile(fd: fd, path: path, kind: "WAV"))
    }

    /// Broadcast Wave `bext` and iXML (`BroadcastWave.write(_:to:)`): the loudness in place in
    /// a `bext` the file has (the rest of it and an iXML left as they are), what it lacks after
    /// the audio; every other chunk kept byte for byte and never read whole (`WAVTail`).
    /// - Throws: `.corruptFile`, the file left as it was, when the bytes after its audio are not
    ///   whole chunks. - Thread: any. Blocks on disk I/O.
    public func writeFacts(_ metadata: TakeMetadata, toFileAt url: URL) throws {
        let path = url.path
        let fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { throw TapedeckError.system(errno, while: "open \(path) to write its metadata") }
        defer { close(fd) }
        try BroadcastWave.write(metadata, to: RawFile(fd: fd, path: path, kind: "WAV"))
    }

    public func inspect(fileAt url: URL) throws -> RepairResult? {
        let path = url.path
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { throw TapedeckError.system(errno, while: "open \(path)") }
        defer { close(fd) }
        return try WAVRepair.inspect(RawFile(fd: fd, path: path, kind: "WAV"))
    }
}
