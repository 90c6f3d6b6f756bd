public import TapedeckCore

/// The null backend's plugin descriptors.
public enum NullPlugin {
    /// `capture.backend: null`.
    public static let capture = CapturePlugin(
        name: "null",
        summary: "Generated test signal (silence, sine, noise or frame counter); no sound card needed.",
        settings: [
            SettingDeclaration("signal", .choice(["silence", "sine", "noise", "counter"]), default: "sine",
                               help: "What to generate; `counter` lets tests prove no sample was lost or reordered."),
            SettingDeclaration("frequency", .double(1...96_000), default: "440", help: "Sine frequency in hertz."),
            SettingDeclaration("level", .double(0...1), default: "0.5", help: "Peak level of sine and noise, 0 to 1."),
            SettingDeclaration("seed", .int(0...Int.max), default: "1", help: "Seed of the noise generator."),
            SettingDeclaration("paced", .bool, default: "true",
                               help: "Deliver audio in real time (true) or as fast as it is taken (false)."),
            SettingDeclaration("overrun-at-frame", .int(-1...Int.max), default: "-1",
                               help: "Inject a device xrun at this frame (-1: never)."),
            SettingDeclaration("overrun-frames", .int(1...10_000_000), default: "1024", help: "Frames lost by the injected xrun."),
            SettingDeclaration("device-loss-at-frame", .int(-1...Int.max), default: "-1",
                               help: "Make the device disappear at this frame (-1: never)."),
        ],
        make: { settings, _ in
            let level = settings.double("level") ?? 0.5
            let signal: NullSignal = switch settings.string("signal") ?? "sine" {
            case "silence": .silence
            case "noise": .noise(seed: UInt64(settings.int("seed") ?? 1), level: level)
            case "counter": .frameCounter
            default: .sine(frequency: settings.double("frequency") ?? 440, level: level)
            }
            let overrun = settings.int("overrun-at-frame") ?? -1
            let loss = settings.int("device-loss-at-frame") ?? -1
            let faults = NullFaults(
                overrunAtFrame: overrun >= 0 ? Int64(overrun) : nil,
                overrunFrames: Int64(settings.int("overrun-frames") ?? 1024),
                deviceLossAtFrame: loss >= 0 ? Int64(loss) : nil)
            return NullCaptureBackend(signal: signal, clock: (settings.bool("paced") ?? true) ? MonotonicPacingClock() : nil, faults: faults)
        })

    /// `playback.backend: null`.
    public static let playback = PlaybackPlugin(
        name: "null",
        summary: "Discards audio at the pace of a real device; no sound card needed.",
        settings: [
            SettingDeclaration("paced", .bool, default: "true", help: "Consume audio in real time (true) or at once (false)."),
        ],
        make: { settings, _ in
            NullPlaybackBackend(clock: (settings.bool("paced") ?? true) ? MonotonicPacingClock() : nil)
        })
}
