public import Logging

/// Which section a device backend's settings were read from.
public enum DeviceRole: String, Sendable, Hashable {
    case capture, playback
}

/// One device backend section as read (`capture.jack.*`, `playback.pipewire.*`): its role, the
/// `device` it names, its other values, and how a message names each key (`capture.jack.device`).
/// A plain value; safe on any thread.
public struct DeviceSection: Sendable {
    public let role: DeviceRole
    /// What `device` names (empty: the backend's default).
    public let device: String
    /// How a message names `device`.
    public let deviceKey: String
    public let logger: Logger
    private let values: PluginSettings
    private let context: PluginContext

    /// The setting every device backend has, with help for `role`.
    static func deviceSetting(_ help: String) -> Setting<String> { Setting("device", help: help) }

    init(_ values: PluginSettings, role: DeviceRole, context: PluginContext) {
        self.role = role
        self.values = values
        self.context = context
        logger = context.logger
        let setting = Self.deviceSetting("")
        device = values[setting]
        deviceKey = context.key(setting)
    }

    /// The value of one of the backend's own settings.
    public subscript<Value>(_ setting: Setting<Value>) -> Value { values[setting] }
    /// Sample-rate conversion the composition root gives (``PluginContext/resampler``), or nil.
    public var resampler: (any SampleRateConversion)? { context.resampler }
    /// How a message names one of the backend's own settings: `capture.jack.server`.
    public func key<Value>(_ setting: Setting<Value>) -> String { context.key(setting) }
}

/// The part of a callback backend that is its API's own, for both roles: its settings (declared
/// once), its device list, and opening a device whose real-time callback moves audio through a
/// ``DeviceRing``. ``RingCaptureStream`` and ``RingPlaybackStream`` do the rest: reading and
/// writing the ring, waiting, holes, underruns, stalls, draining, sample conversion.
///
/// A value holding settings only. - Thread: any, except ``open(format:ring:)`` (below).
public protocol RingBackend: Sendable {
    associatedtype Device: RingDevice
    /// The config name, e.g. `jack`.
    static var name: String { get }
    /// One line each for `tapedeck backends`: what capture and playback through it do.
    static var summaries: (capture: String, playback: String) { get }
    /// The backend's settings besides `device`, the same in both roles, in listing order.
    static var settings: [SettingDeclaration] { get }
    /// What `device` takes in each role (the help of `capture.NAME.device` and `playback.NAME.device`).
    static var deviceHelp: (capture: String, playback: String) { get }
    /// The backend for one section. Never blocks.
    init(_ section: DeviceSection)
    var section: DeviceSection { get }
    /// The devices of this role. May block for round trips to the audio server.
    func devices() throws -> [AudioDevice]
    /// Opens the device in `format` (F32 samples at its rate and channels) with its callback
    /// copying through `ring` (capture: pushing; playback: pulling), connected and running.
    /// - Thread: the device thread that will use it. Blocks for the opening.
    /// - Throws: `.deviceUnavailable` or `.unsupportedFormat`, naming what to do.
    func open(format: AudioFormat, ring: DeviceRing) throws -> Device
    /// Opens a device that may decide the format itself (a network stream carries its own):
    /// `makeRing` makes the ring for the format it records in, which it returns with the device.
    /// Parts of `requested` in `chosen` are kept (the device converts to them); the rest may be
    /// the source's own. The default opens in `requested` through ``open(format:ring:)``.
    /// - Thread: the device thread that will use it. Blocks for the opening.
    func open(requested: AudioFormat, chosen: FormatChoice,
              makeRing: (AudioFormat) throws -> DeviceRing) throws -> (device: Device, format: AudioFormat)
}

extension RingBackend {
    public func open(requested: AudioFormat, chosen: FormatChoice,
                     makeRing: (AudioFormat) throws -> DeviceRing) throws -> (device: Device, format: AudioFormat) {
        let ring = try makeRing(requested)
        return (try open(format: requested, ring: ring), requested)
    }
}

extension RingBackend {
    /// `capture.backend: NAME`. - Thread: any; `make` never blocks.
    public static var capture: CapturePlugin { .ring(Self.self, name: name, summary: summaries.capture) }
    /// `playback.backend: NAME`. - Thread: any; `make` never blocks.
    public static var playback: PlaybackPlugin { .ring(Self.self, name: name, summary: summaries.playback) }

    /// Every setting of a section in `role`: the backend's own, then `device`.
    public static func declarations(_ role: DeviceRole) -> [SettingDeclaration] {
        settings + [DeviceSection.deviceSetting(role == .capture ? deviceHelp.capture : deviceHelp.playback).declaration]
    }
}

