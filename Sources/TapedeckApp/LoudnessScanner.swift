import Foundation
public import TapedeckCore

/// Measures the loudness of takes already in the library (`tapedeck loudness`): decodes each
/// take's file, measures it, stores the result and writes it into the file where its format has
/// a place for it (BWF `bext` version 2 fields, REPLAYGAIN tags), beside the take's time of day
/// and identity (``TakeFacts``).
///
/// Main actor; the decoding runs on the storage's background queue.
@MainActor
public final class LoudnessScanner {
    private let store: SessionStore
    private let decoders: [any AudioDecoder]
    private let encoders: [any AudioEncoder]
    private let analyzer: any LoudnessAnalyzer
    private let facts: TakeFacts
    /// Stops a measurement between two reads (a stop signal).
    public let partials: PartialFiles

    public init(store: SessionStore, decoders: [any AudioDecoder], encoders: [any AudioEncoder], analyzer: any LoudnessAnalyzer,
                facts: TakeFacts = TakeFacts(), partials: PartialFiles = PartialFiles()) {
        self.store = store
        self.decoders = decoders
        self.encoders = encoders
        self.analyzer = analyzer
        self.facts = facts
        self.partials = partials
    }

    /// Measures `take` and stores its loudness; returns the take as stored.
    /// - Throws: `.invalidArgument` for a take still being recorded, `.unsupportedFormat` when
    ///   no decoder reads its encoding, the decoder's error for a missing or damaged file; the
    ///   encoder's error, saying the library has the loudness, when the file could not take it
    ///   (it is left as it was).
    /// - Thread: main actor; suspends while the file is read (blocking work off the main actor).
    public func measure(_ take: Take, in session: Session) async throws -> Take {
        try await measureReporting(take, in: session).take
    }

    /// One take measured: the take as stored, and how many of its samples were invalid (NaN,
    /// infinite or past +40 dBFS: `InvalidSamples`) and measured as silence or full scale.
    public struct Measured: Sendable {
        public var take: Take
        public var invalidSamples: Int64
    }

    /// ``measure(_:in:)``, saying how many invalid samples the take's file holds.
    /// - Thread: main actor; suspends while the file is read (blocking work off the main actor).
    public func measureReporting(_ take: Take, in session: Session) async throws -> Measured {
        guard take.state != .recording else {
            throw TapedeckError(.busy, "\"\(session.name)/\(take.name)\" is being recorded (or its recording was cut short and not yet recovered); measure it once it is finished.")
        }
        guard let decoder = decoders.first(where: { $0.encodings.contains(take.encoding) }) else {
            throw TapedeckError(.unsupportedFormat, "No decoder in this build reads \(take.encoding) takes, so \"\(take.name)\" cannot be measured.")
        }
        let storage = store.storage
        let url = try storage.audioURL(for: take)
        let (analyzer, partials) = (self.analyzer, self.partials)
        let (loudness, invalid) = try await store.perform {
            try Self.measureFileCounting(url, decoder: decoder, analyzer: analyzer, partials: partials, take: take)
        }
        var annotations = take.annotations
        annotations.loudness = loudness
        let updated = try await store.annotate(take, annotations)
        if let encoder = encoders.first(where: { $0.name == take.encoding }) {
            let (facts, sessionName) = (self.facts, session.name)
            // The file's own facts: a failure leaves the file as it was and the library knows.
            // Only the loudness changes where the file has a place for it already (a bext keeps
            // its originator, description, time reference and capture source).
            do {
                try await store.perform { try encoder.writeFacts(facts.metadata(for: updated, sessionName: sessionName), toFileAt: url) }
            } catch let error as TapedeckError where error.code != .cancelled {
                throw TapedeckError(error.code, "The loudness of \"\(take.name)\" is stored in the library, but not in its file: \(error.message)",
                                    systemCode: error.systemCode)
            }
        }
        return Measured(take: updated, invalidSamples: invalid)
    }

    /// Opens `take`'s file at `url` with `decoder`: a file the decoder cannot read, or that is
    /// missing, is the library's damage, named with what to run (never advice about encoders).
    /// Its frames come with invalid float samples replaced (``SanitizedTakeReader``): no
    /// encoder, resampler or analyser sees a NaN or an infinity.
    /// - Blocks on disk I/O.
    nonisolated static func openTake(_ take: Take, at url: URL, decoder: any AudioDecoder) throws -> SanitizedTakeReader {
        do {
            return try SanitizedTakeReader(decoder.openReader(at: url))
        } catch let error as TapedeckError where error.code != .cancelled {
            let missing = !FileManager.default.fileExists(atPath: url.path)
            throw TapedeckError(missing ? .notFound : .corruptFile,
                "The audio file of take \"\(take.name)\" \(missing ? "is missing" : "cannot be read as \(take.encoding)") (\(url.path)). Run `tapedeck doctor` to see what happened to it, and `tapedeck doctor --repair` to keep what it holds.")
        }
    }

    /// Throws when `take`'s file gave fewer frames than the library lists (cut short since it
    /// was recorded): its audio is not the take's. Compared only at the take's own rate.
    nonisolated static func checkLength(_ take: Take, read frames: Int64, rate: Int, at url: URL) throws {
        guard rate == take.format.sampleRate, frames < take.frames else { return }
        throw TapedeckError(.corruptFile,
            "The audio file of take \"\(take.name)\" holds \(frames) frames; the library lists \(take.frames) (\(url.path)): it was cut short. Run `tapedeck doctor` to see what happened, and `tapedeck doctor --repair` to make the library agree with it.")
    }

    /// Decodes the file at `url` from end to end through a meter. - Blocks on disk I/O and CPU.
    nonisolated static func measureFile(_ url: URL, decoder: any AudioDecoder, analyzer: any LoudnessAnalyzer,
                                        partials: PartialFiles, take: Take? = nil) throws -> Loudness {
        try measureFileCounting(url, decoder: decoder, analyzer: analyzer, partials: partials, take: take).loudness
    }

    /// ``measureFile(_:decoder:analyzer:partials:take:)``, with the count of invalid samples
    /// it measured as silence or full scale. - Blocks on disk I/O and CPU.
    nonisolated static func measureFileCounting(_ url: URL, decoder: any AudioDecoder, analyzer: any LoudnessAnalyzer,
                                                partials: PartialFiles, take: Take? = nil) throws -> (loudness: Loudness, invalid: Int64) {
        let reader = try take.map { try openTake($0, at: url, decoder: decoder) } ?? SanitizedTakeReader(decoder.openReader(at: url))
        defer { reader.close() }
        let meter = try analyzer.makeFastMeter(for: reader.format)
        let frames = try reader.forEachBlock(stoppingWith: partials) { meter.add($0, frames: $1) }
        if let take { try checkLength(take, read: frames, rate: reader.format.sampleRate, at: url) }
        return (meter.result(), reader.replacedSamples)
    }
}
