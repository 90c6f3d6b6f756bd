public import TapedeckCore
import Synchronization

/// Playback with no audio system: consumes frames at the pace of a ``PacingClock`` (or at once,
/// unpaced) and counts them.
public struct NullPlaybackBackend: PlaybackBackend {
    public let name = "null"
    public var clock: (any PacingClock)?
    /// Counts every frame any stream of this backend consumed (shared by copies of the backend).
    public let counter: NullPlaybackCounter

    public init(clock: (any PacingClock)? = MonotonicPacingClock(), counter: NullPlaybackCounter = NullPlaybackCounter()) {
        self.clock = clock
        self.counter = counter
    }

    /// The one null device. - Thread: any; never blocks.
    public func devices() throws -> [AudioDevice] {
        [AudioDevice(name: "null", description: "Discards audio at the device's pace", canCapture: false, canPlay: true, isDefault: true)]
    }

    /// A stream that consumes audio at the clock's pace. - Thread: the device thread; never blocks.
    public func openPlaybackStream(format: AudioFormat, options: PlaybackOptions) throws -> any PlaybackStream {
        try format.validate()
        return NullPlaybackStream(format: format, periodFrames: max(1, options.periodFrames), clock: clock, counter: counter)
    }
}

/// Frames consumed by null playback streams.
public final class NullPlaybackCounter: Sendable {
    private let frames = Atomic<Int64>(0)
    public init() {}
    /// Frames consumed so far. Thread: any; never blocks.
    public var consumedFrames: Int64 { frames.load(ordering: .relaxed) }
    func add(_ n: Int64) { frames.add(n, ordering: .relaxed) }
}

final class NullPlaybackStream: PlaybackStream {
    let format: AudioFormat
    let periodFrames: Int
    let clock: (any PacingClock)?
    let counter: NullPlaybackCounter
    private var written: Int64 = 0
    var isRealTime: Bool { clock?.isRealTime ?? false }
    /// Where the audio goes: nowhere but the counter, as `play`'s report says.
    var deviceName: String? { "null (discarded)" }
    private var startNanos: UInt64?

    init(format: AudioFormat, periodFrames: Int, clock: (any PacingClock)?, counter: NullPlaybackCounter) {
        self.format = format
        self.periodFrames = periodFrames
        self.clock = clock
        self.counter = counter
    }

    private func deadline(_ frames: Int64) -> UInt64? {
        guard let clock else { return nil }
        let start = startNanos ?? clock.nowNanoseconds()
        startNanos = start
        return start + UInt64(frames) * 1_000_000_000 / UInt64(format.sampleRate)
    }

    func write(_ buffer: UnsafeRawPointer, frames: Int) throws -> Int64 {
        // Like a device with a two-period buffer: block until there is room for this period.
        if let clock, let d = deadline(max(0, written - Int64(2 * periodFrames))) { clock.sleep(untilNanoseconds: d) }
        written += Int64(frames)
        counter.add(Int64(frames))
        return 0
    }

    func drain() throws {
        if let clock, let d = deadline(written) { clock.sleep(untilNanoseconds: d) }
    }

    func close() {}
}
