#if ALSA
public import TapedeckCore

/// The ALSA backend's plugin descriptors (`capture.backend: alsa`, `playback.backend: alsa`).
public enum ALSAPlugin {
    static let settings: [SettingDeclaration] = [
        SettingDeclaration("device", .string, default: "default",
                           help: "ALSA PCM name: default, pulse, hw:CARD=USB,DEV=0, plughw:… (converts formats), or a name from ~/.asoundrc."),
        SettingDeclaration("periods", .int(2...32), default: "4",
                           help: "Device buffer size in periods; the period is capture.period-frames (or playback.period-frames)."),
    ]

    /// `capture.backend: alsa`. The factory routes ALSA's own error messages to the plugin's logger.
    /// - Thread: the factory runs on any thread; it never blocks.
    public static let capture = CapturePlugin(
        name: "alsa",
        summary: "ALSA PCM capture (cards, plughw, dsnoop, the pulse device) in exactly the requested format.",
        settings: settings,
        make: { settings, context in
            ALSACaptureBackend(device: settings.string("device") ?? "default", periods: settings.int("periods") ?? 4,
                               logger: context.logger)
        })

    /// `playback.backend: alsa`.
    /// - Thread: the factory runs on any thread; it never blocks.
    public static let playback = PlaybackPlugin(
        name: "alsa",
        summary: "ALSA PCM playback (cards, plughw, dmix, the pulse device) in exactly the take's format.",
        settings: settings,
        make: { settings, context in
            ALSAPlaybackBackend(device: settings.string("device") ?? "default", periods: settings.int("periods") ?? 4,
                                logger: context.logger)
        })
}
#endif
