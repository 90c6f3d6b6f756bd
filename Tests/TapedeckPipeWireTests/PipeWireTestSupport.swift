#if PipeWire
import Foundation
import Logging
import TapedeckCore
import TapedeckPipeWire
import TapedeckTesting
import Testing

/// Every PipeWire test, one at a time: each starts a bus, a daemon and a session manager and
/// waits for them (blocking), and several at once on a 2-core machine starve the test's own
/// tasks (a recorder that starts reading after the audio it should hear is over).
@Suite(.serialized, .timeLimit(.minutes(2))) enum PipeWireTests {}

/// Backends pointed at a private PipeWire (``PipeWireDaemon``), and running tests against one.
enum PipeWireTestSupport {
    static let format = AudioFormat(sampleRate: 48_000, channels: 2, sampleFormat: .s16)
    static let logger = Logger(label: "pipewire-tests")

    static func context(section: String) -> PluginContext {
        PluginContext(logger: logger, defaultLibraryURL: URL(fileURLWithPath: NSTemporaryDirectory()), section: section)
    }

    static func capture(_ daemon: PipeWireDaemon, device: String = "", node: String = "tapedeck") throws -> any CaptureBackend {
        let settings = try PluginSettings.resolving(PipeWireBackend.capture.settings,
                                                    overrides: ["remote": daemon.socket, "device": device, "node-name": node],
                                                    section: "capture.pipewire")
        return try PipeWireBackend.capture.make(settings, context(section: "capture.pipewire"))
    }

    static func playback(_ daemon: PipeWireDaemon, device: String = "", node: String = "tapedeck") throws -> any PlaybackBackend {
        let settings = try PluginSettings.resolving(PipeWireBackend.playback.settings,
                                                    overrides: ["remote": daemon.socket, "device": device, "node-name": node],
                                                    section: "playback.pipewire")
        return try PipeWireBackend.playback.make(settings, context(section: "playback.pipewire"))
    }

    /// Runs `body` against a fresh private PipeWire, always stopped afterwards. Starting and
    /// stopping block (programs to start, sockets to poll), so they run on a thread of their own,
    /// never holding one of the few threads the other tests' tasks need.
    static func withDaemon<T>(_ body: (PipeWireDaemon) async throws -> T) async throws -> T {
        let daemon = try await offPool { try PipeWireDaemon.start() }
        do {
            let result = try await body(daemon)
            try await offPool { daemon.stop() }
            return result
        } catch {
            try? await offPool { daemon.stop() }
            throw error
        }
    }

    /// Runs blocking `work` on a new thread and waits for it without blocking a task thread.
    static func offPool<R: Sendable>(_ work: @escaping @Sendable () throws -> R) async throws -> R {
        try await withCheckedThrowingContinuation { continuation in
            Thread { continuation.resume(with: Result { try work() }) }.start()
        }
    }

    /// Waits (polling) until `condition` holds, for at most `seconds`. - Throws: on timeout.
    static func waitUntil(seconds: Double = 20, _ what: String, _ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while !condition() {
            guard ContinuousClock.now < deadline else { throw PipeWireDaemonError(what) }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}
#endif
