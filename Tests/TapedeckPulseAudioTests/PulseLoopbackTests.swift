#if PulseAudio
import Foundation
import Testing
import TapedeckCore
import TapedeckPulseAudio
import TapedeckTesting

/// Real audio through a private daemon: loopback, stopping, and server loss.
@Suite(.serialized)
struct PulseLoopbackTests {
    @Test func sinePlayedIntoNullIsRecordedFromItsMonitor() async throws {
        try await PulseTestSupport.withDaemon { daemon in
            let format = PulseTestSupport.format
            // Capture first; play the tone once audio is flowing; analyse where the tone is, so the
            // check does not depend on how long either stream takes to start.
            let sink = MemoryTakeSink()
            let recorder = RecordingEngine(backend: try PulseTestSupport.capture(server: daemon.serverAddress),
                                           settings: RecordingSettings(format: format, periodFrames: 1024), logger: PulseTestSupport.logger)
            _ = try await recorder.open()
            let recording = Task { try await recorder.record { MemoryTakeWriter(sink: sink, format: $0) } }
            while recorder.takeProgress().frames < 4_800 { try await Task.sleep(for: .milliseconds(10)) }
            let player = PlaybackEngine(backend: try PulseTestSupport.playback(server: daemon.serverAddress),
                                        periodFrames: 1024, logger: PulseTestSupport.logger)
            let tone = PulseTestSupport.sine(frequency: 1_000, level: 0.5, seconds: 1.5)
            let played = try await player.play { MemoryTakeReader(format: format, data: tone) }
            // The tone has drained into the sink; half a second more reaches the monitor, then stop.
            try await Task.sleep(for: .milliseconds(500))
            recorder.stop()
            let result = try await recording.value
            #expect(result.end == .stopped)
            #expect(result.overruns.isEmpty)
            #expect(played.frames == Int64(tone.count / format.bytesPerFrame))

            let left = PulseTestSupport.leftChannel(sink.bytes)
            let onset = try #require(left.firstIndex { abs($0) > 0.25 }, "the tone never reached the monitor")
            let analysed = Array(left.dropFirst(onset + 4_800).prefix(48_000))   // skip 100 ms after onset
            #expect(analysed.count >= 24_000, "only \(analysed.count) frames of tone captured")
            let frequency = PulseTestSupport.frequency(analysed, sampleRate: format.sampleRate)
            let peak = analysed.map(abs).max() ?? 0
            #expect(abs(frequency - 1_000) <= 20, "dominant frequency \(frequency) Hz (playback underran by \(played.underrunFrames) frames)")
            #expect(abs(peak - 0.5) <= 0.05, "peak \(peak)")
        }
    }

    @Test func stopDrainsToTheWallTime() async throws {
        try await PulseTestSupport.withDaemon { daemon in
            let format = PulseTestSupport.format
            let sink = MemoryTakeSink()
            let engine = RecordingEngine(backend: try PulseTestSupport.capture(server: daemon.serverAddress),
                                         settings: RecordingSettings(format: format, periodFrames: 1024), logger: PulseTestSupport.logger)
            _ = try await engine.open()
            let stopper = Task {
                try await Task.sleep(for: .seconds(3))
                engine.stop()
            }
            let result = try await engine.record { MemoryTakeWriter(sink: sink, format: $0) }
            try await stopper.value
            #expect(result.end == .stopped)
            #expect(result.overruns.isEmpty)
            let wallFrames = result.wallSeconds * Double(format.sampleRate)
            let difference = Double(result.frames) - wallFrames
            // One 20 ms fragment (960 frames) plus 5 ms for scheduling.
            print("stop drain: \(result.frames) frames vs wall \(Int(wallFrames)) frames (\(result.wallSeconds) s): difference \(Int(difference)) frames")
            #expect(abs(difference) <= 960 + 240, "take \(result.frames) frames, wall time \(wallFrames) frames")
            #expect(sink.bytes.count == Int(result.frames) * format.bytesPerFrame)
        }
    }

    @Test func serverLossEndsTheTakeQuicklyAndKeepsTheAudio() async throws {
        try await PulseTestSupport.withDaemon { daemon in
            let format = PulseTestSupport.format
            let sink = MemoryTakeSink()
            let engine = RecordingEngine(backend: try PulseTestSupport.capture(server: daemon.serverAddress),
                                         settings: RecordingSettings(format: format, periodFrames: 1024), logger: PulseTestSupport.logger)
            _ = try await engine.open()
            let killer = Task {
                while engine.takeProgress().frames < 48_000 { try await Task.sleep(for: .milliseconds(10)) }
                let before = engine.takeProgress().frames
                let killedAt = ContinuousClock.now
                daemon.kill()
                return (killedAt, before)
            }
            let result = try await engine.record { MemoryTakeWriter(sink: sink, format: $0) }
            let (killedAt, framesBefore) = try await killer.value
            // Measured on the device thread, not when this task resumes (which a loaded test run delays).
            let delay = killedAt.duration(to: result.captureEnded)
            print("server loss noticed after \(delay)")
            guard case .deviceLost(let error) = result.end else {
                Issue.record("expected .deviceLost, got \(result.end)")
                return
            }
            #expect(error.code == .deviceLost)
            #expect(error.message.contains("went away"), "\(error.message)")
            #expect(delay < .seconds(2), "server loss noticed after \(delay)")
            #expect(result.frames >= framesBefore)
            #expect(sink.snapshot.finished)
            #expect(sink.bytes.count == Int(result.frames) * format.bytesPerFrame)
        }
    }
}
#endif
