public import Foundation
import Logging
public import TapedeckCore

/// Puts a ``MeasuringTakeWriter`` on a take's writer, and writes what it learnt into the
/// finished file. Plain functions; any thread.
enum LoudnessMeasuring {
    /// `writer`, noting its first frame's time into `notes` and measured by a meter of
    /// `analyzer`'s (none when there is no analyzer or it cannot measure `format`: logged, and
    /// the take is recorded all the same), and with `waveform` drawing its overview into `notes`
    /// (``WaveformTap``). Never blocks.
    static func wrap(_ writer: any TakeWriter, format: AudioFormat, analyzer: (any LoudnessAnalyzer)?, waveform: Bool = false,
                     into notes: WriterNotes, logger: Logger) -> any TakeWriter {
        var meter: (any LoudnessMeter)?
        if let analyzer {
            do { meter = try analyzer.makeMeter(for: format) } catch {
                logger.warning("The take's loudness is not measured: \(error). Measure it later with `tapedeck loudness TAKE`.")
            }
        }
        return MeasuringTakeWriter(writer, meter: meter, waveform: waveform ? WaveformTap(format: format) : nil, notes: notes)
    }
}

/// What a take's file says of it beyond the audio, from the library's entry: the machine's
/// identity, where it was captured, and the take's own facts (`TakeMetadata`). A plain value;
/// any thread; never blocks.
public struct TakeFacts: Sendable, Hashable {
    public var identity: FileIdentity
    /// Where takes recorded here come from; `nil` for work that does not capture.
    public var source: CaptureSource?

    public init(identity: FileIdentity = FileIdentity(), source: CaptureSource? = nil) {
        self.identity = identity
        self.source = source
    }

    /// The metadata of `take` in `sessionName`; `startDate` is its first frame's time when
    /// known (else when its entry was made).
    public func metadata(for take: Take, sessionName: String, startDate: Date? = nil, preRollFrames: Int64 = 0) -> TakeMetadata {
        TakeMetadata(takeName: take.name, sessionName: sessionName, takeNumber: take.number, startDate: startDate ?? take.began ?? take.createdAt,
                     notes: take.notes, tags: take.tags.filter { $0.key != TakeCompanions.signedTag }, takeID: take.id, identity: identity, source: source, run: take.run,
                     preRollFrames: preRollFrames, loudness: take.loudness)
    }

    /// Writes a just-recorded `take`'s markers, when it has any, into its finished file; a
    /// failure is logged (the library keeps them). Its time of day and loudness are in the file
    /// already where the format has a place for them: the writer put them there before the take
    /// was committed (``TakeWriter/measured(_:)``), so a finished take's file is not rewritten
    /// for them. - Blocks on disk I/O.
    static func writeMarkers(of take: Take, to url: URL, with encoder: any AudioEncoder, logger: Logger) {
        guard !take.markers.isEmpty else { return }
        do { try encoder.writeMarkers(take.markers, toFileAt: url) } catch {
            logger.warning("Could not write the markers into \(url.path): \(error). The library keeps them.")
        }
    }
}
