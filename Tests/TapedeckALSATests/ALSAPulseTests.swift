#if ALSA
import Foundation
import Logging
import Synchronization
import Testing
import TapedeckALSA
import TapedeckCore
import TapedeckTesting
#if canImport(Glibc)
import Glibc
#endif

/// Everything that needs a sound server: a private PulseAudio daemon (null sink `null`, its
/// monitor `null.monitor`) reached through ALSA's `pulse` PCM. The pulse plugin reads
/// `PULSE_SERVER` from this process's environment, so these tests run one at a time.
@Suite("ALSA through a private PulseAudio daemon", .serialized)
struct ALSAPulseTests {
    static let format = AudioFormat(sampleRate: 48_000, channels: 2, sampleFormat: .s16)
    /// PCMs pinned to the null sink and its monitor (the server still comes from `PULSE_SERVER`).
    static let definitions = """
        pcm.tapedeck_sink { type pulse device "null" }
        pcm.tapedeck_monitor { type pulse device "null.monitor" }
        """

    /// Starts a daemon and points ALSA's `pulse` plugin at it.
    static func startDaemon() async throws -> PulseAudioDaemon {
        let daemon = try await PulseAudioDaemon.startAsync()
        setenv("PULSE_SERVER", daemon.serverAddress, 1)
        return daemon
    }

    @Test func captureConformance() async throws {
        let daemon = try await Self.startDaemon()
        defer { daemon.stop() }
        try await BackendConformance.capture(ALSACaptureBackend(device: "pulse"), format: Self.format, frames: 9_600)
    }

    @Test func playbackConformance() async throws {
        let daemon = try await Self.startDaemon()
        defer { daemon.stop() }
        try await BackendConformance.playback(ALSAPlaybackBackend(device: "pulse"), format: Self.format, frames: 9_600)
    }

