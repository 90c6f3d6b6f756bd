public import Foundation

/// What an encoder may record about a take inside its file.
public struct TakeMetadata: Sendable, Hashable {
    public var takeName: String
    public var sessionName: String
    public var takeNumber: Int
    public var startDate: Date
    public var notes: String
    /// The user's tags (upper-case names), written as tags of the same names where the format
    /// has them (Vorbis comments, RIFF INFO for the few it defines).
    public var tags: [String: String]
    /// The take's id (a UUID): BWF's OriginatorReference and iXML's FILE_UID. `nil` for a file
    /// that is not a take of the library (`record -o`).
    public var takeID: String?
    /// The machine's fixed values (the `metadata:` config section).
    public var identity: FileIdentity
    /// Where the audio came from, for BWF's CodingHistory and iXML's USER; `nil` when not
    /// captured (an import, an export).
    public var source: CaptureSource?
    /// The run the take belongs to (iXML's FILE_SET).
    public var run: TakeRun?
    /// Frames of pre-roll the take begins with (iXML's PRE_RECORD_SAMPLECOUNT).
    public var preRollFrames: Int64
    /// The take's loudness, once measured (BWF v2's loudness fields, REPLAYGAIN tags).
    public var loudness: Loudness?
    /// For a stream (``AudioEncoder/makeStreamWriter(to:format:metadata:)``): the frames the
    /// recording will have when it runs to its length (`record -d 10 -o -`), for a header that
    /// cannot be rewritten at the end; `nil` when it is not known.
    public var expectedFrames: Int64?

    public init(takeName: String, sessionName: String, takeNumber: Int, startDate: Date, notes: String = "", tags: [String: String] = [:],
                takeID: String? = nil, identity: FileIdentity = FileIdentity(), source: CaptureSource? = nil, run: TakeRun? = nil,
                preRollFrames: Int64 = 0, loudness: Loudness? = nil) {
        self.takeID = takeID
        self.identity = identity
        self.source = source
        self.run = run
        self.preRollFrames = preRollFrames
        self.loudness = loudness
        self.tags = tags
        self.takeName = takeName
        self.sessionName = sessionName
        self.takeNumber = takeNumber
        self.startDate = startDate
        self.notes = notes
    }
}

/// What repairing an interrupted file found.
public struct RepairResult: Sendable, Hashable {
    /// Whole frames of audio the file really holds.
    public var frames: Int64
    /// The file's format as read from its header.
    public var format: AudioFormat
    /// Whether the header had to be changed.
    public var headerRepaired: Bool

    public init(frames: Int64, format: AudioFormat, headerRepaired: Bool) {
        self.frames = frames
        self.format = format
        self.headerRepaired = headerRepaired
    }
}

/// An encoder plugin: turns frames into a file format.
public protocol AudioEncoder: Sendable {
    /// The plugin name, e.g. `wav`; stored with each take as its encoding.
    var name: String { get }
    /// The file extension without the dot, e.g. `wav`.
    var fileExtension: String { get }
    /// The media (MIME) type of its files, e.g. `audio/wav`, for the web page's player and
    /// downloads (default `application/octet-stream`).
    var mediaType: String { get }

    /// Checks that this encoder can store `format`.
    /// - Throws: ``TapedeckError`` `.unsupportedFormat` saying what to choose instead.
    func validate(_ format: AudioFormat) throws

    /// Creates the file at `url` (which must not exist) and writes its header.
    ///
    /// - Thread: the writer thread that will own the returned writer. Blocks on disk I/O.
    func makeWriter(at url: URL, format: AudioFormat, metadata: TakeMetadata) throws -> any TakeWriter

    /// Creates the file at `url` (which must not exist) and writes its header, using the machine
    /// as `options` allow (an encoder may verify or encode on threads of its own when given more
    /// than one). The default ignores `options`.
    ///
    /// - Thread: the writer thread that will own the returned writer. Blocks on disk I/O.
    func makeWriter(at url: URL, format: AudioFormat, metadata: TakeMetadata, options: WriterOptions) throws -> any TakeWriter

