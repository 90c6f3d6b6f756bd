#if JACK
import Foundation
import Testing
import TapedeckCore
import TapedeckJACK
import TapedeckTesting

/// Real audio through a private JACK server: playback → capture round trip (bit-exact), a
/// drained stop, a device thread that falls behind, and the server killed.
extension JACKTests {
@Suite struct JACKLoopbackTests {
    @Test func noisePlayedByOneClientIsRecordedBitExactByAnother() async throws {
        try await JACKTestSupport.withServer { server in
            let format = JACKTestSupport.format
            let sink = MemoryTakeSink()
            // The recorder reads the player's ports; the player is connected to nothing else.
            let player = PlaybackEngine(backend: try JACKTestSupport.playback(server, device: "none", client: "tdplay"),
                                        periodFrames: 1024, logger: JACKTestSupport.logger)
            let signal = JACKTestSupport.noise(seconds: 8)
            let playing = Task { try await player.play { MemoryTakeReader(format: format, data: signal) } }
            // The player's ports exist once its stream is open.
            var recorder: RecordingEngine?
            let deadline = ContinuousClock.now + .seconds(10)
            while recorder == nil && ContinuousClock.now < deadline {
                let engine = RecordingEngine(backend: try JACKTestSupport.capture(server, device: "tdplay"),
                                             settings: RecordingSettings(format: format, periodFrames: 1024), logger: JACKTestSupport.logger)
                if (try? await engine.open()) != nil { recorder = engine } else { try await Task.sleep(for: .milliseconds(5)) }
            }
            let engine = try #require(recorder, "the player's ports never appeared")
            let recording = Task { try await engine.record { MemoryTakeWriter(sink: sink, format: $0) } }
            while engine.takeProgress().frames < 72_000 && ContinuousClock.now < deadline + .seconds(10) {
                try await Task.sleep(for: .milliseconds(10))
            }
            engine.stop()
            let result = try await recording.value
            player.stop()
            let played = try await playing.value
            #expect(result.end == .stopped)
            print("round trip: \(result.frames) frames recorded, \(result.overruns.count) overrun(s); \(played.underrunFrames) frames of player underrun")

            // Every frame recorded that is not silence continues a run of the signal's frames,
            // exactly: 16-bit samples survive JACK's floats unchanged. (Silence is what a cycle the
            // loaded server skipped leaves, in either client; the runs then go on further on.)
            let copied = JACKTestSupport.copiedRuns(JACKTestSupport.frames(sink.bytes), of: JACKTestSupport.frames(signal))
            #expect(copied.stray == 0, "\(copied.stray) recorded frames are not the signal's")
            #expect(copied.matched >= 48_000, "only \(copied.matched) frames of the signal were recorded")
        }
    }

    @Test func stopDrainsToTheServersFrameTime() async throws {
        try await JACKTestSupport.withServer { server in
            let format = JACKTestSupport.format
            let sink = MemoryTakeSink()
            let engine = RecordingEngine(backend: try JACKTestSupport.capture(server),
                                         settings: RecordingSettings(format: format, periodFrames: 4_096), logger: JACKTestSupport.logger)
            _ = try await engine.open()
            let stopper = Task {
                try await Task.sleep(for: .seconds(2))
                engine.stop()
            }
            let result = try await engine.record { MemoryTakeWriter(sink: sink, format: $0) }
            try await stopper.value
            #expect(result.end == .stopped)
            // A loaded machine makes the (not real-time) test server skip cycles: those are
            // overruns, filled with silence, and counted in the frames.
            let wallFrames = result.wallSeconds * Double(format.sampleRate)
            let difference = Double(result.frames) - wallFrames
            print("stop drain: \(result.frames) frames vs wall \(Int(wallFrames)) (difference \(Int(difference)))")
            // One JACK cycle (256 frames) and 10 ms of scheduling either way.
            #expect(abs(difference) <= 256 + 480, "take \(result.frames) frames, wall time \(wallFrames) frames")
            #expect(sink.bytes.count == Int(result.frames) * format.bytesPerFrame)
        }
    }

    @Test func aDeviceThreadStalledForThreeAndAHalfSecondsLosesNothing() async throws {
        try await JACKTestSupport.withServer { server in
            let format = AudioFormat(sampleRate: 48_000, channels: 1, sampleFormat: .s16)
            let stream = try JACKTestSupport.capture(server).openCaptureStream(format: format, options: CaptureOptions(periodFrames: 1_024))
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
            let elapsed = Double((ContinuousClock.now - began).components.attoseconds) / 1e18 + Double((ContinuousClock.now - began).components.seconds)
            let wall = elapsed * 48_000
            print("stall: \(lost) frames lost, \(total) frames in all for \(Int(wall)) of wall time")
            // The stall itself costs nothing (the ring holds 5 s). What a loaded machine may still
            // cost are cycles the JACK server itself skipped (its own xruns, logged as such): they
            // come back as holes too, and here cannot be told from the ring's. A few of those, never
            // the 168 000 frames of the stall: at most 0.1 s (a full run once saw 3 xruns, 768 frames).
            #expect(lost <= 4_800, "lost \(lost) frames")
            #expect(abs(Double(total) - wall) < 4_800, "\(total) frames for \(wall) of wall time")
        }
    }

    @Test func serverLossEndsTheTakeQuicklyAndKeepsTheAudio() async throws {
        try await JACKTestSupport.withServer { server in
            let format = JACKTestSupport.format
            let sink = MemoryTakeSink()
            let engine = RecordingEngine(backend: try JACKTestSupport.capture(server),
                                         settings: RecordingSettings(format: format, periodFrames: 1024), logger: JACKTestSupport.logger)
            _ = try await engine.open()
            let killer = Task {
                while engine.takeProgress().frames < 48_000 { try await Task.sleep(for: .milliseconds(10)) }
                let before = engine.takeProgress().frames
                let killedAt = ContinuousClock.now
                server.kill()
                return (killedAt, before)
            }
            let result = try await engine.record { MemoryTakeWriter(sink: sink, format: $0) }
            let (killedAt, framesBefore) = try await killer.value
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

    @Test func playbackToAKilledServerFailsAsDeviceLost() async throws {
        try await JACKTestSupport.withServer { server in
            let player = PlaybackEngine(backend: try JACKTestSupport.playback(server), periodFrames: 1024, logger: JACKTestSupport.logger)
            let tone = JACKTestSupport.sine(frequency: 440, level: 0.3, seconds: 8)
            let killer = Task {
                // Once audio is being played, however loaded the machine is (a task may start late).
                let deadline = ContinuousClock.now + .seconds(20)
                while player.playedFrames < 48_000 && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
                server.kill()
                return player.playedFrames
            }
            do {
                let result = try await player.play { MemoryTakeReader(format: JACKTestSupport.format, data: tone) }
                let killedAt = try await killer.value
                // Only a killer that ran after the whole tone was played can miss it.
                #expect(killedAt >= 8 * 48_000, "playback ended without an error: \(result), killed after \(killedAt) frames")
            } catch let error as TapedeckError {
                #expect(error.code == .deviceLost, "\(error)")
                _ = try await killer.value
            }
        }
    }
}
}
#endif
