#if PulseAudio
public import TapedeckCore
import Logging

/// Capture from a PulseAudio server (or PipeWire's PulseAudio service): `capture.backend: pulse`.
///
/// A value holding settings only; every stream gets its own context and main loop, run by the
/// device thread.
public struct PulseCaptureBackend: CaptureBackend {
    public let name = "pulse"
    let settings: PulseSettings
    let logger: Logger

    /// Creates the backend from the plugin's settings, read (see ``PulsePlugin``).
    /// - Thread: any. Never blocks.
    init(settings: PulseSettings, logger: Logger) {
        self.settings = settings
        self.logger = logger
    }

    /// The server's sources, monitors of sinks included (`details["monitorOf"]`), each with its
    /// `sampleSpec`; the default source is marked.
    /// - Thread: any that may block. Blocks for a few round trips to the server.
    /// - Throws: `.deviceUnavailable` naming the server when it cannot be reached.
    public func devices() throws -> [AudioDevice] {
        try PulseDeviceList.list(settings: settings).sources
    }

    /// Connects, opens a record stream in exactly `format` (corked until the first read), and
    /// returns it. `options.periodFrames` is not used: the fragment comes from `fragment-ms`, and
    /// the negotiated fragment is the stream's `CaptureStream.periodFrames`.
    /// - Thread: the device thread that will read the stream. Blocks up to about 5 s.
    /// - Throws: `.deviceUnavailable` (no server, no such source) or `.unsupportedFormat`.
    public func openCaptureStream(format: AudioFormat, options: CaptureOptions) throws -> any CaptureStream {
        try PulseCaptureStream(settings: settings, format: format, logger: logger)
    }
}
#endif
