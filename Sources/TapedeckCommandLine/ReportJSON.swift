import Foundation
import TapedeckCore
import TapedeckApp

struct RecordReportJSON: Encodable {
    var kind = "recording"
    var schema = JSONSchema.version
    /// The take recorded: the last of a split run; `null` when a run that waited (VOX, armed)
    /// made none.
    var take: TakeJSON?
    /// A split run: its id and every take of it in order (``take`` last); absent without splitting.
    var run: String? = nil
    var takes: [TakeJSON]? = nil
    var end: String
    var message: String
    var wallSeconds: Double
    var exitStatus: Int32
    /// Where the silence alarm went off (`--silence-alarm`); empty without it.
    var silences: [SilenceJSON] = []
    /// What happened between takes (`--resume`: the device's absences); empty when nothing did.
    var events: [RunEventJSON] = []
    /// Markers set after their take had the most a take keeps (999), which were not kept.
    var markersNotKept = 0
    /// The programme takes kept beside the run's (`--program`, `programs:`), in the order they ended.
    var programTakes: [TakeJSON] = []
}

/// A run's event (docs/JSON.md).
struct RunEventJSON: Encodable {
    var kind: String
    var offsetSeconds: Double
    var seconds: Double
    var date: Date

    init(_ event: RunEvent, format: AudioFormat) {
        kind = event.kind
        offsetSeconds = format.seconds(forFrames: event.offset)
        seconds = event.seconds
        date = event.date
    }
}

/// A stretch of silent input (`--silence-alarm`), at a place in the run.
struct SilenceJSON: Encodable {
    var offsetSeconds: Double
    var seconds: Double
    var date: Date

    init(_ event: SilenceEvent, format: AudioFormat) {
        offsetSeconds = format.seconds(forFrames: event.offset)
        seconds = format.seconds(forFrames: event.frames)
        date = event.date
    }
}

/// `record -o FILE --json`: a recording outside the library.
struct FileRecordingJSON: Encodable {
    var kind = "file-recording"
    var schema = JSONSchema.version
    var path: String
    var seconds: Double
    var frames: Int64
    var format: FormatJSON
    var encoding: String
    var state: String
    var end: String
    var overruns: Int
    var clippedSamples: Int64
    var message: String
    var wallSeconds: Double
    var exitStatus: Int32
}
