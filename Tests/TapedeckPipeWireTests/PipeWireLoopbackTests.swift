#if PipeWire
import Foundation
import Testing
import TapedeckCore
import TapedeckPipeWire
import TapedeckTesting

/// Real audio through a private PipeWire: playback to a null sink → capture of what it plays
/// (bit-exact), a drained stop, a device thread that falls behind, the node removed and the
/// daemon killed.
extension PipeWireTests {
@Suite struct PipeWireLoopbackTests {
    @Test func noisePlayedToASinkIsRecordedBitExactFromIt() async throws {
        try await PipeWireTestSupport.withDaemon { daemon in
            let format = PipeWireTestSupport.format
            let sink = MemoryTakeSink()
            let recorder = RecordingEngine(backend: try PipeWireTestSupport.capture(daemon, device: daemon.sinkName, node: "tdrecord"),
                                           settings: RecordingSettings(format: format, periodFrames: 1024), logger: PipeWireTestSupport.logger)
            _ = try await recorder.open()
            let recording = Task { try await recorder.record { MemoryTakeWriter(sink: sink, format: $0) } }
            try await PipeWireTestSupport.waitUntil("the recorder never started") { recorder.takeProgress().frames > 0 }
            let player = PlaybackEngine(backend: try PipeWireTestSupport.playback(daemon, device: daemon.sinkName, node: "tdplay"),
                                        periodFrames: 1024, logger: PipeWireTestSupport.logger)
            let signal = StereoSignal.noise(seconds: 3)
            let played = try await player.play { MemoryTakeReader(format: format, data: signal) }
            try await Task.sleep(for: .milliseconds(300))
            recorder.stop()
            let result = try await recording.value
            #expect(result.end == .stopped)
            #expect(played.frames == 144_000)
            // The player kept the graph fed: no silence in the middle of the signal.
            #expect(played.underrunFrames < 4_800, "\(played.underrunFrames) frames of underrun")
            print("round trip: \(result.frames) frames recorded, \(result.overruns.count) overrun(s); \(played.underrunFrames) frames of player underrun")
            // 16-bit samples survive PipeWire's floats unchanged: every frame recorded that is not
            // silence continues a run of the signal's frames exactly, and nearly all of it came back.
            let copied = StereoSignal.copiedRuns(StereoSignal.frames(sink.bytes), of: StereoSignal.frames(signal))
            #expect(copied.stray == 0, "\(copied.stray) recorded frames are not the signal's")
            #expect(copied.matched >= 144_000 - 4_096, "only \(copied.matched) of 144000 frames of the signal were recorded")
        }
    }

    @Test func stopDrainsToTheGraphClock() async throws {
        try await PipeWireTestSupport.withDaemon { daemon in
            let format = PipeWireTestSupport.format
            let sink = MemoryTakeSink()
            let engine = RecordingEngine(backend: try PipeWireTestSupport.capture(daemon),
                                         settings: RecordingSettings(format: format, periodFrames: 4_096), logger: PipeWireTestSupport.logger)
            _ = try await engine.open()
            let stopper = Task {
                try await Task.sleep(for: .seconds(2))
                engine.stop()
            }
            let result = try await engine.record { MemoryTakeWriter(sink: sink, format: $0) }
            try await stopper.value
            #expect(result.end == .stopped)
            let wallFrames = result.wallSeconds * Double(format.sampleRate)
            let difference = Double(result.frames) - wallFrames
            print("stop drain: \(result.frames) frames vs wall \(Int(wallFrames)) (difference \(Int(difference)))")
            // One graph cycle (1024 frames) and 10 ms of scheduling either way.
            #expect(abs(difference) <= 1_024 + 480, "take \(result.frames) frames, wall time \(wallFrames) frames")
            #expect(sink.bytes.count == Int(result.frames) * format.bytesPerFrame)
        }
    }

    @Test func aDeviceThreadStalledForThreeAndAHalfSecondsLosesNothing() async throws {
        try await PipeWireTestSupport.withDaemon { daemon in
            let format = AudioFormat(sampleRate: 48_000, channels: 1, sampleFormat: .s16)
            let stream = try PipeWireTestSupport.capture(daemon).openCaptureStream(format: format, options: CaptureOptions(periodFrames: 1_024))
            defer { stream.close() }
            let buffer = UnsafeMutableRawPointer.allocate(byteCount: 1_024 * 2, alignment: 4)
            defer { buffer.deallocate() }
            let began = ContinuousClock.now
            var total: Int64 = 0
            var lost: Int64 = 0
            let first = try stream.read(into: buffer, maxFrames: 1_024)
            total += Int64(first.frames)
            // The device thread sleeps 3.5 s; the real-time callback goes on filling the ring (5 s).
            usleep(3_500_000)
            while ContinuousClock.now - began < .seconds(5) {
                let r = try stream.read(into: buffer, maxFrames: 1_024)
                total += Int64(r.frames) + r.lostFramesBefore
                lost += r.lostFramesBefore
            }
            let wall = PipeWireTestSupport.seconds(ContinuousClock.now - began) * 48_000
            print("stall: \(lost) frames lost, \(total) frames in all for \(Int(wall)) of wall time")
            #expect(lost == 0, "lost \(lost) frames")
            #expect(abs(Double(total) - wall) < 4_800, "\(total) frames for \(wall) of wall time")
        }
    }

