public import Foundation
public import TapedeckCore

/// Reads FLAC files (any made by libFLAC or a conforming encoder) back as frames.
///
/// 16-, 24- and 32-bit audio is delivered as s16, s24 and s32, bit-exactly; other depths are
/// shifted up to the next of those (8 and 12 bits → s16, 20 bits → s24).
public struct FLACDecoder: AudioDecoder {
    /// `flac`. Thread: any; does not block.
    public var name: String { "flac" }
    /// `["flac"]`. Thread: any; does not block.
    public var encodings: Set<String> { ["flac"] }

    /// Creates the decoder.
    /// - Thread: any. Does not block.
    public init() {}

    /// Opens the file at `url` for reading and reads its metadata.
    /// - Thread: the thread that will read it. Blocks on disk I/O (and, for a file whose
    ///   STREAMINFO does not give its length, decodes it once to count frames).
    /// - Throws: `TapedeckError` `.notFound` if there is no such file; `.corruptFile` naming the
    ///   file if it is not FLAC or its metadata is damaged.
    public func openReader(at url: URL) throws -> any TakeReader {
        try FLACTakeReader(path: url.path)
    }

    /// A FLAC file (`fLaC` first) is kept as it is, as a take of encoding `flac`.
    /// - Thread: any. Blocks briefly on disk I/O.
    public func storesVerbatim(_ url: URL) -> VerbatimEncoding? {
        Self.head(of: url, count: 4).elementsEqual("fLaC".utf8) ? VerbatimEncoding(encoding: name, fileExtension: "flac") : nil
    }
}
