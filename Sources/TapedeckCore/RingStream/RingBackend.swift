public import Logging

/// Which section a device backend's settings were read from.
public enum DeviceRole: String, Sendable, Hashable {
    case capture, playback
    /// `record` or `play`, as a message says what was going on.
    public var doing: String { self == .capture ? "recording" : "playing" }
}

/// The part of a callback backend that is its API's own, for both roles: its settings (declared
/// once), its device list, and opening a device whose real-time callback moves audio through a
/// ``DeviceRing``. ``RingCaptureStream`` and ``RingPlaybackStream`` do the rest: reading and
/// writing the ring, waiting, holes, underruns, stalls, draining, sample conversion.
///
/// A value holding settings only. - Thread: any, except ``open(format:ring:)`` (below).
public protocol RingBackend: Sendable {
    associatedtype Device: RingDevice
    /// The settings of `capture.NAME.*` or `playback.NAME.*`, declared once; the help may say
    /// something different for each role.
    static func declarations(_ role: DeviceRole) -> [SettingDeclaration]
    /// The backend for one section, from its validated settings. Never blocks.
    init(_ settings: PluginSettings, role: DeviceRole, context: PluginContext)
    /// The config name, e.g. `jack`.
    var name: String { get }
    var role: DeviceRole { get }
    var logger: Logger { get }
    /// The devices of this role. May block for round trips to the audio server.
    func devices() throws -> [AudioDevice]
    /// Opens the device in `format` (F32 samples at its rate and channels) with its callback
    /// copying through `ring` (capture: pushing; playback: pulling), connected and running.
    /// - Thread: the device thread that will use it. Blocks for the opening.
    /// - Throws: `.deviceUnavailable` or `.unsupportedFormat`, naming what to do.
    func open(format: AudioFormat, ring: DeviceRing) throws -> Device
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
}

extension RingDevice {
    public var eventFD: Int32 { -1 }
    public func dispatchEvents() {}
}

/// A callback backend in the capture role: `capture.backend: NAME`.
public struct RingCaptureBackend<Backend: RingBackend>: CaptureBackend {
    public let backend: Backend
    public var name: String { backend.name }
    /// - Thread: any. Never blocks.
    public init(_ backend: Backend) { self.backend = backend }
    /// - Thread: any that may block. See ``RingBackend/devices()``.
    public func devices() throws -> [AudioDevice] { try backend.devices() }
    /// Opens the device and its ring; reads return `options.periodFrames` frames.
    /// - Thread: the device thread that will read the stream. Blocks for the opening.
    public func openCaptureStream(format: AudioFormat, options: CaptureOptions) throws -> any CaptureStream {
        try RingCaptureStream(backend: backend, format: format, periodFrames: options.periodFrames)
    }
}

/// A callback backend in the playback role: `playback.backend: NAME`.
public struct RingPlaybackBackend<Backend: RingBackend>: PlaybackBackend {
    public let backend: Backend
    public var name: String { backend.name }
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
            RingCaptureBackend(Backend(settings, role: .capture, context: context))
        }
    }
}

extension PluginDescriptor where Made == any PlaybackBackend {
    /// The playback descriptor of a callback backend. - Thread: any; `make` never blocks.
    public static func ring<Backend: RingBackend>(_ backend: Backend.Type, name: String, summary: String) -> Self {
        Self(name: name, summary: summary, declarations: Backend.declarations(.playback)) { settings, context in
            RingPlaybackBackend(Backend(settings, role: .playback, context: context))
        }
    }
}
