public import TapedeckCore
import Synchronization

/// A playback backend that keeps every byte written to it, for tests of what feeds playback.
public final class CollectingPlaybackBackend: PlaybackBackend {
    public let name = "collecting"
    private let state = Mutex<(bytes: [UInt8], drained: Int, opened: Int)>(([], 0, 0))

    public init() {}

    /// Everything played so far. - Thread: any.
    public var collected: [UInt8] { state.withLock { $0.bytes } }
    /// How many streams were drained. - Thread: any.
    public var drainCount: Int { state.withLock { $0.drained } }

    public func devices() throws -> [AudioDevice] {
        [AudioDevice(name: "collecting", description: "Collects audio for tests", canCapture: false, canPlay: true, isDefault: true)]
    }

    public func openPlaybackStream(format: AudioFormat, options: PlaybackOptions) throws -> any PlaybackStream {
        try format.validate()
        state.withLock { $0.opened += 1 }
        return Stream(format: format, periodFrames: options.periodFrames, owner: self)
    }

    fileprivate func append(_ p: UnsafeRawPointer, _ count: Int) {
        state.withLock { $0.bytes.append(contentsOf: UnsafeRawBufferPointer(start: p, count: count)) }
    }

    fileprivate func markDrained() { state.withLock { $0.drained += 1 } }

    final class Stream: PlaybackStream {
        let format: AudioFormat
        let periodFrames: Int
        let owner: CollectingPlaybackBackend
        let isRealTime = false
        init(format: AudioFormat, periodFrames: Int, owner: CollectingPlaybackBackend) {
            self.format = format
            self.periodFrames = periodFrames
            self.owner = owner
        }
        func write(_ buffer: UnsafeRawPointer, frames: Int) throws -> Int64 {
            owner.append(buffer, frames * format.bytesPerFrame)
            return 0
        }
        func drain() throws { owner.markDrained() }
        func close() {}
    }
}
