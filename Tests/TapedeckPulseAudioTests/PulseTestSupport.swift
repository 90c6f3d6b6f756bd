#if PulseAudio
import Foundation
import Logging
import TapedeckCore
import TapedeckPulseAudio
import TapedeckTesting

/// Helpers shared by the PulseAudio tests: backends pointed at a private daemon, a sine, timing.
enum PulseTestSupport {
    static let format = AudioFormat(sampleRate: 48_000, channels: 2, sampleFormat: .s16)
    static let logger = Logger(label: "pulse-tests")

    static func context(section: String = "") -> PluginContext {
        PluginContext(logger: logger, defaultLibraryURL: URL(fileURLWithPath: NSTemporaryDirectory()), section: section)
    }

    static func capture(server: String, device: String = "null.monitor") throws -> any CaptureBackend {
        let settings = try PluginSettings.resolving(PulsePlugin.capture.settings,
                                                    overrides: ["server": server, "device": device], section: "capture.pulse")
        return try PulsePlugin.capture.make(settings, context(section: "capture.pulse"))
    }

    static func playback(server: String, device: String = "null") throws -> any PlaybackBackend {
        let settings = try PluginSettings.resolving(PulsePlugin.playback.settings,
                                                    overrides: ["server": server, "device": device], section: "playback.pulse")
        return try PulsePlugin.playback.make(settings, context(section: "playback.pulse"))
    }

    /// Runs `body` against a fresh private daemon, always stopped (by pid) afterwards.
    static func withDaemon<T>(_ body: (PulseAudioDaemon) async throws -> T) async throws -> T {
        let daemon = try await PulseAudioDaemon.startAsync()
        defer { daemon.stop() }
        return try await body(daemon)
    }

    /// Interleaved s16 stereo sine.
    static func sine(frequency: Double, level: Double, seconds: Double) -> [UInt8] {
        let frames = Int(seconds * Double(format.sampleRate))
        var bytes = [UInt8](repeating: 0, count: frames * format.bytesPerFrame)
        bytes.withUnsafeMutableBytes { raw in
            for i in 0..<frames {
                let v = Int16((level * 32767 * sin(2 * .pi * frequency * Double(i) / Double(format.sampleRate))).rounded())
                raw.storeBytes(of: v.littleEndian, toByteOffset: i * 4, as: Int16.self)
                raw.storeBytes(of: v.littleEndian, toByteOffset: i * 4 + 2, as: Int16.self)
            }
        }
        return bytes
    }

    /// Channel 0 of interleaved s16 stereo, as -1...1.
    static func leftChannel(_ bytes: [UInt8]) -> [Double] {
        bytes.withUnsafeBytes { raw in
            (0..<(raw.count / 4)).map { Double(Int16(littleEndian: raw.load(fromByteOffset: $0 * 4, as: Int16.self))) / 32768 }
        }
    }

    /// Frequency from the median interval between rising zero crossings, so that a gap in the
    /// tone (the sink playing silence while a loaded machine's player catches up) does not pull it
    /// down, as dividing the count of crossings by their span would.
    static func frequency(_ samples: [Double], sampleRate: Int) -> Double {
        var crossings: [Double] = []
        for i in 1..<samples.count where samples[i - 1] < 0 && samples[i] >= 0 {
            let t = Double(i - 1) + samples[i - 1] / (samples[i - 1] - samples[i])
            crossings.append(t)
        }
        guard crossings.count > 2 else { return 0 }
        let periods = zip(crossings.dropFirst(), crossings).map { $0 - $1 }.sorted()
        return Double(sampleRate) / periods[periods.count / 2]
    }

    static func seconds(since start: ContinuousClock.Instant) -> Double {
        let d = ContinuousClock.now - start
        return Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
    }
}
#endif
