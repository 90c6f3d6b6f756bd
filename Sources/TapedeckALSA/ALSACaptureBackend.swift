#if ALSA
public import TapedeckCore
public import Logging
import CALSA

/// Captures from an ALSA PCM: a card (`hw:CARD=USB,DEV=0`), a converting device (`plughw:…`),
/// `default`, the `pulse` device, or any name defined in the ALSA configuration.
///
/// Streams record in exactly the requested format (never another rate or depth); a device that
/// cannot is refused with `.unsupportedFormat` saying what it can do.
public struct ALSACaptureBackend: CaptureBackend {
    public let name = "alsa"
    /// The ALSA PCM name.
    public var device: String
    /// Buffer size in periods (2...32).
    public var periods: Int
    /// ALSA configuration text added to the system's for this backend's opens (e.g. a
    /// `pcm.name { … }` definition), or `nil` for the system configuration alone.
    public var definitions: String?
    /// How messages name the periods setting, e.g. `capture.alsa.periods`.
    public var periodsKey: String

    /// Creates a backend; nothing is opened until ``openCaptureStream(format:options:)``.
    /// - Parameters:
    ///   - device: the ALSA PCM name, e.g. `default`, `pulse`, `hw:CARD=USB,DEV=0`.
    ///   - periods: buffer size in periods, clamped to the setting's range.
    ///   - definitions: extra ALSA configuration text, e.g. `pcm.mine { type plug slave.pcm "hw:0" }`.
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

    /// The PCM devices ALSA's name hints list that can capture.
    /// - Thread: any. May block briefly while ALSA reads its configuration.
    public func devices() throws -> [AudioDevice] {
        try ALSADeviceList.devices().filter(\.canCapture)
    }

    /// Opens ``device`` for capture in exactly `format`, with a period near `options.periodFrames`.
    /// - Thread: the device thread that will read the stream. Blocks while the device opens.
    /// - Throws: `.deviceUnavailable` (unknown name, busy, not permitted) or `.unsupportedFormat`
    ///   naming the rates, channels and sample formats the device accepts.
    public func openCaptureStream(format: AudioFormat, options: CaptureOptions) throws -> any CaptureStream {
        let opened = try ALSAPCMSetup.open(device: device, definitions: definitions, stream: SND_PCM_STREAM_CAPTURE,
                                           format: format, periodFrames: options.periodFrames, periods: periods, periodsKey: periodsKey)
        return ALSACaptureStream(device: device, opened: opened, format: format)
    }
}
#endif
