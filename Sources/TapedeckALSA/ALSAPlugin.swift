#if ALSA
import CALSA
public import TapedeckCore

/// The ALSA plugin's settings (`capture.alsa.*`, `playback.alsa.*`). A plain value; safe on any thread.
public struct ALSASettings: SettingsGroup, Hashable {
    public static let device = Setting<String>("device", default: "default",
        help: "ALSA PCM name: default, pulse, hw:CARD=USB,DEV=0, plughw:… (converts formats), or a name from ~/.asoundrc.")
    public static let periods = Setting<Int>("periods", range: 2...32, default: 4,
        help: "Device buffer size in periods; the period is capture.period-frames (or playback.period-frames).")
    public static let declarations = [device.declaration, periods.declaration]

    public var device: String
    public var periods: Int

    /// Settings with the given values, the declared defaults for the rest.
    public init(device: String = Self.device.defaultValue, periods: Int = Self.periods.defaultValue) {
        self.device = device
        self.periods = periods
    }

    public init(_ settings: PluginSettings) {
        self.init(device: settings[Self.device], periods: settings[Self.periods])
    }
}

/// The ALSA backend's plugin descriptors (`capture.backend: alsa`, `playback.backend: alsa`).
public enum ALSAPlugin {
    /// The linked libasound, e.g. `libasound 1.2.8`. - Thread: any; never blocks.
    public static var library: String { "libasound " + String(cString: snd_asoundlib_version()) }

    /// `capture.backend: alsa`. The factory routes ALSA's own error messages to the plugin's logger.
    /// - Thread: the factory runs on any thread; it never blocks.
    public static let capture = CapturePlugin(
        name: "alsa",
        summary: "ALSA PCM capture (cards, plughw, dsnoop, the pulse device) in exactly the requested format.",
        settings: ALSASettings.self,
        make: { settings, context in
            ALSACaptureBackend(device: settings.device, periods: settings.periods, logger: context.logger,
                               periodsKey: context.key(ALSASettings.periods))
        })

    /// `playback.backend: alsa`.
    /// - Thread: the factory runs on any thread; it never blocks.
    public static let playback = PlaybackPlugin(
        name: "alsa",
        summary: "ALSA PCM playback (cards, plughw, dmix, the pulse device) in exactly the take's format.",
        settings: ALSASettings.self,
        make: { settings, context in
            ALSAPlaybackBackend(device: settings.device, periods: settings.periods, logger: context.logger,
                                periodsKey: context.key(ALSASettings.periods))
        })
}
#endif
