/// Options for opening a playback stream.
public struct PlaybackOptions: Sendable, Hashable {
    /// Frames per period: the unit of one blocking write.
    public var periodFrames: Int

    public init(periodFrames: Int) {
        self.periodFrames = periodFrames
    }
}

/// A playback backend: a plugin that lists devices and opens playback streams.
public protocol PlaybackBackend: Sendable {
    /// The plugin name this backend was made from, e.g. `null`.
    var name: String { get }

    /// Lists the devices this backend can play to.
    /// - Thread: any. May block briefly.
    func devices() throws -> [AudioDevice]

    /// Opens a playback stream.
    /// - Thread: the thread that will write the stream. May block while the device opens.
    func openPlaybackStream(format: AudioFormat, options: PlaybackOptions) throws -> any PlaybackStream
}

/// An open playback stream. Owned by one device thread; not `Sendable`.
public protocol PlaybackStream: AnyObject {
    /// The format negotiated with the device.
    var format: AudioFormat { get }
    /// Frames per period as negotiated.
    var periodFrames: Int { get }
    /// Whether the stream consumes audio on a real clock. A real-time stream that runs dry is
    /// fed counted silence; a stream that is not real time (a file, a test sink) is made to wait.
    var isRealTime: Bool { get }
    /// The device the stream plays to, as its backend names it (a PulseAudio sink, the JACK
    /// ports, an ALSA card), or `nil` when no more is known than the configured name.
    var deviceName: String? { get }

    /// Blocks until `frames` frames from `buffer` are queued to the device.
    /// - Thread: the device thread only. Blocks for about one period.
    /// - Returns: frames of silence the device played because data came late (underruns).
    func write(_ buffer: UnsafeRawPointer, frames: Int) throws -> Int64

    /// Blocks until everything written has been played.
    /// - Thread: the device thread only.
    func drain() throws

    /// Closes the device. Called once, on the device thread.
    func close()
}

extension PlaybackStream {
    /// No more than the configured name is known.
    public var deviceName: String? { nil }
}
