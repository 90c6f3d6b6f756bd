public import Foundation
import Synchronization

/// A take's loudness as EBU R128 (ITU-R BS.1770-4) measures it. A plain value; any thread.
///
/// Values that silence makes infinite (the integrated loudness of audio that never rises above
/// the −70 LUFS absolute gate, the peak of digital silence) are `nil`.
public struct Loudness: Sendable, Hashable, Codable {
    /// Integrated (programme) loudness in LUFS, gated; `nil` when nothing passed the gate.
    public var integrated: Double?
    /// Loudness range in LU (EBU Tech 3342); 0 for audio too short or too quiet to have one.
    public var range: Double
    /// True peak in dBTP (4× oversampled), the highest over all channels; `nil` for digital silence.
    public var truePeak: Double?
    /// Highest momentary loudness (400 ms windows, every 100 ms) in LUFS.
    public var maxMomentary: Double?
    /// Highest short-term loudness (3 s windows, every 100 ms) in LUFS; `nil` for takes under 3 s.
    public var maxShortTerm: Double?

    /// Values outside what a meter can mean (below −200 LUFS: ungated near-silence) read as `nil`.
    public init(integrated: Double?, range: Double, truePeak: Double?, maxMomentary: Double?, maxShortTerm: Double?) {
        self.integrated = integrated.flatMap(Self.level)
        self.range = range.isFinite ? min(max(range, 0), 200) : 0
        self.truePeak = truePeak.flatMap { $0.isFinite && (-400...200).contains($0) ? $0 : nil }
        self.maxMomentary = maxMomentary.flatMap(Self.level)
        self.maxShortTerm = maxShortTerm.flatMap(Self.level)
    }

    private static func level(_ v: Double) -> Double? { v.isFinite && (-200...200).contains(v) ? v : nil }

    /// ReplayGain 2.0's track gain: what brings the integrated loudness to −18 LUFS, in dB.
    public var replayGain: Double? { integrated.map { -18 - $0 } }

    /// Checks that every value is one a measurement can give. - Throws: `.invalidArgument`.
    /// - Thread: any; never blocks.
    public func validate() throws {
        for v in [integrated, maxMomentary, maxShortTerm].compactMap({ $0 }) where !(-200...200).contains(v) {
            throw TapedeckError(.invalidArgument, "A loudness of \(v) LUFS cannot be measured.")
        }
        guard (0...200).contains(range), (truePeak.map { (-400...200).contains($0) } ?? true) else {
            throw TapedeckError(.invalidArgument, "A loudness range of \(range) LU or a true peak of \(truePeak ?? 0) dBTP cannot be measured.")
        }
    }
}

/// Measures the loudness of one stream of audio as it passes. Single owner, not `Sendable`:
/// made, fed and read on one thread (the writer's: never the device thread).
public protocol LoudnessMeter: AnyObject {
    /// Adds `frames` interleaved frames in the meter's format. - Blocks: no (CPU only).
    func add(_ buffer: UnsafeRawPointer, frames: Int)
    /// The loudness of everything added so far. - Blocks: no (CPU only).
    func result() -> Loudness
}

/// Makes loudness meters (the EBU R128 plugin is one). - Thread: any; never blocks.
public protocol LoudnessAnalyzer: Sendable {
    /// A meter for audio in `format`, doing its work on the thread that feeds it (a recording's
    /// writer thread).
    /// - Throws: `.unsupportedFormat` for a format the analyzer cannot measure.
    func makeMeter(for format: AudioFormat) throws -> any LoudnessMeter

    /// A meter that may also work on a thread of its own, for measuring a file as fast as the
    /// machine allows (`tapedeck loudness`, exports): the same figures as ``makeMeter(for:)``.
    /// The default is ``makeMeter(for:)``.
    func makeFastMeter(for format: AudioFormat) throws -> any LoudnessMeter
}

extension LoudnessAnalyzer {
    public func makeFastMeter(for format: AudioFormat) throws -> any LoudnessMeter { try makeMeter(for: format) }
}

/// What a take's writer learnt while it wrote, for whoever made the writer to read once the
/// take is finished: when its first frame was captured, and its loudness. Any
/// thread; never blocks (a lock held for a copy).
public final class WriterNotes: Sendable {
    private struct Notes {
        var began: Date?
        var loudness: Loudness?
        var waveform: WaveformPeaks?
    }
    private let value = Mutex(Notes())
    public init() {}
    /// The wall-clock time of the take's first frame; `nil` until the first frame is written.
    public var began: Date? { value.withLock { $0.began } }
    /// The take's loudness once its writer finished; `nil` before, or when it was not measured.
    public var loudness: Loudness? { value.withLock { $0.loudness } }

    /// The take's waveform overview once its writer finished; `nil` before, or when not made.
    public var waveform: WaveformPeaks? { value.withLock { $0.waveform } }

    func noteStart(_ date: Date) { value.withLock { $0.began = date } }
    func noteWaveform(_ peaks: WaveformPeaks) { value.withLock { $0.waveform = peaks } }
    func noteLoudness(_ loudness: Loudness) { value.withLock { $0.loudness = loudness } }
}

/// A take writer that notes what it writes: when the first frame came, (with a meter) its
/// loudness, and (with a tap) its waveform overview — every buffer goes to the file first, then
/// to the meter and the tap, on the writer's own thread (never the device's). Single owner, like the writer it wraps; each method runs on the owning
/// writer thread and blocks as the wrapped writer does.
public final class MeasuringTakeWriter: TakeWriter {
    /// The writer that makes the file.
    public let inner: any TakeWriter
    private let meter: (any LoudnessMeter)?
    private let waveform: WaveformTap?
    private let notes: WriterNotes

    /// - Parameters:
    ///   - inner: the writer that makes the file.
    ///   - meter: measures the loudness of every frame written; `nil` for none.
    ///   - waveform: draws the waveform overview of every frame written; `nil` for none.
    ///   - notes: gets the first frame's time, and the loudness of every frame written
    ///     when ``finish()`` is called, and the waveform overview of every frame written.
    public init(_ inner: any TakeWriter, meter: (any LoudnessMeter)?, waveform: WaveformTap? = nil, notes: WriterNotes) {
        self.inner = inner
        self.meter = meter
        self.waveform = waveform
        self.notes = notes
    }

    public func write(_ buffer: UnsafeRawPointer, frames: Int) throws {
        try inner.write(buffer, frames: frames)
        meter?.add(buffer, frames: frames)
        waveform?.add(buffer, frames: frames)
    }
    public func checkpoint() throws { try inner.checkpoint() }
    public func finish() throws -> Int64 {
        if let waveform { notes.noteWaveform(waveform.peaks()) }
        if let meter {
            let loudness = meter.result()
            notes.noteLoudness(loudness)
            inner.measured(loudness)
        }
        return try inner.finish()
    }
    public var verifiesOutput: Bool { inner.verifiesOutput }
    public var verification: String? { inner.verification }
    public func abandon() { inner.abandon() }
    public func began(at date: Date, preRollFrames: Int64) {
        notes.noteStart(date)
        inner.began(at: date, preRollFrames: preRollFrames)
    }
}