    /// Captures from `backend` on its own thread while `play` runs on another, until the playing
    /// has finished and `seconds` more have been captured (at least `seconds` in all), so the
    /// check does not depend on how long either side takes to start on a loaded machine.
    static func capture(_ backend: ALSACaptureBackend, seconds: Double,
                        while play: @escaping @Sendable () throws -> Void) async throws -> S16Audio {
        let format = Self.format
        let finished = PlayFinished()
        async let captured: [UInt8] = onThread("capture") {
            let stream = try backend.openCaptureStream(format: format, options: CaptureOptions(periodFrames: 480))
            defer { stream.close() }
            var out: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: stream.periodFrames * format.bytesPerFrame)
            let tail = Int(seconds * Double(format.sampleRate)) * format.bytesPerFrame
            var stopAt = Int.max
            while out.count < max(tail, stopAt) {
                let r = try buffer.withUnsafeMutableBytes { try stream.read(into: $0.baseAddress!, maxFrames: stream.periodFrames) }
                out += [UInt8](repeating: 0, count: Int(r.lostFramesBefore) * format.bytesPerFrame)
                out += buffer[0..<(r.frames * format.bytesPerFrame)]
                if stopAt == .max && finished.value { stopAt = out.count + format.sampleRate / 2 * format.bytesPerFrame }
            }
            return out
        }
        try await Task.sleep(for: .milliseconds(200))
        try await onThread("play", play)
        finished.set()
        return S16Audio(bytes: try await captured, channels: format.channels, sampleRate: format.sampleRate)
    }

    static func expectSine(_ audio: S16Audio) {
        guard let onset = audio.firstFrame(above: 0.05) else {
            Issue.record("no signal was captured")
            return
        }
        let skip = onset + audio.sampleRate / 5
        let (frequency, peak) = analyze(audio.channel0(from: skip, count: audio.sampleRate / 2), sampleRate: audio.sampleRate)
        #expect(abs(frequency - 1000) <= 20, "dominant frequency \(frequency) Hz")
        #expect(abs(peak - 0.5) <= 0.05, "peak level \(peak)")
    }

    @Test func alsaPlaybackIsCapturedByALSACapture() async throws {
        let daemon = try await Self.startDaemon()
        defer { daemon.stop() }
        let format = Self.format
        let tone = sine(frames: format.sampleRate * 3 / 2, channels: 2, sampleRate: format.sampleRate)
        let audio = try await Self.capture(ALSACaptureBackend(device: "tapedeck_monitor", definitions: Self.definitions), seconds: 2.5) {
            let stream = try ALSAPlaybackBackend(device: "tapedeck_sink", definitions: Self.definitions)
                .openPlaybackStream(format: format, options: PlaybackOptions(periodFrames: 480))
            defer { stream.close() }
            var offset = 0
            while offset < tone.count {
                let n = min(stream.periodFrames * format.bytesPerFrame, tone.count - offset)
                _ = try tone.withUnsafeBytes { try stream.write($0.baseAddress! + offset, frames: n / format.bytesPerFrame) }
                offset += n
            }
            try stream.drain()
        }
        Self.expectSine(audio)
    }

    @Test func paplayIsCapturedByALSACapture() async throws {
        let daemon = try await Self.startDaemon()
        defer { daemon.stop() }
        let wav = daemon.runtimeDirectory.appendingPathComponent("tone.wav")
        try run("/usr/bin/sox", ["-n", "-r", "48000", "-c", "2", "-b", "16", wav.path, "synth", "1.5", "sine", "1000", "vol", "0.5"])
        let env = daemon.environment
        let audio = try await Self.capture(ALSACaptureBackend(device: "tapedeck_monitor", definitions: Self.definitions), seconds: 2.5) {
            try run("/usr/bin/paplay", ["--device=null", wav.path], environment: env)
        }
        Self.expectSine(audio)
    }

    @Test func timelineStaysTrueWhenReadsAreLate() async throws {
        let daemon = try await Self.startDaemon()
        defer { daemon.stop() }
        let format = Self.format
        let (accounted, wall, lost) = try await onThread {
            let stream = try ALSACaptureBackend(device: "pulse", periods: 2).openCaptureStream(format: format, options: CaptureOptions(periodFrames: 256))
            defer { stream.close() }
            var buffer = [UInt8](repeating: 0, count: stream.periodFrames * format.bytesPerFrame)
            var accounted: Int64 = 0, lost: Int64 = 0
            var start: Date?
            func readFor(_ seconds: Double) throws {
                let until = Date().addingTimeInterval(seconds)
                while Date() < until {
                    let r = try buffer.withUnsafeMutableBytes { try stream.read(into: $0.baseAddress!, maxFrames: stream.periodFrames) }
                    if start == nil { start = Date().addingTimeInterval(-Double(r.frames) / Double(format.sampleRate)) }
                    accounted += Int64(r.frames) + r.lostFramesBefore
                    lost += r.lostFramesBefore
                }
            }
            try readFor(0.5)
            Thread.sleep(forTimeInterval: 0.7)  // a stalled reader: the device overruns
            try readFor(1.0)
            return (accounted, Date().timeIntervalSince(start!), lost)
        }
        let expected = wall * Double(format.sampleRate)
        #expect(abs(Double(accounted) - expected) <= 0.05 * expected + 4_800,
                "frames delivered + estimated lost (\(accounted), of which \(lost) lost) vs wall time × rate (\(Int(expected)))")
    }

    @Test func killingTheServerEndsRecordingWithDeviceLost() async throws {
        let daemon = try await Self.startDaemon()
        defer { daemon.stop() }
        let format = Self.format
        let sink = MemoryTakeSink()
        let engine = RecordingEngine(backend: ALSACaptureBackend(device: "pulse"),
                                     settings: RecordingSettings(format: format, periodFrames: 480), logger: Logger(label: "test"))
        _ = try await engine.open()
        let recording = Task { try await engine.record { MemoryTakeWriter(sink: sink, format: $0) } }
        while engine.takeProgress().frames < 24_000 { try await Task.sleep(for: .milliseconds(10)) }
        let before = Int64(sink.bytes.count / format.bytesPerFrame)
        let killed = ContinuousClock.now
        daemon.kill()
        let result = try await recording.value
        // Measured on the device thread, not when this task resumes (which a loaded test run delays).
        let elapsed = killed.duration(to: result.captureEnded)
        guard case .deviceLost(let error) = result.end else {
            Issue.record("expected .deviceLost, got \(result.end)")
            return
        }
        #expect(error.code == .deviceLost)
        #expect(error.message.contains("pulse"))
        #expect(elapsed < .seconds(2), "device loss noticed after \(elapsed)")
        #expect(result.frames >= before && before > 0)
        #expect(Int(result.frames) * format.bytesPerFrame == sink.bytes.count)
        #expect(sink.snapshot.finished)
    }
}

/// Runs a program to completion; throws when it fails.
func run(_ path: String, _ arguments: [String], environment: [String: String] = [:]) throws {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: path)
    p.arguments = arguments
    p.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
    try p.run()
    p.waitUntilExit()
    guard p.terminationStatus == 0 else {
        throw TapedeckError(.internalError, "\(path) \(arguments.joined(separator: " ")) exited with \(p.terminationStatus)")
    }
}

/// Set once the playing side of a loopback test has finished.
final class PlayFinished: Sendable {
    private let flag = Mutex(false)
    var value: Bool { flag.withLock { $0 } }
    func set() { flag.withLock { $0 = true } }
}
#endif
