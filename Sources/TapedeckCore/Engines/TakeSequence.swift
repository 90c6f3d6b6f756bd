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

    /// A prepared take the run never used (it ended first): its writer was abandoned; the owner
    /// removes its entry and file.
    func discard(_ take: PreparedTake)
}
