import Foundation
public import Logging
import Synchronization

/// The outcome of playing a take.
public struct PlaybackResult: Sendable, Hashable {
    /// Frames of the take that reached the device.
    public var frames: Int64
    /// Frames of silence played because data came late.
    public var underrunFrames: Int64
    /// Whether ``PlaybackEngine/stop()`` ended playback early.
    public var stopped: Bool
}

/// Plays one take: a feeder thread decodes into a bounded `SlotRing`; a device thread owns
/// the playback stream and pulls from the ring, playing silence (counted) when it runs dry.
public final class PlaybackEngine: Sendable {
    private let backend: any PlaybackBackend
    /// `playback.period-frames`, the host's one playback setting.
    public static let periodFrames = Setting<Int>("period-frames", range: 16...65_536, default: 2400,
        help: "Frames per device write; a device that buffers four of them holds 200 ms at 48 kHz, which does not run dry under load.")

    private let periodFrames: Int
    private let bufferSeconds: Double
    private let logger: Logger
    private let stopFlag = Atomic<Bool>(false)
    private let feederDone = Atomic<Bool>(false)
    private let framesPlayed = Atomic<Int64>(0)
    private let openedDevice = Mutex<String?>(nil)
    private let spaceSignal = DispatchSemaphore(value: 0)
    private let dataSignal = DispatchSemaphore(value: 0)

    /// Creates an engine for one playback.
    public init(backend: any PlaybackBackend, periodFrames: Int = PlaybackEngine.periodFrames.defaultValue, bufferSeconds: Double = 1, logger: Logger) {
        self.backend = backend
        self.periodFrames = periodFrames
        self.bufferSeconds = bufferSeconds
        self.logger = logger
    }

    /// Frames played so far.
    /// - Thread: any. Never blocks.
    public var playedFrames: Int64 { framesPlayed.load(ordering: .relaxed) }

    /// The device playing, as its backend names it once open (``PlaybackStream/deviceName``).
    /// - Thread: any. Never blocks.
    public var deviceName: String? { openedDevice.withLock { $0 } }

    /// Stops playback at the next period.
    /// - Thread: any, including a signal-handling queue. Never blocks.
    public func stop() {
        stopFlag.store(true, ordering: .releasing)
        spaceSignal.signal()
        dataSignal.signal()
    }

    /// Opens the reader (on the feeder thread) and the device (on the device thread), plays to the
    /// end or until ``stop()``, and drains the device.
    /// - Thread: any; suspends until playback has drained.
    public func play(openReader: @escaping @Sendable () throws -> any TakeReader) async throws -> PlaybackResult {
        try await withCheckedThrowingContinuation { (cont: CheckedContinuation<PlaybackResult, any Error>) in
            let feeder = Thread { [self] in self.feederMain(openReader: openReader, done: cont) }
            feeder.name = "tapedeck-feeder"
            feeder.start()
        }
    }

    private final class Outcome: Sendable {
        let lock = Mutex<Result<PlaybackResult, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
    }

    private func feederMain(openReader: () throws -> any TakeReader, done: CheckedContinuation<PlaybackResult, any Error>) {
        let reader: any TakeReader
        do { reader = try openReader() } catch { done.resume(throwing: error); return }
        do {
            // Never size buffers from a header that has not been checked.
            try reader.format.validate()
        } catch {
            reader.close()
            done.resume(throwing: error)
            return
        }
        defer { reader.close() }
        let format = reader.format
        let slotFrames = max(periodFrames, 64)
        let slots = max(4, Int(bufferSeconds * Double(format.sampleRate) / Double(slotFrames)))
        let ring = SlotRing(slotCount: slots, slotFrames: slotFrames, bytesPerFrame: format.bytesPerFrame)
        let outcome = Outcome()
        let device = Thread { [self] in
            let r = Result { try self.deviceMain(format: format, ring: ring) }
            outcome.lock.withLock { $0 = r }
            self.stop()
            outcome.done.signal()
        }
        device.name = "tapedeck-playback"
        device.qualityOfService = .userInteractive

        var readError: (any Error)?
        var started = false
        while !stopFlag.load(ordering: .acquiring) {
            guard let slot = ring.producerSlot() else {
                if !started { started = true; device.start() }
                _ = spaceSignal.wait(timeout: .now() + .milliseconds(100))
                continue
            }
            let n: Int
            do { n = try reader.read(into: ring.pointer(slot), maxFrames: slotFrames) } catch { readError = error; break }
            if n == 0 { break }
            ring.publish(slot, frames: n, bufferGap: 0, deviceGap: 0)
            dataSignal.signal()
        }
        feederDone.store(true, ordering: .releasing)
        dataSignal.signal()
        if !started { device.start() }
        outcome.done.wait()
        let result = outcome.lock.withLock { $0 }!
        if let readError {
            done.resume(throwing: readError)
        } else {
            done.resume(with: result)
        }
    }

    private func deviceMain(format: AudioFormat, ring: SlotRing) throws -> PlaybackResult {
        let stream = try backend.openPlaybackStream(format: format, options: PlaybackOptions(periodFrames: periodFrames))
        defer { stream.close() }
        let name = stream.deviceName
        openedDevice.withLock { $0 = name }
        let silence = UnsafeMutableRawPointer.allocate(byteCount: ring.slotFrames * ring.bytesPerFrame, alignment: 16)
        silence.initializeMemory(as: UInt8.self, repeating: 0, count: ring.slotFrames * ring.bytesPerFrame)
        defer { silence.deallocate() }
        var underrun: Int64 = 0
        var stopped = false
        while true {
            if stopFlag.load(ordering: .acquiring) {
                stopped = true
                break
            }
            if let s = ring.consumerSlot() {
                underrun += try stream.write(ring.pointer(s.slot), frames: s.frames)
                framesPlayed.add(Int64(s.frames), ordering: .relaxed)
                ring.release()
                spaceSignal.signal()
                continue
            }
            if feederDone.load(ordering: .acquiring) {
                if ring.count == 0 { break }
                continue
            }
            // The ring is empty. Give the feeder up to half a period (a real device still holds
            // queued audio meanwhile); after that a real-time device is fed counted silence.
            let halfPeriod = Int(500_000_000.0 * Double(ring.slotFrames) / Double(format.sampleRate))
            if dataSignal.wait(timeout: .now() + .nanoseconds(halfPeriod)) == .success || !stream.isRealTime { continue }
            if ring.consumerSlot() != nil || feederDone.load(ordering: .acquiring) { continue }
            underrun += Int64(ring.slotFrames)
            underrun += try stream.write(silence, frames: ring.slotFrames)
        }
        if !stopped { try stream.drain() }
        return PlaybackResult(frames: framesPlayed.load(ordering: .relaxed), underrunFrames: underrun, stopped: stopped)
    }
}
