public import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// What a running recorder is doing, as its control socket tells it (``RecorderControl``) and
/// `tapedeck status --json` prints it: the same for a `tapedeck record` and for the recording of
/// a `tapedeck serve`, so the page and the shell see every recorder of a library alike. A plain
/// value; any thread.
public struct RecorderStatus: Codable, Sendable, Hashable {
    public var kind = "recorder"
    public var schema = JSONSchema.version
    /// The recording process, and what started the recording (`record` or `serve`).
    public var pid: Int32
    public var startedBy: String
    public var library: String
    public var startedAt: Date
    /// `opening`, `recording` or `finishing`.
    public var phase: String
    /// The session recorded into, and SESSION/TAKE being written (the session alone while a run
    /// waits for sound or a trigger).
    public var session: String?
    public var target: String?
    public var seconds: Double
    public var frames: Int64
    public var sampleRate: Int?
    /// Per-channel peaks (0…1) since the last status (the reader applies its own meter's ballistics).
    public var peaks: [Float]
    /// Per-channel RMS (0…1) over the same audio; absent from recorders before 0.2.0.
    public var rms: [Float]?
    public var clippedSamples: Int64
    public var overruns: Int
    public var markers: Int
    /// The take of a split run being written (from 1), and frames to the next time split.
    public var takeIndex: Int
    public var framesToSplit: Int64?
    /// Whether the recording splits on request (`split` is refused otherwise).
    public var splits: Bool
    /// What a run with no take open waits for (`trigger` or `sound`), with the pre-roll it holds.
    public var waiting: String?
    public var preRollFrames: Int64
    public var voxHolding: Bool
    /// Whether the input is silent past the silence alarm now, and how many alarms the run had;
    /// the bytes of the take's file so far. Absent from recorders before 0.2.0.
    public var silent: Bool?
    public var silenceAlarms: Int?
    public var takeBytes: Int64?
    /// When the recording stops by itself (`-d`, `--until`), if it does.
    public var stopsAt: Date?

    /// The status of `recorder` now (after ``TakeRecorder/refreshProgress()``).
    /// - Thread: main actor. Never blocks.
    @MainActor
    public init(recorder: TakeRecorder, pid: Int32, startedBy: String, library: String, session: String?,
                startedAt: Date, splits: Bool, stopsAt: Date?) {
        self.pid = pid
        self.startedBy = startedBy
        self.library = library
        self.startedAt = startedAt
        phase = switch recorder.phase {
        case .idle, .opening: "opening"
        case .recording: "recording"
        case .finishing, .finished: "finishing"
        }
        self.session = session
        target = recorder.target?.take
        seconds = recorder.seconds
        frames = recorder.frames
        sampleRate = recorder.format?.sampleRate
        peaks = recorder.peaks
        rms = recorder.rms
        clippedSamples = recorder.clippedSamples
        overruns = recorder.overrunCount
        markers = recorder.markerCount
        takeIndex = recorder.takeIndex
        framesToSplit = recorder.framesToSplit
        self.splits = splits
        waiting = recorder.waiting.map { $0 == .armed ? "trigger" : "sound" }
        preRollFrames = recorder.preRollFrames
        voxHolding = recorder.voxHolding
        silent = recorder.silenceOngoing
        silenceAlarms = recorder.silenceAlarms
        if let file = recorder.target.flatMap({ $0.waiting ? nil : $0.fileURL }) {
            var st = stat()
            takeBytes = stat(file.path, &st) == 0 ? Int64(st.st_size) : nil
        }
        self.stopsAt = stopsAt
    }
}
