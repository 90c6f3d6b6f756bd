public import Foundation
public import TapedeckCore

/// Reads WAV files (and anything else libsndfile reads) back as frames.
///
/// Frames are delivered packed little-endian in the file's own sample format where Tapedeck has
/// it (16-, 24-, 32-bit PCM and 32-bit float), so WAV round trips are bit-exact; narrower integer
/// encodings are widened to s16, and double or perceptual encodings delivered as f32.
public struct WAVDecoder: AudioDecoder {
    /// `wav`. Thread: any; does not block.
    public var name: String { "wav" }
    /// `["wav"]`. Thread: any; does not block.
    public var encodings: Set<String> { ["wav"] }

    /// Creates the decoder.
    /// - Thread: any. Does not block.
    public init() {}

    /// Opens the file at `url` for reading.
    /// - Thread: the thread that will read it. Blocks on disk I/O.
    /// - Throws: `TapedeckError` `.notFound` if there is no such file; `.corruptFile` naming the
    ///   file and libsndfile's reason if it cannot be read as audio.
    public func openReader(at url: URL) throws -> any TakeReader {
        try WAVTakeReader(path: url.path)
    }

    /// A RIFF or RF64 WAVE file is kept as it is, as a take of encoding `wav`; other formats
    /// libsndfile reads (AIFF, Ogg, …) are decoded and written again.
    /// - Thread: any. Blocks briefly on disk I/O.
    /// Only a file whose header agrees with the file is kept byte for byte: one with bytes
    /// after its audio that are not chunks (an ID3 tag a tagger appended), placeholder sizes (a
    /// WAV written to a pipe: 0xFFFFFFFF, 0x7FFFF000, 0) or a header promising more than the file
    /// holds (a killed writer) is decoded and stored anew, so the library's copy is normal and
    /// `doctor` has nothing to say of it.
    /// The file's `bext` and iXML, wherever in its chunks they are (`BroadcastWave`).
    /// - Thread: any. Blocks briefly on disk I/O.
    public func broadcastFacts(at url: URL) -> BroadcastFacts? {
        let fd = open(url.path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        return try? BroadcastWave.read(from: RawFile(fd: fd, path: url.path, kind: "WAV"))
    }

    public func storesVerbatim(_ url: URL) -> VerbatimEncoding? {
        let head = Self.head(of: url)
        guard head.count == 12, head.starts(with: "RIFF".utf8) || head.starts(with: "RF64".utf8),
              head.suffix(4).elementsEqual("WAVE".utf8) else { return nil }
        let fd = open(url.path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        guard let check = try? WAVRepair.inspect(RawFile(fd: fd, path: url.path, kind: "WAV")), !check.headerRepaired else { return nil }
        return VerbatimEncoding(encoding: name, fileExtension: "wav")
    }
}
