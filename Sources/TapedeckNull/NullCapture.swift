public import TapedeckCore
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Faults the null capture can inject, for tests of the overrun and device-loss paths.
public struct NullFaults: Sendable, Hashable {
    /// At this frame the "device" reports an xrun that lost ``overrunFrames`` frames.
    public var overrunAtFrame: Int64?
    /// Frames lost by the injected xrun.
    public var overrunFrames: Int64
    /// At this frame the "device" disappears (reads throw `.deviceLost`).
    public var deviceLossAtFrame: Int64?
    /// Seconds after the loss when the device can be opened again, as a replugged one would
    /// (it then starts its signal from frame 0 and is not lost again); `nil`: it never comes back.
    public var deviceBackAfter: Double?
    /// At this frame the "device" hangs: a read never returns, as with a driver that stopped
    /// answering (what a service watchdog is for); `nil`: never.
    public var freezeAtFrame: Int64? = nil

    public init(overrunAtFrame: Int64? = nil, overrunFrames: Int64 = Int64(NullCaptureSettings.overrunFrames.defaultValue),
                deviceLossAtFrame: Int64? = nil, deviceBackAfter: Double? = nil) {
        self.overrunAtFrame = overrunAtFrame
        self.overrunFrames = overrunFrames
        self.deviceLossAtFrame = deviceLossAtFrame
        self.deviceBackAfter = deviceBackAfter
    }
}

/// Whether the null device was unplugged, and when: shared by a backend and its streams.
/// - Thread: any; never blocks (a lock held for a read or write).
final class NullDeviceState: Sendable {
    private let lostAt = Mutex<ContinuousClock.Instant?>(nil)

    var wasLost: Bool { lostAt.withLock { $0 != nil } }

    func lose() { lostAt.withLock { if $0 == nil { $0 = .now } } }

    /// Whether the device can be opened: never lost, or back after `seconds`.
    func isPresent(backAfter seconds: Double?) -> Bool {
        lostAt.withLock { lost in
            guard let lost else { return true }
            guard let seconds else { return false }
            return ContinuousClock.now - lost >= .milliseconds(Int64(seconds * 1000))
        }
    }
}

/// Capture with no audio system: a ``NullSignal``, paced by a ``PacingClock`` or unpaced.
public struct NullCaptureBackend: CaptureBackend {
    public let name = "null"
    public var signal: NullSignal
    /// `nil` means unpaced: frames are produced as fast as they are taken.
    public var clock: (any PacingClock)?
    public var faults: NullFaults
    let device = NullDeviceState()
    /// Seconds the signal is off, on, off… (repeating); empty: always on.
    public var gate: [Double]

    public init(signal: NullSignal, clock: (any PacingClock)? = MonotonicPacingClock(), faults: NullFaults = NullFaults(),
                gate: [Double] = []) {
        self.signal = signal
        self.clock = clock
        self.faults = faults
        self.gate = gate
    }

    /// The one null device. - Thread: any; never blocks.
    public func devices() throws -> [AudioDevice] {
        [AudioDevice(name: "null", description: "Generated \(signal.summary), no audio hardware", canCapture: true, canPlay: false, isDefault: true)]
    }

    /// A stream of the signal in `format`. - Thread: the device thread; never blocks.
    public func openCaptureStream(format: AudioFormat, options: CaptureOptions) throws -> any CaptureStream {
        try format.validate()
        let rate = Double(format.sampleRate)
        let signal = gate.isEmpty ? self.signal : .gated(self.signal, stretches: gate.map { Int64(($0 * rate).rounded()) })
        guard device.isPresent(backAfter: faults.deviceBackAfter) else {
            throw TapedeckError(.deviceUnavailable, "The null capture device is unplugged (an injected fault).")
        }
        // A device that came back is not lost again.
        var faults = self.faults
        if device.wasLost { faults.deviceLossAtFrame = nil }
        return NullCaptureStream(format: format, periodFrames: max(1, options.periodFrames), signal: signal, clock: clock, faults: faults,
                                 device: device)
    }
}

final class NullCaptureStream: CaptureStream {
    let format: AudioFormat
    let periodFrames: Int
    let signal: NullSignal
    let clock: (any PacingClock)?
    let faults: NullFaults
    /// Frames of the signal consumed so far (delivered or lost).
    private var position: Int64 = 0
    private var startNanos: UInt64?
    private var overrunInjected = false

    let device: NullDeviceState

    init(format: AudioFormat, periodFrames: Int, signal: NullSignal, clock: (any PacingClock)?, faults: NullFaults,
         device: NullDeviceState = NullDeviceState()) {
        self.device = device
        self.format = format
        self.periodFrames = periodFrames
        self.signal = signal
        self.clock = clock
        self.faults = faults
    }

    var isRealTime: Bool { clock?.isRealTime ?? false }

    private func nanos(forFrames frames: Int64) -> UInt64 {
        UInt64(frames) * 1_000_000_000 / UInt64(format.sampleRate)
    }

    func read(into buffer: UnsafeMutableRawPointer, maxFrames: Int) throws -> CaptureRead {
        if let loss = faults.deviceLossAtFrame, position >= loss {
            device.lose()
            throw TapedeckError(.deviceLost, "The null capture device was removed at frame \(loss) (an injected fault).")
        }
        if let freeze = faults.freezeAtFrame, position >= freeze {
            // A hung driver: the read never returns, whatever else happens.
            while true { sleep(3600) }
        }
        var n = Int64(min(maxFrames, periodFrames))
        if let loss = faults.deviceLossAtFrame { n = min(n, max(loss - position, 0)) }
        if let freeze = faults.freezeAtFrame { n = min(n, max(freeze - position, 0)) }
        var lost: Int64 = 0
        if let at = faults.overrunAtFrame, !overrunInjected, position + n > at {
            overrunInjected = true
            lost = faults.overrunFrames
        }
        if let clock {
            let start = startNanos ?? clock.nowNanoseconds()
            startNanos = start
            clock.sleep(untilNanoseconds: start + nanos(forFrames: position + lost + n))
        }
        position += lost
        signal.render(into: buffer, startFrame: position, frames: Int(n), format: format)
        position += n
        return CaptureRead(frames: Int(n), lostFramesBefore: lost)
    }

    func drain(into buffer: UnsafeMutableRawPointer, maxFrames: Int) throws -> CaptureRead {
        guard let clock, let start = startNanos else { return CaptureRead(frames: 0) }
        let elapsed = clock.nowNanoseconds() &- start
        let due = Int64(elapsed / 1_000) * Int64(format.sampleRate) / 1_000_000
        var n = max(0, min(due - position, Int64(maxFrames)))
        if let loss = faults.deviceLossAtFrame { n = min(n, max(loss - position, 0)) }
        signal.render(into: buffer, startFrame: position, frames: Int(n), format: format)
        position += n
        return CaptureRead(frames: Int(n))
    }

    func close() {}
}