    @Test func theNodeRemovedWhileRecordingIsDeviceLost() async throws {
        try await PipeWireTestSupport.withDaemon { daemon in
            let format = PipeWireTestSupport.format
            let sink = MemoryTakeSink()
            let engine = RecordingEngine(backend: try PipeWireTestSupport.capture(daemon, device: daemon.sourceName),
                                         settings: RecordingSettings(format: format, periodFrames: 1024), logger: PipeWireTestSupport.logger)
            _ = try await engine.open()
            let remover = Task {
                try await PipeWireTestSupport.waitUntil("no audio arrived") { engine.takeProgress().frames >= 24_000 }
                let id = try #require(try daemon.nodeID(daemon.sourceName))
                try daemon.cli(["destroy", "\(id)"])
                return ContinuousClock.now
            }
            let result = try await engine.record { MemoryTakeWriter(sink: sink, format: $0) }
            let removedAt = try await remover.value
            guard case .deviceLost(let error) = result.end else {
                Issue.record("expected .deviceLost, got \(result.end)")
                return
            }
            #expect(error.message.contains(daemon.sourceName) && error.message.contains("removed"), "\(error.message)")
            #expect(removedAt.duration(to: result.captureEnded) < .seconds(2))
            #expect(sink.snapshot.finished && sink.bytes.count == Int(result.frames) * format.bytesPerFrame)
        }
    }

    @Test func daemonLossEndsTheTakeQuicklyAndKeepsTheAudio() async throws {
        try await PipeWireTestSupport.withDaemon { daemon in
            let format = PipeWireTestSupport.format
            let sink = MemoryTakeSink()
            let engine = RecordingEngine(backend: try PipeWireTestSupport.capture(daemon),
                                         settings: RecordingSettings(format: format, periodFrames: 1024), logger: PipeWireTestSupport.logger)
            _ = try await engine.open()
            let killer = Task {
                try await PipeWireTestSupport.waitUntil("no audio arrived") { engine.takeProgress().frames >= 48_000 }
                let before = engine.takeProgress().frames
                let killedAt = ContinuousClock.now
                daemon.kill()
                return (killedAt, before)
            }
            let result = try await engine.record { MemoryTakeWriter(sink: sink, format: $0) }
            let (killedAt, framesBefore) = try await killer.value
            let delay = killedAt.duration(to: result.captureEnded)
            print("daemon loss noticed after \(delay)")
            guard case .deviceLost(let error) = result.end else {
                Issue.record("expected .deviceLost, got \(result.end)")
                return
            }
            #expect(error.code == .deviceLost)
            #expect(delay < .seconds(2), "daemon loss noticed after \(delay)")
            #expect(result.frames >= framesBefore)
            #expect(sink.snapshot.finished)
            #expect(sink.bytes.count == Int(result.frames) * format.bytesPerFrame)
        }
    }

    @Test func playbackToAKilledDaemonFailsAsDeviceLost() async throws {
        try await PipeWireTestSupport.withDaemon { daemon in
            let player = PlaybackEngine(backend: try PipeWireTestSupport.playback(daemon), periodFrames: 1024, logger: PipeWireTestSupport.logger)
            let tone = StereoSignal.sine(frequency: 440, level: 0.3, seconds: 8)
            let killer = Task {
                // Once audio is being played, however loaded the machine is.
                try await PipeWireTestSupport.waitUntil("no audio was played") { player.playedFrames >= 48_000 }
                daemon.kill()
                return player.playedFrames
            }
            do {
                let result = try await player.play { MemoryTakeReader(format: PipeWireTestSupport.format, data: tone) }
                Issue.record("playback ended without an error: \(result), killed after \(try await killer.value) frames")
            } catch let error as TapedeckError {
                #expect(error.code == .deviceLost, "\(error)")
                #expect(try await killer.value < 8 * 48_000)
            }
        }
    }
}
}
#endif
