public import Foundation

/// Where one recording run is cut into takes (`--split`, `--split-size`). A plain value.
public struct SplitRule: Sendable, Hashable {
    /// A new take after this many seconds of audio; `nil`: no time splits.
    public var everySeconds: Double?
    /// With ``everySeconds``: the first split comes at the next multiple of the interval on the
    /// local clock (on the hour for 1 h), and each after it one interval of audio later.
    public var alignedToClock: Bool
    /// A new take before the file would grow past this many bytes; `nil`: no size splits.
    public var maxBytes: Int64?

    /// The shortest split interval: a take prepared ahead of its boundary needs the time.
    public static let shortestSeconds = 1.0
    /// The smallest split size.
    public static let smallestBytes: Int64 = 1 << 20

    public init(everySeconds: Double? = nil, alignedToClock: Bool = false, maxBytes: Int64? = nil) {
        self.everySeconds = everySeconds
        self.alignedToClock = alignedToClock
        self.maxBytes = maxBytes
    }

    /// Whether the rule splits at all.
    public var splits: Bool { everySeconds != nil || maxBytes != nil }

    /// Frames from `date` to the next multiple of `seconds` on the local clock, at `rate`
    /// (a whole interval when `date` is on a multiple). - Thread: any; never blocks.
    public static func framesToClockBoundary(from date: Date, every seconds: Double, rate: Int,
                                             timeZone: TimeZone = .current) -> Int64 {
        let local = date.timeIntervalSince1970 + Double(timeZone.secondsFromGMT(for: date))
        var left = seconds - local.truncatingRemainder(dividingBy: seconds)
        if left <= 0 { left += seconds }
        return max(1, Int64((left * Double(rate)).rounded()))
    }
}

/// A take made ready before its boundary: its entry committed and its file created, so that
/// the split itself only swaps writers. Created by a ``TakeSequence`` on the engine's take
/// queue, then owned by the writer thread until it ends; `@unchecked Sendable` because the
/// writer inside passes from one thread to the next and is used by one at a time.
public final class PreparedTake: @unchecked Sendable {
    /// The take's place in the run, from 1.
    public let index: Int
    /// The take's id in storage.
    public let id: String
    let writer: any TakeWriter
    /// The file the writer writes (for sizing it); `nil` for a stream.
    public let fileURL: URL?

    public init(index: Int, id: String, writer: any TakeWriter, fileURL: URL?) {
        self.index = index
        self.id = id
        self.writer = writer
        self.fileURL = fileURL
    }
}

/// A take of a run that ended at a boundary, its writer finished (or abandoned).
public struct EndedTake: Sendable, Hashable {
    public var index: Int
    public var id: String
    /// The frame of the run's audio the take started at.
    public var offset: Int64
    /// Frames in the file (the writer's count after finishing; what was written when it failed).
    public var frames: Int64
    /// Gaps filled with silence, at positions within the take.
    public var overruns: [OverrunEvent]
    public var clippedSamples: Int64
    /// Why the take ended.
    public var reason: TakeBoundary
    /// Whether the writer finished the file itself; `false`: it was abandoned and needs its
    /// encoder's repair.
    public var writerFinished: Bool
    /// Why finishing failed, when it did.
    public var failure: TapedeckError?
    /// Markers set while the take recorded, at frames of the take.
    public var markers: [TakeMarker] = []
}

/// What a run that splits into takes needs from its owner. Every method is called on the
/// engine's take queue, one at a time, in the order the run needs them (never on the device or
/// writer thread), and may block on disk I/O.
public protocol TakeSequence: Sendable {
    /// Makes take `index` of the run ready: its entry committed in state `recording` and its
    /// writer's file created. `start` is when its audio is expected to begin (the next time
    /// split's moment; now when that is not known), for the take's date and the file's tags.
    func prepareTake(index: Int, format: AudioFormat, start: Date) throws -> PreparedTake

    /// The take began at `offset` (a frame of the run's audio) for `reason`.
    func takeBegan(_ take: PreparedTake, offset: Int64, reason: TakeBoundary)

    /// A take ended at a boundary; the owner finishes it in storage.
    func takeEnded(_ take: EndedTake)

    /// A prepared take the run never used (it ended first), a programme take's too: its writer
    /// was abandoned; the owner removes its entry and file.
    func discard(_ take: PreparedTake)

    /// Makes the take of programme `window` ready (``RunPlan/programs``): its entry committed in
    /// state `recording` and its writer's file created, as for a take of the run. The default
    /// refuses: a sequence that keeps no programme takes.
    func prepareProgramTake(_ window: ProgramWindow, format: AudioFormat) throws -> PreparedTake

    /// A programme take ended (its window's end, or the run's); the owner finishes it in
    /// storage. `ended.index` is 0 and `ended.offset` the run's frame it began at. The default
    /// does nothing.
    func programTakeEnded(_ take: EndedTake, window: ProgramWindow)
}

