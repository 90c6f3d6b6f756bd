import Foundation
import Logging
import TapedeckCore
import TapedeckTesting
import Testing

@Suite("RecordingEngine")
struct RecordingEngineTests {
    let format = AudioFormat(sampleRate: 48_000, channels: 2, sampleFormat: .s16)
    let logger = Logger(label: "test")

    func record(_ backend: any CaptureBackend, limit: Int64?, sink: MemoryTakeSink = MemoryTakeSink(),
                bufferSeconds: Double = 2) async throws -> RecordingResult {
        let engine = RecordingEngine(backend: backend, settings: RecordingSettings(
            format: format, periodFrames: 256, bufferSeconds: bufferSeconds,
            checkpointInterval: .milliseconds(1)), frameLimit: limit, logger: logger)
        _ = try await engine.open()
        return try await engine.record { MemoryTakeWriter(sink: sink, format: $0) }
    }

    @Test("a frame limit is exact to the frame, across period boundaries")
    func exactLimit() async throws {
        for limit: Int64 in [1, 255, 256, 257, 48_001] {
            let sink = MemoryTakeSink()
            let result = try await record(ScriptedCaptureBackend(script: [.frames(1_000_000)]), limit: limit, sink: sink)
            #expect(result.frames == limit)
            #expect(result.end == .reachedDuration)
            #expect(sink.bytes.count == Int(limit) * format.bytesPerFrame)
            #expect(TestSignal.firstCounterMismatch(in: sink.bytes, format: format) == nil)
            #expect(sink.snapshot.finished)
        }
    }

    @Test("a device xrun becomes a timestamped gap of silence, so the timeline stays true")
    func xrunGap() async throws {
        let sink = MemoryTakeSink()
        let result = try await record(ScriptedCaptureBackend(script: [.frames(1000), .xrun(lost: 300), .frames(700)]), limit: 2000, sink: sink)
        #expect(result.frames == 2000)
        #expect(result.overruns.count == 1)
        let event = try #require(result.overruns.first)
        #expect(event.frame == 1000 && event.frames == 300 && event.cause == "device")
        let bpf = format.bytesPerFrame
        let bytes = sink.bytes
        #expect(TestSignal.firstCounterMismatch(in: Array(bytes[0..<(1000 * bpf)]), format: format) == nil)
        #expect(bytes[(1000 * bpf)..<(1300 * bpf)].allSatisfy { $0 == 0 })
        #expect(TestSignal.firstCounterMismatch(in: Array(bytes[(1300 * bpf)...]), format: format, startFrame: 1300) == nil)
    }

    @Test("device loss keeps everything captured before it")
    func deviceLoss() async throws {
        let sink = MemoryTakeSink()
        let result = try await record(ScriptedCaptureBackend(script: [.frames(5000), .fail]), limit: nil, sink: sink)
        guard case .deviceLost(let error) = result.end else {
            Issue.record("expected deviceLost, got \(result.end)")
            return
        }
        #expect(error.code == .deviceLost)
        #expect(result.frames == 5000)
        #expect(TestSignal.firstCounterMismatch(in: sink.bytes, format: format) == nil)
        #expect(sink.snapshot.finished)
    }

    @Test("a write failure stops the recording and keeps what was written")
    func writeFailure() async throws {
        let bpf = format.bytesPerFrame
        let sink = MemoryTakeSink(failAfterBytes: 3000 * bpf)
        let result = try await record(ScriptedCaptureBackend(script: [.frames(1_000_000)]), limit: nil, sink: sink)
        guard case .writeFailed(let error) = result.end else {
            Issue.record("expected writeFailed, got \(result.end)")
            return
        }
        #expect(error.code == .diskFull)
        #expect(sink.bytes.count <= 3000 * bpf)
        #expect(TestSignal.firstCounterMismatch(in: sink.bytes, format: format) == nil)
    }

    @Test("a stream that is not real time is made to wait instead of overrunning")
    func backpressure() async throws {
        let frames: Int64 = 2_000_000
        let sink = MemoryTakeSink()
        // A tiny hand-off buffer and an unpaced source: without backpressure this would overrun.
        let result = try await record(ScriptedCaptureBackend(script: [.frames(Int(frames))], realTime: false), limit: frames, sink: sink, bufferSeconds: 0.01)
        #expect(result.overruns.isEmpty)
        #expect(result.frames == frames)
        #expect(TestSignal.firstCounterMismatch(in: sink.bytes, format: format) == nil)
    }

    @Test("a writer that cannot be created leaves nothing running and rethrows")
    func writerCreationFails() async throws {
        let engine = RecordingEngine(backend: ScriptedCaptureBackend(script: [.frames(100)]),
                                     settings: RecordingSettings(format: format, periodFrames: 1024), logger: logger)
        _ = try await engine.open()
        await #expect(throws: TapedeckError.self) {
            try await engine.record { _ in throw TapedeckError(.io, "no") }
        }
    }

    @Test("an unopenable device fails open()")
    func openFails() async throws {
        let bad = AudioFormat(sampleRate: 1, channels: 2, sampleFormat: .s16)
        let engine = RecordingEngine(backend: ScriptedCaptureBackend(script: []), settings: RecordingSettings(format: bad, periodFrames: 1024), logger: logger)
        await #expect(throws: TapedeckError.self) { _ = try await engine.open() }
    }
}

@Suite("PlaybackEngine")
struct PlaybackEngineTests {
    @Test("plays every frame in order and drains")
    func playsAll() async throws {
        let format = AudioFormat(sampleRate: 44_100, channels: 2, sampleFormat: .s24)
        var data = [UInt8](repeating: 0, count: 100_000 * format.bytesPerFrame)
        data.withUnsafeMutableBytes { TestSignal.counter($0.baseAddress!, 0, 100_000, format) }
        let backend = CollectingPlaybackBackend()
        let source = data
        let result = try await PlaybackEngine(backend: backend, periodFrames: 512, logger: Logger(label: "t"))
            .play { MemoryTakeReader(format: format, data: source) }
        #expect(result.frames == 100_000)
        #expect(firstDifference(backend.collected, data) == nil)
        #expect(backend.drainCount == 1)
    }

    @Test("the conformance suite passes for the collecting test backend")
    func conformance() async throws {
        try await BackendConformance.playback(CollectingPlaybackBackend(), format: .cdStereo, frames: 10_000)
    }
}
