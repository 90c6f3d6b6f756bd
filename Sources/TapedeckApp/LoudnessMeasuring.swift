import Logging
import TapedeckCore

/// Puts a loudness meter on a take's writer. Plain functions; any thread; never block.
enum LoudnessMeasuring {
    /// `writer` measured by a meter of `analyzer`'s into `measured`; `writer` itself when there
    /// is no analyzer or it cannot measure `format` (logged: the take is recorded all the same).
    static func wrap(_ writer: any TakeWriter, format: AudioFormat, analyzer: (any LoudnessAnalyzer)?,
                     into measured: MeasuredLoudness, logger: Logger) -> any TakeWriter {
        guard let analyzer else { return writer }
        do {
            return MeasuringTakeWriter(writer, meter: try analyzer.makeMeter(for: format), into: measured)
        } catch {
            logger.warning("The take's loudness is not measured: \(error). Measure it later with `tapedeck loudness TAKE`.")
            return writer
        }
    }
}