/// An open callback device (a JACK client, a PipeWire stream): owned by the device thread that
/// opened it, which alone calls its members. None blocks unless it says so.
public protocol RingDevice: AnyObject {
    /// A descriptor the device thread also waits on (the device's own event loop, run by
    /// ``dispatchEvents()`` when readable), or -1.
    var eventFD: Int32 { get }
    /// Runs the device's own events that are pending, without waiting.
    func dispatchEvents()
    /// Nanoseconds of one callback cycle.
    var cycleNanos: UInt64 { get }
    /// What the log says when the stream opens: where it is connected, in what format.
    var summary: String { get }
    /// What the device records from or plays to, as ``CaptureStream/deviceName`` says it, or
    /// `nil` when no more is known than the configured name.
    var deviceName: String? { get }
    /// The error for a device that went away (the ring was closed) while `doing`.
    func lostError(_ doing: String) -> TapedeckError
    /// The error for a device that ran no cycle for ``RingStreams/stallNanos`` while `doing`.
    func stallError(_ doing: String) -> TapedeckError
    /// Playback, after the ring ran empty following ``DeviceRing/finish()``: blocks until the
    /// device has played the last frames (a cycle or two, or the server's own drain).
    func finishPlaying() throws
    /// A warning for the log at close (xruns, lost frames), or nil.
    func closingReport(lostFrames: UInt64) -> String?
    /// Stops the callback and closes the device. The ring may be freed after this returns.
    func close()
    /// Whether the device is driven by a real clock (a sound server's graph: ``CaptureStream/isRealTime``).
    /// A source that can wait (a network stream, whose sender waits on the connection) says false:
    /// the recorder then waits for room instead of dropping frames.
    var isRealTime: Bool { get }
    /// How long the device may run no cycle before the stream counts as lost.
    var stallNanos: UInt64 { get }
    /// Markers the device sets itself (``CaptureStream/cues``), at frames it pushed since the
    /// ring started, holes included; `nil` when it sets none.
    var cues: CaptureCues? { get }
}

extension RingDevice {
    public var isRealTime: Bool { true }
    public var stallNanos: UInt64 { RingStreams.stallNanos }
    public var cues: CaptureCues? { nil }
    public var eventFD: Int32 { -1 }
    public var deviceName: String? { nil }
    public func dispatchEvents() {}
}

/// A callback backend in the capture role: `capture.backend: NAME`.
public struct RingCaptureBackend<Backend: RingBackend>: CaptureBackend {
    public let backend: Backend
    public var name: String { Backend.name }
    /// - Thread: any. Never blocks.
    public init(_ backend: Backend) { self.backend = backend }
    /// - Thread: any that may block. See ``RingBackend/devices()``.
    public func devices() throws -> [AudioDevice] { try backend.devices() }
    /// Opens the device and its ring; reads return `options.periodFrames` frames.
    /// - Thread: the device thread that will read the stream. Blocks for the opening.
    public func openCaptureStream(format: AudioFormat, options: CaptureOptions) throws -> any CaptureStream {
        try RingCaptureStream(backend: backend, format: format, periodFrames: options.periodFrames, chosen: options.chosen)
    }
}

/// A callback backend in the playback role: `playback.backend: NAME`.
public struct RingPlaybackBackend<Backend: RingBackend>: PlaybackBackend {
    public let backend: Backend
    public var name: String { Backend.name }
    /// - Thread: any. Never blocks.
    public init(_ backend: Backend) { self.backend = backend }
    /// - Thread: any that may block. See ``RingBackend/devices()``.
    public func devices() throws -> [AudioDevice] { try backend.devices() }
    /// Opens the device and its ring. - Thread: the device thread that will write. Blocks for the opening.
    public func openPlaybackStream(format: AudioFormat, options: PlaybackOptions) throws -> any PlaybackStream {
        try RingPlaybackStream(backend: backend, format: format, periodFrames: options.periodFrames)
    }
}

extension PluginDescriptor where Made == any CaptureBackend {
    /// The capture descriptor of a callback backend: its settings declared by `Backend` for the
    /// capture role. - Thread: any; `make` never blocks.
    public static func ring<Backend: RingBackend>(_ backend: Backend.Type, name: String, summary: String) -> Self {
        Self(name: name, summary: summary, declarations: Backend.declarations(.capture)) { settings, context in
            RingCaptureBackend(Backend(DeviceSection(settings, role: .capture, context: context)))
        }
    }
}

extension PluginDescriptor where Made == any PlaybackBackend {
    /// The playback descriptor of a callback backend. - Thread: any; `make` never blocks.
    public static func ring<Backend: RingBackend>(_ backend: Backend.Type, name: String, summary: String) -> Self {
        Self(name: name, summary: summary, declarations: Backend.declarations(.playback)) { settings, context in
            RingPlaybackBackend(Backend(DeviceSection(settings, role: .playback, context: context)))
        }
    }
}
