public import Foundation

/// A decoder plugin: reads files back as frames.
public protocol AudioDecoder: Sendable {
    /// The plugin name, e.g. `wav`.
    var name: String { get }
    /// Encodings (encoder names) this decoder reads.
    var encodings: Set<String> { get }

    /// Opens a file for reading.
    /// - Thread: the thread that will read it. Blocks on disk I/O.
    /// - Throws: ``TapedeckError`` `.notFound` or `.corruptFile` naming the file.
    func openReader(at url: URL) throws -> any TakeReader

    /// Whether this decoder reads the file at `url`, judged from its contents (never its name).
    /// The default opens a reader and closes it again.
    /// - Thread: any. Blocks briefly on disk I/O.
    func canRead(_ url: URL) -> Bool

    /// How the file at `url` can be kept byte for byte as a take (its header and tags as they
    /// are), when it is this decoder's own format and a library holds such files; `nil` when it
    /// must be decoded and written again. The default: `nil`.
    /// - Thread: any. Blocks briefly on disk I/O.
    func storesVerbatim(_ url: URL) -> VerbatimEncoding?

    /// Whether the file at `url` begins as files of `encoding` (one of ``encodings``) do, by
    /// its signature (`RIFF…WAVE`, `fLaC`, `OggS…OpusHead`); `nil` when this decoder does not
    /// know that encoding's signature. A file that comes with a claim of its format (a pulled
    /// take's manifest) is checked with it before it is kept. The default: `nil`.
    /// - Thread: any. Blocks briefly on disk I/O.
    func hasSignature(of encoding: String, at url: URL) -> Bool?

    /// The Broadcast Wave facts the file at `url` carries (`bext`, iXML), for `show`; `nil` when
    /// it has none or the format has no place for them (the default).
    /// - Thread: any. Blocks briefly on disk I/O.
    func broadcastFacts(at url: URL) -> BroadcastFacts?
}

/// The encoding (an encoder's name) and file extension under which an imported file is kept as
/// it is. A plain value.
public struct VerbatimEncoding: Sendable, Hashable {
    public var encoding: String
    public var fileExtension: String

    public init(encoding: String, fileExtension: String) {
        self.encoding = encoding
        self.fileExtension = fileExtension
    }
}

extension AudioDecoder {
    public func canRead(_ url: URL) -> Bool {
        guard let reader = try? openReader(at: url) else { return false }
        reader.close()
        return true
    }

    public func storesVerbatim(_ url: URL) -> VerbatimEncoding? { nil }

    public func hasSignature(of encoding: String, at url: URL) -> Bool? { nil }

    public func broadcastFacts(at url: URL) -> BroadcastFacts? { nil }

    /// Up to `count` bytes from the start of the file at `url` (fewer for a shorter file; none
    /// when it cannot be read), for recognising a format by its signature.
    /// - Thread: any. Blocks briefly on disk I/O.
    public static func head(of url: URL, count: Int = 12) -> [UInt8] {
        guard let handle = try? FileHandle(forReadingFrom: url) else { return [] }
        defer { try? handle.close() }
        return Array((try? handle.read(upToCount: count)) ?? Data())
    }
}

/// Reads one file. Single owner, not `Sendable`.
public protocol TakeReader: AnyObject {
    /// The file's format; frames are delivered in it.
    var format: AudioFormat { get }
    /// Frames in the file as its header says, bounded by its real length.
    var frameCount: Int64 { get }

    /// Reads up to `maxFrames` interleaved frames into `buffer`; 0 means the end.
    /// - Thread: the owning thread. Blocks on disk I/O.
    func read(into buffer: UnsafeMutableRawPointer, maxFrames: Int) throws -> Int

    /// Closes the file.
    /// - Thread: the owning thread. Never blocks for long.
    func close()

    /// The file's own sample encoding when frames are delivered in another one (`u8` widened to
    /// `s16`, `f64` narrowed to `f32`, `A-law` decoded), so a caller can say what changed; `nil`
    /// when ``format`` is the file's own. The default: `nil`.
    var sourceEncoding: String? { get }
}

extension TakeReader {
    public var sourceEncoding: String? { nil }
}
