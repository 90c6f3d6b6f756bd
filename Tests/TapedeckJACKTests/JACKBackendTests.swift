#if JACK
import Foundation
import Testing
import TapedeckCore
import TapedeckJACK
import TapedeckTesting

/// The JACK backend against a private `jackd -d dummy`: the shared conformance suites, sample
/// formats, devices and the failures a user meets (no server, no such port, another rate).
extension JACKTests {
@Suite struct JACKBackendTests {
    @Test func captureConformance() async throws {
        try await JACKTestSupport.withServer { server in
            try await BackendConformance.capture(try JACKTestSupport.capture(server), format: JACKTestSupport.format, frames: 9_600)
        }
    }

    @Test(arguments: [SampleFormat.s24, .s32, .f32])
    func captureOtherSampleFormats(_ sample: SampleFormat) async throws {
        try await JACKTestSupport.withServer { server in
            try await BackendConformance.capture(try JACKTestSupport.capture(server),
                                                 format: AudioFormat(sampleRate: 48_000, channels: 1, sampleFormat: sample), frames: 4_800)
        }
    }

    @Test func playbackConformance() async throws {
        try await JACKTestSupport.withServer { server in
            try await BackendConformance.playback(try JACKTestSupport.playback(server), format: JACKTestSupport.format, frames: 9_600)
        }
    }

    @Test func devicesListClientsWithPortsAndTheServersRate() async throws {
        try await JACKTestSupport.withServer(sampleRate: 44_100) { server in
            let sources = try JACKTestSupport.capture(server).devices()
            let system = try #require(sources.first { $0.name == "system" }, "\(sources)")
            #expect(system.isDefault && system.canCapture && system.canPlay)
            #expect(system.details["capturePorts"] == "system:capture_1, system:capture_2")
            #expect(system.details["sampleRate"] == "44100")
            let sinks = try JACKTestSupport.playback(server).devices()
            #expect(sinks.first { $0.name == "system" }?.details["playbackPorts"] == "system:playback_1, system:playback_2")
        }
    }

    @Test func anotherRateIsRefusedNamingTheServersRate() async throws {
        try await JACKTestSupport.withServer(sampleRate: 44_100) { server in
            let backend = try JACKTestSupport.capture(server)
            let error = try #require(throws: TapedeckError.self) {
                _ = try backend.openCaptureStream(format: JACKTestSupport.format, options: CaptureOptions(periodFrames: 1024))
            }
            #expect(error.code == .unsupportedFormat)
            #expect(error.message.contains("44100 Hz") && error.message.contains("-r 44100"), "\(error.message)")
        }
    }

    @Test func noServerIsUnavailableAndNamed() async throws {
        try await JACKTestSupport.withServer { server in
            let settings = try PluginSettings.resolving(JACKBackend.capture.settings, overrides: ["server": "no-such-server"], section: "capture.jack")
            let backend = try JACKBackend.capture.make(settings, JACKTestSupport.context(section: "capture.jack"))
            let error = try #require(throws: TapedeckError.self) {
                _ = try backend.openCaptureStream(format: JACKTestSupport.format, options: CaptureOptions(periodFrames: 1024))
            }
            #expect(error.code == .deviceUnavailable)
            #expect(error.message.contains("\"no-such-server\"") && error.message.contains("not running"), "\(error.message)")
            #expect(throws: TapedeckError.self) { _ = try backend.devices() }
            _ = server
        }
    }

    @Test func aClientNamedLikeTheServerIsRefusedAndTheServerStaysReachable() async throws {
        try await JACKTestSupport.withServer { server in
            let backend = try JACKTestSupport.capture(server, client: server.name)
            let error = try #require(throws: TapedeckError.self) {
                _ = try backend.openCaptureStream(format: JACKTestSupport.format, options: CaptureOptions(periodFrames: 1024))
            }
            #expect(error.code == .configuration)
            #expect(error.message.contains("capture.jack.client-name"), "\(error.message)")
            #expect(try JACKTestSupport.capture(server).devices().contains { $0.name == "system" })
        }
    }

    @Test func aPortThatMatchesNothingIsNamedWithThePortsThereAre() async throws {
        try await JACKTestSupport.withServer { server in
            let backend = try JACKTestSupport.capture(server, device: "mixer:out_9")
            let error = try #require(throws: TapedeckError.self) {
                _ = try backend.openCaptureStream(format: JACKTestSupport.format, options: CaptureOptions(periodFrames: 1024))
            }
            #expect(error.code == .deviceUnavailable)
            #expect(error.message.contains("capture.jack.device") && error.message.contains("mixer:out_9")
                    && error.message.contains("system:capture_1"), "\(error.message)")
            // An input port is not something to record from.
            let wrongWay = try JACKTestSupport.capture(server, device: "system:playback_1")
            let refused = try #require(throws: TapedeckError.self) {
                _ = try wrongWay.openCaptureStream(format: JACKTestSupport.format, options: CaptureOptions(periodFrames: 1024))
            }
            #expect(refused.message.contains("input"), "\(refused.message)")
        }
    }
}
}
#endif