extension TakeSequence {
    public func prepareProgramTake(_ window: ProgramWindow, format: AudioFormat) throws -> PreparedTake {
        throw TapedeckError(.invalidArgument, "This recorder keeps no programme takes (RunPlan.programs).")
    }

    public func programTakeEnded(_ take: EndedTake, window: ProgramWindow) {}
}

/// Sound-activated recording: a take begins when a period's peak reaches ``thresholdDB`` and
/// ends once the input has stayed below it for ``holdSeconds``. A plain value.
public struct VoxRule: Sendable, Hashable {
    /// The level that starts a take, in dBFS (a period's peak, any channel).
    public var thresholdDB: Double
    /// How long the input stays below the threshold before the take ends.
    public var holdSeconds: Double

    public init(thresholdDB: Double, holdSeconds: Double) {
        self.thresholdDB = thresholdDB
        self.holdSeconds = holdSeconds
    }
}

/// The silence alarm: the input stayed below ``thresholdDB`` (all-zero is below any threshold)
/// for ``seconds`` while a take recorded — most often a dead microphone. A plain value.
public struct SilenceAlarm: Sendable, Hashable {
    public var seconds: Double
    public var thresholdDB: Double

    public init(seconds: Double, thresholdDB: Double = -70) {
        self.seconds = seconds
        self.thresholdDB = thresholdDB
    }
}

/// How one `record` run goes: where takes are split, whether takes wait for sound (VOX) or a
/// trigger (armed), how much audio from before a take's start it keeps (pre-roll), and when
/// silence raises the alarm. A plain value.
public struct RunPlan: Sendable, Hashable {
    public var split: SplitRule
    /// Seconds of audio from before a take's trigger that the take starts with (VOX and armed
    /// runs), held in a ring allocated when the run starts.
    public var preRollSeconds: Double
    public var vox: VoxRule?
    /// The run waits for ``RecordingEngine/trigger()`` before its take begins.
    public var armed: Bool
    public var silenceAlarm: SilenceAlarm?
    /// A marker ends the take and begins the next at its frame (`--split-on-marker`).
    public var splitOnMarker: Bool = false
    /// ``RecordingEngine/split()`` ends the take and begins the next (the web page's Split).
    public var splitOnRequest: Bool = false
    /// A lost device ends the take (`interrupted`); the run waits for the device to come back
    /// and goes on in a new take (`--resume`, `capture.resume`).
    public var resume: Bool = false

    /// The longest pre-roll.
    public static let longestPreRoll = 30.0

    public init(split: SplitRule = SplitRule(), preRollSeconds: Double = 0, vox: VoxRule? = nil, armed: Bool = false,
                silenceAlarm: SilenceAlarm? = nil) {
        self.split = split
        self.preRollSeconds = preRollSeconds
        self.vox = vox
        self.armed = armed
        self.silenceAlarm = silenceAlarm
    }

    /// Whether the run waits (for sound or a trigger) before its first take.
    public var startsIdle: Bool { vox != nil || armed }
    /// Whether the run may make more than one take, or none: its takes come from a ``TakeSequence``.
    public var makesRun: Bool { split.splits || startsIdle || splitOnMarker || splitOnRequest || resume || !programs.isEmpty }
    /// Why the run's first take begins (`record --schedule`: a stretch began, or one under way
    /// was caught up with); `.start` otherwise.
    public var firstTakeBegins: TakeBoundary = .start
    /// Programmes the run also keeps as takes of their own, cut from the same audio while its
    /// takes go on unchanged (`--program`, `programs:`).
    public var programs: [ProgramRule] = []
}

/// Something that happened to a run between its takes: the device was lost and came back, or a
/// take reached its size limit when the disk had no room for the next.
public struct RunEvent: Sendable, Hashable, Codable {
    /// `device-lost`, or ``noRoom``.
    public var kind: String
    /// The run's frame it happened at.
    public var offset: Int64
    /// How long it lasted: the device's absence on the wall clock; for ``noRoom``, the audio
    /// not kept, at the device's rate.
    public var seconds: Double
    /// When it began.
    public var date: Date

    /// A take reached `--split-size` and the next could not be made ready (a full disk): the
    /// take ended at its limit and the run waited, its audio not kept, until a take could begin.
    public static let noRoom = "no-room"

    public init(kind: String, offset: Int64, seconds: Double, date: Date) {
        self.kind = kind
        self.offset = offset
        self.seconds = seconds
        self.date = date
    }
}

/// A stretch of input below the silence alarm's threshold for at least its seconds.
public struct SilenceEvent: Sendable, Hashable, Codable {
    /// The run's frame the silence began at, and its length in frames (up to where it ended, or
    /// the run did).
    public var offset: Int64
    public var frames: Int64
    /// When the alarm was raised.
    public var date: Date

    public init(offset: Int64, frames: Int64, date: Date) {
        self.offset = offset
        self.frames = frames
        self.date = date
    }
}
