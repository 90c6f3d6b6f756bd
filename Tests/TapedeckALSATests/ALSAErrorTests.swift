#if ALSA
import Logging
import Testing
@testable import TapedeckALSA
import TapedeckCore
#if canImport(Glibc)
import Glibc
#endif

/// Errors and listings that need no sound server.
@Suite("ALSA errors and devices")
struct ALSAErrorTests {
    static let format = AudioFormat(sampleRate: 48_000, channels: 2, sampleFormat: .s16)

    @Test func unknownDeviceIsUnavailableAndNamed() throws {
        let error = #expect(throws: TapedeckError.self) {
            try ALSACaptureBackend(device: "tapedeck-no-such-pcm").openCaptureStream(format: Self.format, options: CaptureOptions(periodFrames: 256))
        }
        #expect(error?.code == .deviceUnavailable)
        #expect(error?.message.contains("tapedeck-no-such-pcm") == true)
        #expect(error?.message.contains("tapedeck devices --backend alsa") == true)
    }

    @Test func refusedFormatSaysWhatTheDeviceCanDo() throws {
        // A real refusal: ALSA's `linear` plugin converts between integer formats only.
        let definitions = #"pcm.tapedeck_ints { type linear slave { pcm "null" format S16_LE } }"#
        let f32 = AudioFormat(sampleRate: 48_000, channels: 2, sampleFormat: .f32)
        let error = #expect(throws: TapedeckError.self) {
            try ALSAPlaybackBackend(device: "tapedeck_ints", definitions: definitions).openPlaybackStream(format: f32, options: PlaybackOptions(periodFrames: 256))
        }
        #expect(error?.code == .unsupportedFormat)
        let message = error?.message ?? ""
        #expect(message.contains("tapedeck_ints"))
        #expect(message.contains("sample formats: s16, s24, s32"), "\(message)")
        #expect(message.contains("Hz") && message.contains("channels"))
        #expect(message.contains("plughw"))
        // The same device accepts an integer format exactly.
        let stream = try ALSACaptureBackend(device: "tapedeck_ints", definitions: definitions)
            .openCaptureStream(format: Self.format, options: CaptureOptions(periodFrames: 256))
        #expect(stream.format == Self.format)
        stream.close()
    }

    /// No device can be made busy without hardware here, so the mapping itself is checked.
    @Test func busyDeviceMessage() {
        let error = ALSAPCMSetup.openError(-EBUSY, device: "hw:CARD=USB,DEV=0", direction: "capture")
        #expect(error.code == .deviceUnavailable)
        #expect(error.systemCode == EBUSY)
        #expect(error.message.contains("hw:CARD=USB,DEV=0 is in use by another program"))
        #expect(error.message.contains("dsnoop"))
    }

    @Test func devicesIncludeDefaultAndPulse() throws {
        let capture = try ALSACaptureBackend().devices()
        let playback = try ALSAPlaybackBackend().devices()
        #expect(capture.contains { $0.name == "default" && $0.isDefault && $0.canCapture })
        #expect(capture.contains { $0.name == "pulse" && $0.canCapture && $0.canPlay })
        #expect(playback.contains { $0.name == "pulse" && $0.canPlay })
        #expect(!capture.contains { $0.description.contains("\n") })
    }

    @Test func alsaMessagesGoToTheLogger() throws {
        let store = CollectingLogHandler.Store()
        let logger = Logger(label: "alsa-test") { _ in CollectingLogHandler(store: store) }
        let backend = ALSACaptureBackend(device: "tapedeck-missing-for-log", logger: logger)
        _ = try? backend.openCaptureStream(format: Self.format, options: CaptureOptions(periodFrames: 256))
        #expect(store.messages.withLock { $0 }.contains { $0.contains("tapedeck-missing-for-log") })
    }

    @Test func pluginDeclaresItsSettings() throws {
        #expect(ALSAPlugin.capture.name == "alsa" && ALSAPlugin.playback.name == "alsa")
        let settings = try PluginSettings.resolving(ALSAPlugin.capture.settings, overrides: ["device": "pulse", "periods": "8"])
        #expect(ALSASettings(settings) == ALSASettings(device: "pulse", periods: 8))
        #expect(throws: TapedeckError.self) { try PluginSettings.resolving(ALSAPlugin.capture.settings, overrides: ["periods": "64"]) }
    }
}
#endif
