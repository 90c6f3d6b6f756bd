#if PulseAudio
import Foundation
import Testing
import TapedeckCore
@testable import TapedeckPulseAudio
import TapedeckTesting

/// The shared conformance suites, device listing and open failures, against private daemons.
@Suite(.serialized)
struct PulseBackendTests {
    @Test func captureConformance() async throws {
        try await PulseTestSupport.withDaemon { daemon in
            let backend = try PulseTestSupport.capture(server: daemon.serverAddress)
            try await BackendConformance.capture(backend, format: PulseTestSupport.format, frames: 9_600)
        }
    }

    @Test(arguments: [SampleFormat.s24, .s32, .f32])
    func captureOtherSampleFormats(_ sample: SampleFormat) async throws {
        try await PulseTestSupport.withDaemon { daemon in
            let backend = try PulseTestSupport.capture(server: daemon.serverAddress)
            let format = AudioFormat(sampleRate: 44_100, channels: 1, sampleFormat: sample)
            let stream = try backend.openCaptureStream(format: format, options: CaptureOptions(periodFrames: 256))
            defer { stream.close() }
            #expect(stream.format == format)
            var buffer = [UInt8](repeating: 0, count: stream.periodFrames * format.bytesPerFrame)
            let r = try buffer.withUnsafeMutableBytes { try stream.read(into: $0.baseAddress!, maxFrames: stream.periodFrames) }
            #expect(r.frames > 0)
        }
    }

    @Test("a fragment costs one wake-up even when another client of the source makes the server send 20 ms pieces")
    func oneWakeUpPerFragment() async throws {
        // The daemon's keeper records the monitor asking for 20 ms (see PulseAudioDaemon.start),
        // so the monitor hands its audio on in 20 ms pieces, and the server passes them on to
        // every record stream of the source as they come.
        try await PulseTestSupport.withDaemon { daemon in
            let backend = try PulseTestSupport.capture(server: daemon.serverAddress)
            let stream = try backend.openCaptureStream(format: PulseTestSupport.format, options: CaptureOptions(periodFrames: 256))
            defer { stream.close() }
            let pulse = try #require(stream as? PulseCaptureStream)
            var buffer = [UInt8](repeating: 0, count: stream.periodFrames * PulseTestSupport.format.bytesPerFrame)
            let reads = 8
            var frames = 0
            let started = ContinuousClock.now
            for _ in 0..<reads {
                let r = try buffer.withUnsafeMutableBytes { try stream.read(into: $0.baseAddress!, maxFrames: stream.periodFrames) }
                #expect(r.frames > 0)
                frames += r.frames + Int(r.lostFramesBefore)
            }
            let elapsed = started.duration(to: .now)
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            // Waking for every piece would be about 12 waits a read (250 ms in 20 ms pieces).
            #expect(pulse.waits <= reads + 3, "\(pulse.waits) waits for \(reads) reads")
            // And the reads keep up with the source: the audio of that time came.
            let due = seconds * Double(PulseTestSupport.format.sampleRate)
            #expect(abs(Double(frames) - due) <= Double(stream.periodFrames) * 1.5, "\(frames) frames in \(seconds) s")
        }
    }

    @Test func playbackConformance() async throws {
        try await PulseTestSupport.withDaemon { daemon in
            let backend = try PulseTestSupport.playback(server: daemon.serverAddress)
            try await BackendConformance.playback(backend, format: PulseTestSupport.format, frames: 9_600)
        }
    }

    @Test func devicesListSinkAndMonitorWithSampleSpecs() async throws {
        try await PulseTestSupport.withDaemon { daemon in
            let sources = try PulseTestSupport.capture(server: daemon.serverAddress).devices()
            let sinks = try PulseTestSupport.playback(server: daemon.serverAddress).devices()
            let monitor = try #require(sources.first { $0.name == "null.monitor" })
            #expect(monitor.canCapture && !monitor.canPlay)
            #expect(monitor.details["monitorOf"] == "null")
            #expect(monitor.details["sampleSpec"] == "s16le 2ch 48000Hz")
            let sink = try #require(sinks.first { $0.name == "null" })
            #expect(sink.canPlay && !sink.canCapture && sink.isDefault)
            #expect(sink.details["sampleSpec"] == "s16le 2ch 48000Hz")
        }
    }

    @Test func wrongServerIsUnavailableAndNamed() async throws {
        let start = ContinuousClock.now
        let backend = try PulseTestSupport.capture(server: "unix:/nonexistent/native")
        let error = try #require(throws: TapedeckError.self) {
            _ = try backend.openCaptureStream(format: PulseTestSupport.format, options: CaptureOptions(periodFrames: 256))
        }
        #expect(error.code == .deviceUnavailable)
        #expect(error.message.contains("unix:/nonexistent/native"), "\(error.message)")
        #expect(error.message.contains("capture.pulse.server"), "\(error.message)")
        let listing = try #require(throws: TapedeckError.self) { _ = try backend.devices() }
        #expect(listing.code == .deviceUnavailable)
        #expect(listing.message.contains("unix:/nonexistent/native"))
        let playback = try PulseTestSupport.playback(server: "/nonexistent/native")
        let played = try #require(throws: TapedeckError.self) {
            _ = try playback.openPlaybackStream(format: PulseTestSupport.format, options: PlaybackOptions(periodFrames: 256))
        }
        #expect(played.code == .deviceUnavailable && played.message.contains("playback.pulse.server"), "\(played.message)")
        #expect(PulseTestSupport.seconds(since: start) < 3)
    }

    @Test func wrongDeviceIsUnavailableAndNamed() async throws {
        try await PulseTestSupport.withDaemon { daemon in
            let start = ContinuousClock.now
            let backend = try PulseTestSupport.capture(server: daemon.serverAddress, device: "no-such-source")
            let error = try #require(throws: TapedeckError.self) {
                _ = try backend.openCaptureStream(format: PulseTestSupport.format, options: CaptureOptions(periodFrames: 256))
            }
            #expect(error.code == .deviceUnavailable)
            #expect(error.message.contains("\"no-such-source\""), "\(error.message)")
            #expect(error.message.contains("tapedeck devices --backend pulse"))
            let sink = try PulseTestSupport.playback(server: daemon.serverAddress, device: "no-such-sink")
            let played = try #require(throws: TapedeckError.self) {
                _ = try sink.openPlaybackStream(format: PulseTestSupport.format, options: PlaybackOptions(periodFrames: 256))
            }
            #expect(played.code == .deviceUnavailable && played.message.contains("no-such-sink"), "\(played.message)")
            #expect(PulseTestSupport.seconds(since: start) < 3)
        }
    }
}
#endif