    /// Writes a stream to `fd`, which cannot seek (stdout into a pipe, `record -o -`): headers
    /// say "length unknown" where the format allows it, as `arecord` and `sox` do. The writer
    /// never closes `fd`. The default throws `.unsupportedFormat`: a format that must seek back
    /// cannot stream.
    /// - Thread: the writer thread that will own the returned writer. Blocks while the reader is slow.
    func makeStreamWriter(to fd: Int32, format: AudioFormat, metadata: TakeMetadata) throws -> any TakeWriter

    /// Repairs a file whose writer never finished (the process died): trusts the file's length,
    /// not its header, drops a partial last frame and rewrites the header to match.
    ///
    /// - Thread: any. Blocks on disk I/O.
    func repair(fileAt url: URL) throws -> RepairResult

    /// Checks, without changing the file, whether its header agrees with the audio it holds:
    /// `headerRepaired` says whether ``repair(fileAt:)`` would change it, `frames` what the file
    /// holds. `nil` when this encoder cannot tell (the default).
    ///
    /// - Thread: any. Blocks on disk I/O.
    func inspect(fileAt url: URL) throws -> RepairResult?

    /// Whether decoding gives back exactly the samples written (exports of lossless files are
    /// verified sample for sample; lossy ones by length). - Thread: any. Never blocks.
    var isLossless: Bool { get }

    /// For a lossy format: the most frames (at `format`'s rate) a file of it written in
    /// `format` may decode to beyond the frames written, where the file cannot say how many to
    /// trim (a codec's start delay and the padding of its last frame). An export that decodes
    /// to more than this beyond what was written is the encoder's fault, one that decodes to
    /// less a damaged file. The default is 0: the file decodes to exactly what was written.
    /// - Thread: any. Never blocks.
    func maxDecodedExtraFrames(for format: AudioFormat) -> Int64

    /// Writes what `metadata` says of the take (its time of day, identity, origin and loudness)
    /// into a finished file of this encoder's, where the format has a place for it (BWF `bext`
    /// and iXML, Vorbis comments): what the format lets be changed alone (a WAV's `bext` that
    /// exists keeps its originator, description, time reference and capture source, and gets
    /// the loudness) is changed, what the file lacks is added, and everything else the file
    /// holds (another program's metadata, a cover) is kept whole. The file is synced and its
    /// audio is not touched; a file that cannot be changed safely is left as it was, and the
    /// error says so. The default does nothing.
    /// - Thread: any. Blocks on disk I/O; never reads more than a bounded piece at once.
    func writeFacts(_ metadata: TakeMetadata, toFileAt url: URL) throws

    /// Writes `markers` (frames of the take) into a finished file of this encoder's, where the
    /// format has a place for them, replacing any it holds; the file is synced. The default
    /// does nothing (the catalog keeps them).
    /// - Thread: any. Blocks on disk I/O.
    func writeMarkers(_ markers: [TakeMarker], toFileAt url: URL) throws
}

extension AudioEncoder {
    public var mediaType: String { "application/octet-stream" }
    public func writeMarkers(_ markers: [TakeMarker], toFileAt url: URL) throws {}
    public func writeFacts(_ metadata: TakeMetadata, toFileAt url: URL) throws {}

    public func inspect(fileAt url: URL) throws -> RepairResult? { nil }
    /// Lossless unless an encoder says otherwise.
    public var isLossless: Bool { true }
    /// Files decode to exactly the frames written unless an encoder says otherwise.
    public func maxDecodedExtraFrames(for format: AudioFormat) -> Int64 { 0 }
}

