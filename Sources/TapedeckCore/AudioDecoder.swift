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
}
