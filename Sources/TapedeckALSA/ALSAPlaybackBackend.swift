#if ALSA
public import TapedeckCore
public import Logging
import CALSA

/// Plays to an ALSA PCM (`default`, `pulse`, `hw:…`, `plughw:…`, or a configured name) in exactly
/// the take's format.
public struct ALSAPlaybackBackend: PlaybackBackend {
    public let name = "alsa"
    /// The ALSA PCM name.
    public var device: String
    /// Buffer size in periods (2...32).
    public var periods: Int
    /// ALSA configuration text added to the system's for this backend's opens, or `nil`.
    public var definitions: String?
    /// How messages name the periods setting, e.g. `capture.alsa.periods`.
    public var periodsKey: String

    /// Creates a backend; nothing is opened until ``openPlaybackStream(format:options:)``.
    /// - Parameters:
    ///   - device: the ALSA PCM name.
    ///   - periods: buffer size in periods, clamped to the setting's range.
    ///   - definitions: extra ALSA configuration text.
    ///   - logger: where ALSA's own error messages go (see ``ALSAErrorLog``); `nil` leaves that as it is.
    ///   - periodsKey: how messages name the periods setting (the plugin passes its full key).
    /// - Thread: any. Never blocks.
    public init(device: String = ALSASettings.device.defaultValue, periods: Int = ALSASettings.periods.defaultValue,
                definitions: String? = nil, logger: Logger? = nil, periodsKey: String = ALSASettings.periods.key) {
        self.device = device
        self.periodsKey = periodsKey
        self.periods = ALSASettings.periods.clamp(periods)
        self.definitions = definitions
        if let logger { ALSAErrorLog.install(logger) }
    }

    /// The PCM devices ALSA's name hints list that can play.
    /// - Thread: any. May block briefly while ALSA reads its configuration.
    public func devices() throws -> [AudioDevice] {
        try ALSADeviceList.devices().filter(\.canPlay)
    }

    /// Opens ``device`` for playback in exactly `format`.
    /// - Thread: the device thread that will write the stream. Blocks while the device opens.
    /// - Throws: `.deviceUnavailable` or `.unsupportedFormat`, as for capture.
    public func openPlaybackStream(format: AudioFormat, options: PlaybackOptions) throws -> any PlaybackStream {
        let opened = try ALSAPCMSetup.open(device: device, definitions: definitions, stream: SND_PCM_STREAM_PLAYBACK,
                                           format: format, periodFrames: options.periodFrames, periods: periods, periodsKey: periodsKey)
        return ALSAPlaybackStream(device: device, opened: opened, format: format)
    }
}
#endif
