import Foundation
import TapedeckTesting
import Testing

@Suite("Private PulseAudio daemon fixture", .serialized)
struct PulseAudioDaemonTests {
    @Test("starts with a null sink on a private socket, answers pactl, and stops by its pid")
    func lifecycle() throws {
        let daemon = try PulseAudioDaemon.start()
        #expect(daemon.isRunning)
        #expect(FileManager.default.fileExists(atPath: daemon.runtimeDirectory.appendingPathComponent("native").path))
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["pactl", "--server", daemon.serverAddress, "list", "short", "sinks"]
        let out = Pipe()
        p.standardOutput = out
        p.standardError = FileHandle.nullDevice
        try p.run()
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        #expect(p.terminationStatus == 0 && text.contains("null"), "\(text)")
        daemon.stop()
        #expect(!daemon.isRunning)
        #expect(!FileManager.default.fileExists(atPath: daemon.runtimeDirectory.path))
    }
}
