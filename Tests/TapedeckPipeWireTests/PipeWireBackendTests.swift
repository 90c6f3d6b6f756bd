#if PipeWire
import Foundation
import Testing
import TapedeckCore
import TapedeckPipeWire
import TapedeckTesting

/// The PipeWire backend against a private PipeWire with WirePlumber and null nodes: the shared
/// conformance suites, sample formats and layouts, devices, and the failures a user meets (no
/// daemon, no such node, a node of the wrong kind).
extension PipeWireTests {
@Suite struct PipeWireBackendTests {
    @Test func captureConformance() async throws {
        try await PipeWireTestSupport.withDaemon { daemon in
            try await BackendConformance.capture(try PipeWireTestSupport.capture(daemon), format: PipeWireTestSupport.format, frames: 9_600)
        }
    }

    @Test func playbackConformance() async throws {
        try await PipeWireTestSupport.withDaemon { daemon in
            try await BackendConformance.playback(try PipeWireTestSupport.playback(daemon), format: PipeWireTestSupport.format, frames: 9_600)
        }
    }

    @Test func otherRatesSampleFormatsAndLayoutsAreConvertedByPipeWire() async throws {
        try await PipeWireTestSupport.withDaemon { daemon in
            let backend = try PipeWireTestSupport.capture(daemon)
            for format in [AudioFormat(sampleRate: 44_100, channels: 1, sampleFormat: .s24),
                           AudioFormat(sampleRate: 96_000, channels: 2, sampleFormat: .f32),
                           AudioFormat(sampleRate: 48_000, channels: 6, sampleFormat: .s32)] {
                let stream = try backend.openCaptureStream(format: format, options: CaptureOptions(periodFrames: 2_048))
                #expect(stream.format == format, "the take's rate, samples and layout (\(format.layout)) exactly")
                var buffer = [UInt8](repeating: 0, count: 2_048 * format.bytesPerFrame)
                var frames = 0
                let began = ContinuousClock.now
                while frames < format.sampleRate / 2 {
                    let read = try buffer.withUnsafeMutableBytes { try stream.read(into: $0.baseAddress!, maxFrames: 2_048) }
                    frames += read.frames + Int(read.lostFramesBefore)
                }
                let elapsed = PipeWireTestSupport.seconds(ContinuousClock.now - began)
                stream.close()
                // Frames come at the take's rate, whatever the graph's (48 kHz).
                #expect(abs(Double(frames) / elapsed - Double(format.sampleRate)) < Double(format.sampleRate) * 0.25,
                        "\(frames) frames in \(elapsed) s at \(format.sampleRate) Hz")
            }
        }
    }

    @Test func devicesListTheNodesWithSerialsAndDefaults() async throws {
        try await PipeWireTestSupport.withDaemon { daemon in
            let sources = try PipeWireTestSupport.capture(daemon).devices()
            let source = try #require(sources.first { $0.name == daemon.sourceName }, "\(sources)")
            #expect(source.isDefault && source.canCapture && !source.canPlay)
            #expect(source.details["mediaClass"] == "Audio/Source/Virtual")
            #expect(Int(source.details["serial"] ?? "") != nil)
            // A sink can be recorded: what it plays.
            let monitor = try #require(sources.first { $0.name == daemon.sinkName })
            #expect(!monitor.isDefault && monitor.details["records"] != nil)
            let sinks = try PipeWireTestSupport.playback(daemon).devices()
            #expect(sinks.map(\.name) == [daemon.sinkName], "\(sinks)")
            #expect(sinks.first?.isDefault == true)
            #expect(sinks.first?.details["channels"] == "2" && sinks.first?.details["positions"] == "FL FR")
            #expect(source.details["positions"] == "FL FR" && monitor.details["positions"] == "FL FR")
        }
    }

    @Test func aNodeIsFoundBySerialAsPwRecordTargetTakesIt() async throws {
        try await PipeWireTestSupport.withDaemon { daemon in
            let serial = try #require(try PipeWireTestSupport.capture(daemon).devices().first { $0.name == daemon.sinkName }?.details["serial"])
            let stream = try PipeWireTestSupport.capture(daemon, device: serial)
                .openCaptureStream(format: PipeWireTestSupport.format, options: CaptureOptions(periodFrames: 1_024))
            var buffer = [UInt8](repeating: 0, count: 1_024 * 4)
            let read = try buffer.withUnsafeMutableBytes { try stream.read(into: $0.baseAddress!, maxFrames: 1_024) }
            #expect(read.frames > 0)
            stream.close()
        }
    }

    @Test func noDaemonIsUnavailableAndTheSocketIsNamed() async throws {
        let settings = try PluginSettings.resolving(PipeWireBackend.capture.settings, overrides: ["remote": "/nonexistent/tapedeck-no-pipewire"],
                                                    section: "capture.pipewire")
        let backend = try PipeWireBackend.capture.make(settings, PipeWireTestSupport.context(section: "capture.pipewire"))
        let error = try #require(throws: TapedeckError.self) {
            _ = try backend.openCaptureStream(format: PipeWireTestSupport.format, options: CaptureOptions(periodFrames: 1024))
        }
        #expect(error.code == .deviceUnavailable)
        #expect(error.message.contains("/nonexistent/tapedeck-no-pipewire") && error.message.contains("capture.pipewire.remote"), "\(error.message)")
        #expect(throws: TapedeckError.self) { _ = try backend.devices() }
    }

    @Test func aNodeThatIsNotThereIsNamedWithTheNodesThereAre() async throws {
        try await PipeWireTestSupport.withDaemon { daemon in
            let error = try #require(throws: TapedeckError.self) {
                _ = try PipeWireTestSupport.capture(daemon, device: "alsa_input.nothing")
                    .openCaptureStream(format: PipeWireTestSupport.format, options: CaptureOptions(periodFrames: 1024))
            }
            #expect(error.code == .deviceUnavailable)
            #expect(error.message.contains("alsa_input.nothing") && error.message.contains("capture.pipewire.device")
                    && error.message.contains(daemon.sourceName), "\(error.message)")
            // A source is nothing to play to.
            let refused = try #require(throws: TapedeckError.self) {
                _ = try PipeWireTestSupport.playback(daemon, device: daemon.sourceName)
                    .openPlaybackStream(format: PipeWireTestSupport.format, options: PlaybackOptions(periodFrames: 1024))
            }
            #expect(refused.message.contains("Audio/Source/Virtual") && refused.message.contains(daemon.sinkName), "\(refused.message)")
        }
    }
}
}
#endif
