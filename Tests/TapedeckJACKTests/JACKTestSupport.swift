#if JACK
import Foundation
import Logging
import Testing
import TapedeckCore
import TapedeckJACK
import TapedeckTesting

/// Every JACK test, one at a time: libjack keeps one connection's state per process, so clients
/// of two private servers at once (tests in parallel) confuse each other.
@Suite(.serialized) enum JACKTests {}

/// Helpers shared by the JACK tests: backends pointed at a private server, a sine, analysis.
enum JACKTestSupport {
    static let format = AudioFormat(sampleRate: 48_000, channels: 2, sampleFormat: .s16)
    static let logger = Logger(label: "jack-tests")

    static func context(section: String) -> PluginContext {
        PluginContext(logger: logger, defaultLibraryURL: URL(fileURLWithPath: NSTemporaryDirectory()), section: section)
    }

    static func capture(_ server: JACKServer, device: String = "system", client: String = "tapedeck") throws -> any CaptureBackend {
        let settings = try PluginSettings.resolving(JACKBackend.capture.settings,
                                                    overrides: ["server": server.name, "device": device, "client-name": client],
                                                    section: "capture.jack")
        return try JACKBackend.capture.make(settings, context(section: "capture.jack"))
    }

    static func playback(_ server: JACKServer, device: String = "system", client: String = "tapedeck") throws -> any PlaybackBackend {
        let settings = try PluginSettings.resolving(JACKBackend.playback.settings,
                                                    overrides: ["server": server.name, "device": device, "client-name": client],
                                                    section: "playback.jack")
        return try JACKBackend.playback.make(settings, context(section: "playback.jack"))
    }

    /// Runs `body` against a fresh private server, always stopped afterwards.
    static func withServer<T>(sampleRate: Int = 48_000, _ body: (JACKServer) async throws -> T) async throws -> T {
        let server = try JACKServer.start(sampleRate: sampleRate)
        defer { server.stop() }
        return try await body(server)
    }

    static func sine(frequency: Double, level: Double, seconds: Double) -> [UInt8] {
        StereoSignal.sine(frequency: frequency, level: level, seconds: seconds, sampleRate: format.sampleRate)
    }
    static func noise(seconds: Double) -> [UInt8] { StereoSignal.noise(seconds: seconds, sampleRate: format.sampleRate) }
    static func copiedRuns(_ recorded: [(Int16, Int16)], of signal: [(Int16, Int16)]) -> (matched: Int, stray: Int) {
        StereoSignal.copiedRuns(recorded, of: signal)
    }
    static func frames(_ bytes: [UInt8]) -> [(Int16, Int16)] { StereoSignal.frames(bytes) }
}
#endif
