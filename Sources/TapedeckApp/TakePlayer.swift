public import Observation
public import TapedeckCore
public import Logging
import Foundation

/// Plays takes through the playback backend, decoding with whichever decoder reads the take's encoding.
///
/// Runs on the main actor; decoding and the device run on their own threads.
@MainActor
@Observable
public final class TakePlayer {
    @ObservationIgnored private let playback: any PlaybackBackend
    @ObservationIgnored private let decoders: [any AudioDecoder]
    @ObservationIgnored private let store: SessionStore
    @ObservationIgnored private let logger: Logger
    @ObservationIgnored private var engine: PlaybackEngine?
    @ObservationIgnored private let periodFrames: Int

    /// The take playing now.
    public private(set) var current: Take?
    /// Frames played of the current take.
    public private(set) var playedFrames: Int64 = 0
    /// The device the last playback went to, as its backend names it (a PulseAudio sink's
    /// name where the config said "the default"); `nil` when no more is known.
    public private(set) var deviceName: String?

    /// - Parameters:
    ///   - playback: the backend that opens the playback device.
    ///   - decoders: the decoders of this build; a take plays with the first that reads its encoding.
    ///   - store: the library the takes' audio files are found in.
    ///   - periodFrames: frames per device write (`playback.period-frames`).
    ///   - logger: where playback is logged.
    public init(playback: any PlaybackBackend, decoders: [any AudioDecoder], store: SessionStore,
                periodFrames: Int = PlaybackEngine.periodFrames.defaultValue, logger: Logger) {
        self.playback = playback
        self.periodFrames = periodFrames
        self.decoders = decoders
        self.store = store
        self.logger = logger
    }

    /// Stops playback at the next period. - Thread: main actor. Never blocks.
    public func stop() { engine?.stop() }

    /// Plays `take` to the end (or until ``stop()``) and drains the device.
    /// - Throws: `.unsupportedFormat` when no decoder reads the take, `.notFound` when its audio is missing.
    /// - Thread: main actor; suspends while playing.
    /// - Parameters: `start`, `end`: the part to play, in frames (`nil` end: to the end).
    public func play(_ take: Take, from start: Int64 = 0, to end: Int64? = nil) async throws -> PlaybackResult {
        guard let decoder = decoders.first(where: { $0.encodings.contains(take.encoding) }) else {
            throw TapedeckError(.unsupportedFormat, "No decoder in this build reads \(take.encoding) takes. Run `tapedeck backends` to see the decoders.")
        }
        let url = try store.storage.audioURL(for: take)
        guard FileManager.default.fileExists(atPath: url.path) else {
            throw TapedeckError(.notFound, "The audio file of take \"\(take.name)\" is missing (\(url.path)). Run `tapedeck doctor` to check the library.")
        }
        let engine = PlaybackEngine(backend: playback, periodFrames: periodFrames, logger: logger)
        self.engine = engine
        current = take
        let poll = Task { @MainActor [weak self] in
            while !Task.isCancelled, let self {
                self.playedFrames = engine.playedFrames
                try? await Task.sleep(for: .milliseconds(100))
            }
        }
        defer {
            poll.cancel()
            self.engine = nil
        }
        let result = try await engine.play {
            // A NaN or an infinity is never sent to the device (silence or full scale instead).
            let reader: any TakeReader = try SanitizedTakeReader(decoder.openReader(at: url))
            return start > 0 || end != nil ? PartReader(reader, start: start, end: end) : reader
        }
        playedFrames = result.frames
        deviceName = engine.deviceName
        if result.underrunFrames > 0 {
            logger.warning("Playback ran dry \(result.underrunFrames) frames' worth; silence was played in the gaps.")
        }
        return result
    }
}

/// Reads frames `start..<end` of another reader: the frames before `start` are decoded and
/// dropped on the first read (exact for every format, and fast for PCM and FLAC). Single owner.
final class PartReader: TakeReader {
    private let base: any TakeReader
    private var skip: Int64
    private var left: Int64

    init(_ base: any TakeReader, start: Int64, end: Int64?) {
        self.base = base
        let total = base.frameCount
        let from = min(max(0, start), total)
        skip = from
        left = max(0, min(end ?? total, total) - from)
    }

    var format: AudioFormat { base.format }
    var frameCount: Int64 { left + 0 }

    func read(into buffer: UnsafeMutableRawPointer, maxFrames: Int) throws -> Int {
        while skip > 0 {
            let n = try base.read(into: buffer, maxFrames: Int(min(Int64(maxFrames), skip)))
            if n == 0 { return 0 }
            skip -= Int64(n)
        }
        guard left > 0 else { return 0 }
        let n = try base.read(into: buffer, maxFrames: Int(min(Int64(maxFrames), left)))
        left -= Int64(n)
        return n
    }

    func close() { base.close() }
}
