public import TapedeckCore
import Foundation
import Logging
import Testing

/// The contract every capture and playback backend keeps.
public enum BackendConformance {
    /// Opens a stream, checks the negotiated format and reads, then records through the
    /// `RecordingEngine`: exactly `frames` frames with a frame limit, and a clean stop.
    /// - Thread: any; blocks while the device runs.
    public static func capture(_ backend: any CaptureBackend, format: AudioFormat, frames: Int64) async throws {
        #expect(try backend.devices().contains { $0.canCapture })
        let stream = try backend.openCaptureStream(format: format, options: CaptureOptions(periodFrames: 256))
        // The layout may be the device's own (its channel map); the samples are never another format.
        #expect(stream.format.hasSameSamples(as: format), "a backend never records in another format without saying so")
        #expect(stream.format.layout.speakers.count == format.channels || stream.format.layout == .discrete)
        #expect(stream.periodFrames > 0)
        var buffer = [UInt8](repeating: 0, count: stream.periodFrames * format.bytesPerFrame)
        let r = try buffer.withUnsafeMutableBytes { try stream.read(into: $0.baseAddress!, maxFrames: stream.periodFrames) }
        #expect(r.frames > 0 && r.frames <= stream.periodFrames)
        stream.close()

        let logger = Logger(label: "conformance")
        let sink = MemoryTakeSink()
        let engine = RecordingEngine(backend: backend, settings: RecordingSettings(format: format, periodFrames: 256), frameLimit: frames, logger: logger)
        _ = try await engine.open()
        let result = try await engine.record { MemoryTakeWriter(sink: sink, format: $0) }
        #expect(result.end == .reachedDuration)
        #expect(result.frames == frames, "a frame limit is exact to the frame")
        #expect(sink.bytes.count == Int(frames) * format.bytesPerFrame)
        #expect(sink.snapshot.finished)

        let stopSink = MemoryTakeSink()
        let stopping = RecordingEngine(backend: backend, settings: RecordingSettings(format: format, periodFrames: 256), logger: logger)
        _ = try await stopping.open()
        let timer = Task {
            // Stop once audio is flowing, however loaded the machine is.
            while stopping.takeProgress().frames < 4_096 { try await Task.sleep(for: .milliseconds(10)) }
            stopping.stop()
        }
        let stopped = try await stopping.record { MemoryTakeWriter(sink: stopSink, format: $0) }
        _ = try await timer.value
        #expect(stopped.end == .stopped)
        #expect(stopped.frames > 0)
        #expect(Int(stopped.frames) * format.bytesPerFrame == stopSink.bytes.count)
    }

    /// Plays `frames` frames through a stream and through the `PlaybackEngine`.
    /// - Thread: any; blocks while the device plays.
    public static func playback(_ backend: any PlaybackBackend, format: AudioFormat, frames: Int) async throws {
        #expect(try backend.devices().contains { $0.canPlay })
        let stream = try backend.openPlaybackStream(format: format, options: PlaybackOptions(periodFrames: 256))
        #expect(stream.format == format)
        let silence = [UInt8](repeating: 0, count: 256 * format.bytesPerFrame)
        _ = try silence.withUnsafeBytes { try stream.write($0.baseAddress!, frames: 256) }
        try stream.drain()
        stream.close()

        var data = [UInt8](repeating: 0, count: frames * format.bytesPerFrame)
        data.withUnsafeMutableBytes { TestSignal.counter($0.baseAddress!, 0, frames, format) }
        let engine = PlaybackEngine(backend: backend, periodFrames: 256, logger: Logger(label: "conformance"))
        let source = data
        let result = try await engine.play { MemoryTakeReader(format: format, data: source) }
        #expect(result.frames == Int64(frames))
        #expect(!result.stopped)
    }
}
