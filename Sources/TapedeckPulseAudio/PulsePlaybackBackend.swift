#if PulseAudio
public import TapedeckCore
import Logging

/// Playback to a PulseAudio server (or PipeWire's PulseAudio service): `playback.backend: pulse`.
///
/// A value holding settings only; every stream gets its own context and main loop, run by the
/// device thread.
public struct PulsePlaybackBackend: PlaybackBackend {
    public let name = "pulse"
    let settings: PulseSettings
    let logger: Logger

    /// Creates the backend from the plugin's settings, read (see ``PulsePlugin``).
    /// - Thread: any. Never blocks.
    init(settings: PulseSettings, logger: Logger) {
        self.settings = settings
        self.logger = logger
    }

    /// The server's sinks, each with its `sampleSpec`; the default sink is marked.
    /// - Thread: any that may block. Blocks for a few round trips to the server.
    /// - Throws: `.deviceUnavailable` naming the server when it cannot be reached.
    public func devices() throws -> [AudioDevice] {
        try PulseDeviceList.list(settings: settings).sinks
    }

    /// Connects and opens a playback stream in exactly `format`, with `fragment-ms` as its target
    /// latency; its `PlaybackStream.periodFrames` is the server's request size.
    /// - Thread: the device thread that will write the stream. Blocks up to about 5 s.
    /// - Throws: `.deviceUnavailable` (no server, no such sink) or `.unsupportedFormat`.
    public func openPlaybackStream(format: AudioFormat, options: PlaybackOptions) throws -> any PlaybackStream {
        try PulsePlaybackStream(settings: settings, format: format, options: options, logger: logger)
    }
}
#endif
