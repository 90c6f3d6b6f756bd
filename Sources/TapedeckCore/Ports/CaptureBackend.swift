public import Foundation
import Synchronization

/// What a capture stream reports after one blocking read.
public struct CaptureRead: Sendable, Hashable {
    /// Frames written into the buffer.
    public var frames: Int
    /// Frames the device says it lost just before these (an xrun), to be filled with silence.
    public var lostFramesBefore: Int64

    public init(frames: Int, lostFramesBefore: Int64 = 0) {
        self.frames = frames
        self.lostFramesBefore = lostFramesBefore
    }
}

/// Which parts of the recording format the user chose (a flag, the config file), as opposed to
/// defaults. A source that carries a format of its own (a network stream) keeps its own for every
/// part not chosen and converts to the parts that were. A plain value; any thread.
public struct FormatChoice: OptionSet, Sendable, Hashable {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }
    public static let sampleRate = FormatChoice(rawValue: 1)
    public static let channels = FormatChoice(rawValue: 2)
    public static let sampleFormat = FormatChoice(rawValue: 4)
    /// Every part: the format asked for is the format recorded (what a sound card does).
    public static let all: FormatChoice = [.sampleRate, .channels, .sampleFormat]
}

/// Options for opening a capture stream.
public struct CaptureOptions: Sendable, Hashable {
    /// Frames per period: the unit of one blocking read.
    public var periodFrames: Int
    /// The parts of the requested format the user chose. A device with a fixed format (a sound
    /// card) ignores it; a source that carries its own format keeps its own where a part is not
    /// chosen. ``FormatChoice/all`` unless said.
    public var chosen: FormatChoice

    public init(periodFrames: Int) {
        self.periodFrames = periodFrames
        chosen = .all
    }

    public init(periodFrames: Int, chosen: FormatChoice) {
        self.periodFrames = periodFrames
        self.chosen = chosen
    }
}

/// A capture backend: a plugin that lists devices and opens capture streams.
///
/// Backends are values made by a ``CapturePlugin`` from settings; they hold configuration,
/// not device handles, and so are `Sendable`.
public protocol CaptureBackend: Sendable {
    /// The plugin name this backend was made from, e.g. `null`.
    var name: String { get }

    /// Lists the devices this backend can capture from.
    /// - Thread: any. May block briefly while the audio system is queried.
    func devices() throws -> [AudioDevice]

    /// Opens a capture stream in the requested format.
    ///
    /// - Thread: must be called on the thread that will read the stream (device handles are not
    ///   thread-safe). May block while the device opens.
    /// - Throws: ``TapedeckError`` `.deviceUnavailable` naming the device and what to do, or
    ///   `.unsupportedFormat` naming what the device can do instead.
    func openCaptureStream(format: AudioFormat, options: CaptureOptions) throws -> any CaptureStream
}

/// An open capture stream. Owned by one device thread; not `Sendable`.
public protocol CaptureStream: AnyObject {
    /// The format actually negotiated with the device (equal to the requested one, or the open failed).
    var format: AudioFormat { get }
    /// Frames per period as negotiated.
    var periodFrames: Int { get }
    /// Whether the stream is driven by a real clock. A real-time stream cannot wait: when the
    /// hand-off buffer is full its frames are dropped and counted as an overrun. A stream that is
    /// not real time (an unpaced generator) is made to wait instead.
    var isRealTime: Bool { get }
    /// The device the stream actually records from, as its backend names it (a PulseAudio
    /// source such as `alsa_input.usb-…` or `null.monitor` where the config said "the default",
    /// the JACK ports, an ALSA card): for the banner and the take's files. `nil` when the backend
    /// cannot tell more than the configured name (the default). Read once after opening.
    var deviceName: String? { get }
    /// Markers the source sets itself (a stream's title changes); `nil` when it sets none.
    /// Read once after opening.
    var cues: CaptureCues? { get }

    /// Blocks until up to `maxFrames` frames are captured into `buffer`.
    ///
    /// - Thread: the device thread only. Blocks for about one period. Must not allocate.
    /// - Throws: ``TapedeckError`` `.deviceLost` when the device or server went away.
    func read(into buffer: UnsafeMutableRawPointer, maxFrames: Int) throws -> CaptureRead

    /// Called after the last ``read(into:maxFrames:)`` when recording is stopped by the user, again
    /// and again until it returns 0 frames: returns frames the device captured up to the stop but
    /// has not yet delivered. Returns 0 frames when nothing more is pending.
    ///
    /// - Thread: the device thread only. Must not allocate. Should not block for longer than one
    ///   period; a stream whose source delivers late (a PulseAudio monitor can run behind) may
    ///   wait for that audio, and documents how long it waits at most.
    func drain(into buffer: UnsafeMutableRawPointer, maxFrames: Int) throws -> CaptureRead

    /// Closes the device. Called once, on the device thread.
    func close()
}

extension CaptureStream {
    /// No more than the configured name is known.
    public var deviceName: String? { nil }
}

/// Markers a source sets itself (a network stream's title changes), each at a frame of the
/// stream: frames delivered since its first read, holes included. The stream posts; the device
/// thread takes them after a read and turns them into markers of the run, as `tapedeck mark`
/// does. A source's clock (``Clock``) is taken before the frames are handed to the writer, so
/// the take's time of day is the source's. Any thread; never blocks for long; ``hasPending`` is one atomic load (the device
/// thread's check), and only posting and taking allocate.
public final class CaptureCues: Sendable {
    /// One cue: where in the stream, and its label.
    public struct Cue: Sendable, Hashable {
        public var frame: Int64
        public var label: String
        public init(frame: Int64, label: String) {
            self.frame = frame
            self.label = label
        }
    }

    /// The time of day of one frame of the stream by the source's own clock (an RTP stream's
    /// timestamps against the PTP or NTP clock its session names): where the take's time comes from.
    public struct Clock: Sendable, Hashable {
        public var frame: Int64
        public var date: Date
        public init(frame: Int64, date: Date) {
            self.frame = frame
            self.date = date
        }
    }

    private let cues = Mutex<[Cue]>([])
    private let clock = Mutex<Clock?>(nil)
    private let pending = Atomic<Int>(0)

    public init() {}

    public var hasPending: Bool { pending.load(ordering: .acquiring) > 0 }

    public func post(_ cue: Cue) {
        cues.withLock { $0.append(cue) }
        pending.add(1, ordering: .releasing)
    }

    /// Says the time of day of a frame; the latest one posted counts.
    public func post(_ clock: Clock) {
        let replaced = self.clock.withLock { c -> Bool in
            defer { c = clock }
            return c != nil
        }
        if !replaced { pending.add(1, ordering: .releasing) }
    }

    /// The clock posted since the last call, if any.
    public func takeClock() -> Clock? {
        let taken = clock.withLock { c -> Clock? in
            defer { c = nil }
            return c
        }
        if taken != nil { pending.subtract(1, ordering: .releasing) }
        return taken
    }

    /// Every cue posted since the last call, in order.
    public func take() -> [Cue] {
        let taken = cues.withLock { c -> [Cue] in
            defer { c = [] }
            return c
        }
        pending.subtract(taken.count, ordering: .releasing)
        return taken
    }
}

extension CaptureStream {
    /// Markers the source sets itself; `nil` for a source that sets none (a sound card).
    public var cues: CaptureCues? { nil }
}
