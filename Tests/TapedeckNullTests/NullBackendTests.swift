import Foundation
import Logging
import Synchronization
import TapedeckCore
@testable import TapedeckNull
import TapedeckTesting
import Testing

/// A virtual clock: sleeping advances time at once, so paced behaviour is tested without waiting.
final class VirtualClock: PacingClock {
    let now = Atomic<UInt64>(1_000_000_000)
    func nowNanoseconds() -> UInt64 { now.load(ordering: .relaxed) }
    func sleep(untilNanoseconds deadline: UInt64) {
        if deadline > nowNanoseconds() { now.store(deadline, ordering: .relaxed) }
    }
    func advance(by nanos: UInt64) { now.add(nanos, ordering: .relaxed) }
}

@Suite("Null backend")
struct NullBackendTests {
    let logger = Logger(label: "test")

    @Test("capture conformance, paced in real time and unpaced", arguments: [true, false])
    func captureConformance(paced: Bool) async throws {
        let backend = NullCaptureBackend(signal: .frameCounter, clock: paced ? MonotonicPacingClock() : nil)
        try await BackendConformance.capture(backend, format: AudioFormat(sampleRate: 48_000, channels: 2, sampleFormat: .s16), frames: 4_801)
    }

    @Test("playback conformance")
    func playbackConformance() async throws {
        try await BackendConformance.playback(NullPlaybackBackend(clock: nil), format: .cdStereo, frames: 20_000)
        try await BackendConformance.playback(NullPlaybackBackend(), format: .cdStereo, frames: 4_410)
    }

    @Test("60 s of unpaced frame-counter capture arrives complete and in order")
    func sixtySecondsComplete() async throws {
        let format = AudioFormat(sampleRate: 48_000, channels: 2, sampleFormat: .s32)
        let frames: Int64 = 60 * 48_000
        let sink = MemoryTakeSink()
        let engine = RecordingEngine(backend: NullCaptureBackend(signal: .frameCounter, clock: nil),
                                     settings: RecordingSettings(format: format, periodFrames: 1024), frameLimit: frames, logger: logger)
        _ = try await engine.open()
        let result = try await engine.record { MemoryTakeWriter(sink: sink, format: $0) }
        #expect(result.frames == frames)
        #expect(result.overruns.isEmpty)
        let bytes = sink.bytes
        #expect(bytes.count == Int(frames) * format.bytesPerFrame)
        // s32 counters are unique for 2^31 samples: any loss, duplicate or reordering shows.
        let mismatch = bytes.withUnsafeBytes { raw -> Int? in
            for k in 0..<(Int(frames) * 2) where Int32(littleEndian: raw.loadUnaligned(fromByteOffset: k * 4, as: Int32.self)) != Int32(k) {
                return k
            }
            return nil
        }
        #expect(mismatch == nil)
    }

    @Test("the signals are deterministic functions of position")
    func signals() {
        let f16 = AudioFormat(sampleRate: 48_000, channels: 2, sampleFormat: .s16)
        #expect(NullSignal.frameCounter.sample(frame: 40_000, channel: 1, format: f16) == Double(Int16(truncatingIfNeeded: 80_001)))
        let sine = NullSignal.sine(frequency: 12_000, level: 0.5)
        #expect(sine.sample(frame: 1, channel: 0, format: f16) == 16384) // a quarter period: the peak
        let noise = NullSignal.noise(seed: 7, level: 1)
        #expect(noise.sample(frame: 5, channel: 1, format: f16) == noise.sample(frame: 5, channel: 1, format: f16))
        #expect(noise.sample(frame: 5, channel: 1, format: f16) != NullSignal.noise(seed: 8, level: 1).sample(frame: 5, channel: 1, format: f16))
        var a = [UInt8](repeating: 0, count: 400), b = [UInt8](repeating: 0, count: 400)
        a.withUnsafeMutableBytes { NullSignal.frameCounter.render(into: $0.baseAddress!, startFrame: 9, frames: 100, format: f16) }
        b.withUnsafeMutableBytes { TestSignal.counter($0.baseAddress!, 9, 100, f16) }
        #expect(a == b, "the null counter and the test kit's counter agree")
    }

    @Test("pacing follows the clock, and stopping drains the partial period due so far")
    func pacingAndDrain() throws {
        let clock = VirtualClock()
        let format = AudioFormat(sampleRate: 48_000, channels: 1, sampleFormat: .s16)
        let stream = try NullCaptureBackend(signal: .frameCounter, clock: clock).openCaptureStream(format: format, options: CaptureOptions(periodFrames: 480))
        var buffer = [UInt8](repeating: 0, count: 480 * 2)
        let start = clock.nowNanoseconds()
        for _ in 0..<10 { _ = try buffer.withUnsafeMutableBytes { try stream.read(into: $0.baseAddress!, maxFrames: 480) } }
        #expect(clock.nowNanoseconds() - start == 100_000_000, "ten 10 ms periods take 100 ms")
        clock.advance(by: 5_000_000) // 5 ms pass after the last period: 240 frames are due
        let drained = try buffer.withUnsafeMutableBytes { try stream.drain(into: $0.baseAddress!, maxFrames: 480) }
        #expect(drained.frames == 240)
        #expect(TestSignal.firstCounterMismatch(in: Array(buffer[0..<480]), format: format, startFrame: 4800) == nil)
    }

    @Test("injected faults: an xrun leaves a counted gap; device loss ends the take with what was captured")
    func faults() async throws {
        let format = AudioFormat(sampleRate: 48_000, channels: 2, sampleFormat: .s16)
        let backend = NullCaptureBackend(signal: .frameCounter, clock: nil,
                                         faults: NullFaults(overrunAtFrame: 10_000, overrunFrames: 500, deviceLossAtFrame: 30_000))
        let sink = MemoryTakeSink()
        let engine = RecordingEngine(backend: backend, settings: RecordingSettings(format: format, periodFrames: 1024), logger: logger)
        _ = try await engine.open()
        let result = try await engine.record { MemoryTakeWriter(sink: sink, format: $0) }
        guard case .deviceLost = result.end else {
            Issue.record("expected device loss, got \(result.end)")
            return
        }
        #expect(result.frames == 30_000)
        #expect(result.overruns.count == 1)
        #expect(result.overruns.first?.frames == 500)
        // The gap is silence and the audio after it continues at its true position.
        let bpf = format.bytesPerFrame
        let gapStart = Int(result.overruns[0].frame)
        #expect(sink.bytes[(gapStart * bpf)..<((gapStart + 500) * bpf)].allSatisfy { $0 == 0 })
        #expect(TestSignal.firstCounterMismatch(in: Array(sink.bytes[((gapStart + 500) * bpf)...]), format: format, startFrame: Int64(gapStart + 500)) == nil)
    }

    @Test("the plugin descriptor validates and builds from settings")
    func plugin() throws {
        let settings = try PluginSettings.resolving(NullPlugin.capture.settings, overrides: ["signal": "counter", "paced": "false"])
        let backend = try NullPlugin.capture.make(settings, PluginContext(logger: logger, defaultLibraryURL: URL(fileURLWithPath: "/tmp")))
        let stream = try backend.openCaptureStream(format: .cdStereo, options: CaptureOptions(periodFrames: 64))
        #expect(stream.isRealTime == false)
        #expect(throws: TapedeckError.self) { try PluginSettings.resolving(NullPlugin.capture.settings, overrides: ["signal": "pink"]) }
    }
}