/// How a writer may use the machine, and what its caller needs.
public struct WriterOptions: Sendable, Hashable {
    /// Threads the writer may keep busy: 1 means only the calling thread; more lets an encoder
    /// verify or encode on threads of its own (an export with cores to spare).
    public var threads: Int
    /// The caller has the finished file verified in any case (an export does). An encoder that
    /// can check its output while writing, more cheaply than decoding it again afterwards (FLAC
    /// decodes each frame as it goes), does so even when its own setting leaves that off, and
    /// says so through ``TakeWriter/verification``.
    public var verifyWhileWriting: Bool

    /// - Thread: any. Does not block.
    public init(threads: Int = 1, verifyWhileWriting: Bool = false) {
        self.threads = max(1, threads)
        self.verifyWhileWriting = verifyWhileWriting
    }
}

extension AudioEncoder {
    public func makeWriter(at url: URL, format: AudioFormat, metadata: TakeMetadata, options: WriterOptions) throws -> any TakeWriter {
        try makeWriter(at: url, format: format, metadata: metadata)
    }

    public func makeStreamWriter(to fd: Int32, format: AudioFormat, metadata: TakeMetadata) throws -> any TakeWriter {
        throw TapedeckError(.unsupportedFormat, "The \(name) format cannot be written as a stream. Write it to a file, or stream another format.")
    }
}

extension TakeWriter {
    /// Writers that do not verify their output say so with `nil`.
    public var verification: String? { nil }
    /// Writers verify nothing unless they say so.
    public var verifiesOutput: Bool { false }
}

/// Writes one take's file. Single owner, not `Sendable`: created, used and finished on one thread.
public protocol TakeWriter: AnyObject {
    /// Appends interleaved frames in the writer's format.
    /// - Thread: the owning writer thread. Blocks on disk I/O.
    func write(_ buffer: UnsafeRawPointer, frames: Int) throws

    /// Brings the header up to date with what was written and `fdatasync`s the file, so a crash
    /// after it loses nothing written before it.
    /// - Thread: the owning writer thread. Blocks on disk I/O.
    func checkpoint() throws

    /// Finalizes the header, `fsync`s and closes the file. An encoder that verifies its output
    /// throws here when the file does not decode to exactly what was written.
    ///
    /// Also called after ``write(_:frames:)`` failed (a full disk): the writer then either
    /// finalizes what it wrote whole, so the file is final and holds exactly the returned frames
    /// (quickly: the recording has stopped and the user waits), or throws, and the caller
    /// abandons the file and has the encoder repair it.
    /// - Thread: the owning writer thread. Blocks on disk I/O.
    /// - Returns: frames in the file.
    func finish() throws -> Int64

    /// Whether ``finish()`` verifies the file itself (so callers need not decode it again).
    var verifiesOutput: Bool { get }

    /// After ``finish()``: how the file was checked, in words for reports, e.g.
    /// "every frame decoded and compared; MD5 matches". `nil` when the writer does not verify.
    var verification: String? { get }

    /// Closes the file without finalizing (after a failure); the file is left for repair.
    /// - Thread: the owning writer thread. May block briefly on close.
    func abandon()

    /// The wall-clock time of the take's first frame, told before that frame is written (the
    /// file may have been made earlier, ready for a split), and how many of its first frames are
    /// pre-roll (captured before the take was triggered). A format that stamps the time of day
    /// into its header (BWF's TimeReference, iXML's PRE_RECORD_SAMPLECOUNT) takes them from
    /// here. The default ignores them.
    /// - Thread: the owning writer thread. May block briefly on disk I/O.
    func began(at date: Date, preRollFrames: Int64)

    /// The take's loudness, measured as it was written, told just before ``finish()``: a format
    /// that carries it in its header (BWF's version 2 fields) writes it there as it finishes,
    /// before the take is committed; nothing is written into a finished take's file afterwards.
    /// The default ignores it.
    /// - Thread: the owning writer thread. Does not block.
    func measured(_ loudness: Loudness)
}

extension TakeWriter {
    public func began(at date: Date, preRollFrames: Int64) {}
    public func measured(_ loudness: Loudness) {}
}
