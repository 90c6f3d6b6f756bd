/// How recordings are made: format, device period, hand-off buffer, checkpoint interval, and what
/// the view watches. One type for the recorder and its engine; the defaults are the declared ones.
///
/// The `static let` settings are the host's own (`capture.period-frames`,
/// `capture.buffer-seconds`, `storage.checkpoint-seconds`, `storage.warn-free-minutes`). A plain
/// value; safe on any thread.
public struct RecordingSettings: Sendable, Hashable {
    public static let periodFrames = Setting<Int>("period-frames", range: 16...65_536, default: 8192,
        help: "Frames per device read: larger costs less CPU, smaller stops and meters more promptly.")
    public static let bufferSeconds = Setting<Double>("buffer-seconds", range: 0.1...60, default: 2,
        help: "Seconds of audio buffered between the device thread and the writer before an overrun.")
    public static let checkpointSeconds = Setting<Double>("checkpoint-seconds", range: 0.05...60, default: 1,
        help: "How often a recording's header is updated and its file synced.")
    public static let warnFreeMinutes = Setting<Double>("warn-free-minutes", range: 0...1440, default: 10,
        help: "Warn before and during a recording when the library's disk has room for fewer minutes than this at the recording's format (uncompressed); 0: never.")

    public static let resume = Setting<Bool>("resume", default: false,
        help: "When the device is lost mid-run (unplugged, the server gone), end the take, wait for the device and go on in a new take (record --resume).")

    public static let measureLoudness = Setting<Bool>("measure-loudness", default: true,
        help: "Measure each take's EBU R128 loudness while recording, on the writer thread (about 7 ms of CPU per second of 48 kHz stereo). Off: `tapedeck loudness` measures takes later.")

    /// The settings of the `capture` section, in listing order.
    public static let captureDeclarations = [periodFrames.declaration, bufferSeconds.declaration, resume.declaration,
                                             measureLoudness.declaration]
    /// The settings of the `storage` section that recordings use, in listing order.
    public static let storageDeclarations = [checkpointSeconds.declaration, warnFreeMinutes.declaration]

    public var format: AudioFormat
    /// Frames per device read.
    public var periodFrames: Int
    /// Seconds of audio the hand-off buffer between device and writer holds.
    public var bufferSeconds: Double
    /// How often the header is updated and the file synced.
    public var checkpointInterval: Duration
    /// How often the observable progress (frames, peaks, overruns) is refreshed while recording:
    /// often for a meter on screen. `nil` when nobody watches: the properties are then set only
    /// once, when the recording ends, and the main actor is not woken while it runs.
    public var progressInterval: Duration?
    /// Whether peak levels are measured (off when no meter is shown: the writer then does not
    /// read the audio again).
    public var measuresLevels: Bool
    /// Warn (before recording, and once while recording) when the library's disk has room for
    /// fewer minutes than this at the recording's format, counted uncompressed. 0: never.
    public var warnFreeMinutes: Double
    /// Wait for a lost device and go on in a new take (`capture.resume`).
    public var resume = false
    /// The parts of ``format`` the user chose (`format.*` in a config file, `-r`, `-c`, `-f`):
    /// a source with a format of its own (a network stream) keeps its own for the rest.
    public var formatChoice: FormatChoice = .all
    /// Measure each take's loudness while recording (`capture.measure-loudness`).
    public var measuresLoudness = true

    public init(format: AudioFormat, periodFrames: Int = Self.periodFrames.defaultValue,
                bufferSeconds: Double = Self.bufferSeconds.defaultValue,
                checkpointInterval: Duration = .seconds(Self.checkpointSeconds.defaultValue),
                progressInterval: Duration? = .milliseconds(100), measuresLevels: Bool = true,
                warnFreeMinutes: Double = Self.warnFreeMinutes.defaultValue) {
        self.format = format
        self.periodFrames = periodFrames
        self.bufferSeconds = bufferSeconds
        self.checkpointInterval = checkpointInterval
        self.progressInterval = progressInterval
        self.measuresLevels = measuresLevels
        self.warnFreeMinutes = warnFreeMinutes
    }

    /// ``format`` with every part the user did not choose (``formatChoice``) taken from `source`:
    /// what a device that records `source` was asked for. A difference from it is a surprise
    /// worth a warning; a source's own rate or channels, when none was chosen, are not.
    /// - Thread: any; never blocks.
    public func chosenFormat(filledFrom source: AudioFormat) -> AudioFormat {
        var expected = format
        if !formatChoice.contains(.sampleRate) { expected.sampleRate = source.sampleRate }
        if !formatChoice.contains(.channels) { (expected.channels, expected.layout) = (source.channels, source.layout) }
        if !formatChoice.contains(.sampleFormat) { expected.sampleFormat = source.sampleFormat }
        return expected
    }

    /// The settings a configuration gives: `capture` and `storage` are those host sections,
    /// validated against ``captureDeclarations`` and ``storageDeclarations``.
    public init(format: AudioFormat, capture: PluginSettings, storage: PluginSettings) {
        self.init(format: format, periodFrames: capture[Self.periodFrames], bufferSeconds: capture[Self.bufferSeconds],
                  checkpointInterval: .milliseconds(Int64((storage[Self.checkpointSeconds] * 1000).rounded())),
                  warnFreeMinutes: storage[Self.warnFreeMinutes])
        resume = capture[Self.resume]
        measuresLoudness = capture[Self.measureLoudness]
    }
}

/// The recording format's settings (`format.*`), read into an ``AudioFormat``.
/// A plain value; safe on any thread.
public struct FormatSettings: SettingsGroup, Hashable {
    public static let sampleRate = Setting<Int>("sample-rate", range: AudioFormat.sampleRateRange, default: 48_000,
                                                help: "Frames per second.")
    public static let channels = Setting<Int>("channels", range: AudioFormat.channelRange, default: 2, help: "Channels to record.")
    public static let sampleFormat = Setting<SampleFormat>("sample-format", default: .s16,
        help: "Sample format: s16, s24, s32 (integer) or f32 (float).")
    public static let declarations = [sampleRate.declaration, channels.declaration, sampleFormat.declaration]

    public var format: AudioFormat

    public init(_ settings: PluginSettings) {
        format = AudioFormat(sampleRate: settings[Self.sampleRate], channels: settings[Self.channels],
                             sampleFormat: settings[Self.sampleFormat])
    }
}
