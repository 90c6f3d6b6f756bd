public import TapedeckCore
public import Foundation

/// How long to record.
public enum RecordingLength: Sendable, Hashable {
    /// Exactly this many frames.
    case frames(Int64)
    /// This many seconds, converted to frames at the rate the device negotiated.
    case seconds(Double)

    func frames(at rate: Int) -> Int64 {
        switch self {
        case .frames(let n): n
        case .seconds(let s): Int64((s * Double(rate)).rounded())
        }
    }
}

/// What a finished recording produced, for the final report.
public struct RecordingReport: Sendable, Hashable {
    /// The take recorded (the last one of a split run).
    public var take: Take
    /// A split run's id, and its takes before ``take`` in run order (empty without splitting).
    public var runID: String? = nil
    public var earlierTakes: [Take] = []
    public var session: Session
    public var fileURL: URL
    public var end: RecordingEnd
    public var wallSeconds: Double
    /// A sentence on how the recording ended, e.g. why it was interrupted.
    public var summary: String
    /// Where the silence alarm went off (`RunPlan.silenceAlarm`).
    public var silences: [SilenceEvent] = []
    /// The device's absences (`RunPlan.resume`).
    public var events: [RunEvent] = []
    /// Markers set in the run that were not kept: their take had `TakeMarker.maxCount` already.
    public var markersNotKept = 0
    /// The programme takes the run kept beside its own (`RunPlan.programs`), in the order they ended.
    public var programTakes: [Take] = []
}

/// A run that waited for sound (VOX) or a trigger (armed) and ended before either came: no
/// take was made. Not a failure of the recorder; the command reports it and exits 0.
public struct NothingRecorded: Error, Sendable {
    public var session: Session
    public var end: RecordingEnd
    public var wallSeconds: Double
    public var silences: [SilenceEvent]
    /// A sentence saying why there is no take.
    public var summary: String
}

/// A recording whose audio is safe in its pending file but whose take could not be finished in
/// storage (the folder cannot be written, the catalog failed): the next command that opens the
/// library recovers it. Carries the report so far (the take still `recording`, the pending file's
/// URL) and the error, whose message says all that.
public struct UnfinishedRecording: Error, Sendable {
    public var report: RecordingReport
    public var error: TapedeckError
}

/// Where a recording goes: the take (`SESSION/TAKE`; `nil` for a file outside the library) and
/// the file.
public struct RecordingTarget: Sendable, Hashable {
    public var take: String?
    public var fileURL: URL
    /// A run waiting for sound or a trigger: ``take`` is the session's name, and no file exists yet.
    public var waiting = false
    /// The ids of the take (`nil` while waiting, or for a file outside the library), its session
    /// and its run (`nil` for a single take), for logs that carry them (the journal's fields).
    public var takeID: String? = nil
    public var sessionID: String? = nil
    public var runID: String? = nil
}

/// Where `record -o` writes: a plain file outside the library, or a stream (stdout).
public enum RecordingOutput: Sendable, Hashable {
    case file(URL)
    /// A file descriptor that cannot seek; never closed by the recorder.
    case stream(Int32)
}

/// What a recording to a file or stream produced (``TakeRecorder/record(to:name:duration:)``).
public struct OutputRecordingReport: Sendable, Hashable {
    public var output: RecordingOutput
    public var format: AudioFormat
    public var encoding: String
    public var frames: Int64
    /// As a take in the library would be: complete, interrupted or truncated.
    public var state: TakeState
    public var overruns: [OverrunEvent]
    public var clippedSamples: Int64
    public var end: RecordingEnd
    public var wallSeconds: Double
    public var summary: String

    /// Length in seconds.
    public var seconds: Double { format.seconds(forFrames: frames) }
}

/// How a run's settings read in messages: `3 s`, `2.5 s`, `-40 dBFS`. Plain functions; any
/// thread, never block.
public enum RunText {
    public static func seconds(_ s: Double) -> String {
        s == s.rounded() ? "\(Int(s)) s" : String(format: "%.1f s", s)
    }

    public static func decibels(_ db: Double) -> String {
        db == db.rounded() ? "\(Int(db)) dBFS" : String(format: "%.1f dBFS", db)
    }
}
