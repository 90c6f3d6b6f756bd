public import TapedeckCore

/// The null capture backend's settings (`capture.null.*`). A plain value; safe on any thread.
public struct NullCaptureSettings: SettingsGroup, Hashable {
    /// The words of `signal`.
    public enum SignalKind: String, SettingChoice {
        case silence, sine, noise, counter
    }

    public static let signal = Setting<SignalKind>("signal", default: .sine,
        help: "What to generate; `counter` lets tests prove no sample was lost or reordered.")
    public static let frequency = Setting<Double>("frequency", range: 1...96_000, default: 440, help: "Sine frequency in hertz.")
    public static let level = Setting<Double>("level", range: 0...1, default: 0.5, help: "Peak level of sine and noise, 0 to 1.")
    public static let seed = Setting<Int>("seed", range: 0...Int.max, default: 1, help: "Seed of the noise generator.")
    public static let paced = Setting<Bool>("paced", default: true,
        help: "Deliver audio in real time (true) or as fast as it is taken (false).")
    public static let overrunAtFrame = Setting<Int>("overrun-at-frame", range: -1...Int.max, default: -1,
        help: "Inject a device xrun at this frame (-1: never).")
    public static let overrunFrames = Setting<Int>("overrun-frames", range: 1...10_000_000, default: 1024,
        help: "Frames lost by the injected xrun.")
    public static let deviceLossAtFrame = Setting<Int>("device-loss-at-frame", range: -1...Int.max, default: -1,
        help: "Make the device disappear at this frame (-1: never).")
    public static let deviceBackAfter = Setting<Double>("device-back-after", range: -1...86_400, default: -1,
        help: "Fault injection for tests: seconds after the loss when the device can be opened again (-1: never).")
    public static let freezeAtFrame = Setting<Int>("freeze-at-frame", range: -1...Int.max, default: -1,
        help: "Fault injection for tests: the device hangs at this frame, its reads never returning, as a driver that stops answering (-1: never).")
    public static let gate = Setting<String>("gate", default: "",
        help: "Switch the signal off and on: seconds off, on, off… (\"2,1,3,0.5\"), repeating; empty: always on.")
    public static let declarations = [signal.declaration, frequency.declaration, level.declaration, seed.declaration,
                                      paced.declaration, overrunAtFrame.declaration, overrunFrames.declaration,
                                      deviceLossAtFrame.declaration, deviceBackAfter.declaration, freezeAtFrame.declaration, gate.declaration]

    /// The signal to generate.
    public var signal: NullSignal
    /// `gate` in seconds (off, on, off…); empty: always on.
    public var gate: [Double]
    public var paced: Bool
    public var faults: NullFaults

    public init(_ settings: PluginSettings) {
        let level = settings[Self.level]
        signal = switch settings[Self.signal] {
        case .silence: .silence
        case .noise: .noise(seed: UInt64(settings[Self.seed]), level: level)
        case .counter: .frameCounter
        case .sine: .sine(frequency: settings[Self.frequency], level: level)
        }
        // Seconds, kept as such: frames need the rate, which the stream knows.
        gate = settings[Self.gate].split(separator: ",").compactMap { Double($0.trimmingSpaces) }.filter { $0 >= 0 && $0.isFinite }
        paced = settings[Self.paced]
        let overrun = settings[Self.overrunAtFrame]
        let loss = settings[Self.deviceLossAtFrame]
        faults = NullFaults(overrunAtFrame: overrun >= 0 ? Int64(overrun) : nil,
                            overrunFrames: Int64(settings[Self.overrunFrames]),
                            deviceLossAtFrame: loss >= 0 ? Int64(loss) : nil,
                            deviceBackAfter: settings[Self.deviceBackAfter] >= 0 ? settings[Self.deviceBackAfter] : nil)
        if settings[Self.freezeAtFrame] >= 0 { faults.freezeAtFrame = Int64(settings[Self.freezeAtFrame]) }
    }
}

/// The null playback backend's settings (`playback.null.*`). A plain value; safe on any thread.
public struct NullPlaybackSettings: SettingsGroup, Hashable {
    public static let paced = Setting<Bool>("paced", default: true, help: "Consume audio in real time (true) or at once (false).")
    public static let declarations = [paced.declaration]

    public var paced: Bool

    public init(_ settings: PluginSettings) {
        paced = settings[Self.paced]
    }
}

/// The null backend's plugin descriptors.
public enum NullPlugin {
    /// `capture.backend: null`. - Thread: `make` runs on any thread and never blocks.
    public static let capture = CapturePlugin(
        name: "null",
        summary: "Generated test signal (silence, sine, noise or frame counter); no sound card needed.",
        settings: NullCaptureSettings.self,
        make: { settings, _ in
            NullCaptureBackend(signal: settings.signal, clock: settings.paced ? MonotonicPacingClock() : nil, faults: settings.faults,
                               gate: settings.gate)
        })

    /// `playback.backend: null`. - Thread: `make` runs on any thread and never blocks.
    public static let playback = PlaybackPlugin(
        name: "null",
        summary: "Discards audio at the pace of a real device; no sound card needed.",
        settings: NullPlaybackSettings.self,
        make: { settings, _ in NullPlaybackBackend(clock: settings.paced ? MonotonicPacingClock() : nil) })
}
