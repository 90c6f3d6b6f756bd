#if Streams
import Foundation
import Logging
import Testing
import TapedeckCore
import TapedeckStream
import TapedeckTesting

/// The stream and RTP backends keep the contract of every capture backend (`BackendConformance`):
/// an HTTP server of the test's that sends an endless WAV stream as fast as it is read, and
/// `ffmpeg -re -f rtp` sending L16 to loopback.
@Suite(.serialized) struct NetworkConformanceTests {
    static let format = AudioFormat(sampleRate: 48_000, channels: 2, sampleFormat: .s16)

    /// An endless WAV stream of a frame counter to every connection (test side).
    static let wavServer = """
    import socket, struct, sys, threading
    block = b"".join(struct.pack("<hh", k, k) for k in range(-16384, 16384))
    header = b"RIFF" + struct.pack("<I", 0xFFFFFFFF) + b"WAVEfmt " + struct.pack("<IHHIIHH", 16, 1, 2, 48000, 192000, 4, 16) + b"data" + struct.pack("<I", 0xFFFFFFFF)
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(8)
    def serve(c):
        try:
            c.recv(65536); c.sendall(b"HTTP/1.0 200 OK\\r\\nContent-Type: audio/wav\\r\\n\\r\\n" + header)
            while True: c.sendall(block)
        except OSError: pass
    while True:
        c, _ = s.accept(); threading.Thread(target=serve, args=(c,), daemon=True).start()
    """

    static func make(_ plugin: CapturePlugin, _ overrides: [String: String]) throws -> any CaptureBackend {
        try plugin.make(try PluginSettings.resolving(plugin.settings, overrides: overrides),
                        PluginContext(logger: Logger(label: "network-conformance"), defaultLibraryURL: FileManager.default.temporaryDirectory,
                                      section: "capture.\(plugin.name)"))
    }

    static func folder() throws -> URL {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("network-conformance-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return folder
    }

    @Test func httpStream() async throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let script = folder.appendingPathComponent("server.py")
        try Self.wavServer.write(to: script, atomically: true, encoding: .utf8)
        let port = try S3Server.freePort()
        let server = try ChildProcess.start(["python3", script.path, String(port)], environment: ProcessInfo.processInfo.environment,
                                            output: folder.appendingPathComponent("server.log").path)
        defer { ChildProcess.terminate(server, SIGKILL) }
        var tries = 0
        while !S3Server.answers(port) && tries < 200 {
            tries += 1
            try await Task.sleep(for: .milliseconds(25))
        }
        let backend = try Self.make(StreamBackend.capture, ["device": "http://127.0.0.1:\(port)/counter.wav"])
        try await BackendConformance.capture(backend, format: Self.format, frames: 48_001)
    }

    @Test func rtp() async throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let port = try S3Server.freePort()
        let sender = try ChildProcess.start(["ffmpeg", "-nostdin", "-loglevel", "error", "-re", "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000",
                                             "-ac", "2", "-c:a", "pcm_s16be", "-f", "rtp", "rtp://127.0.0.1:\(port)"],
                                            environment: ProcessInfo.processInfo.environment, output: folder.appendingPathComponent("ffmpeg.log").path)
        defer { ChildProcess.terminate(sender, SIGKILL) }
        let backend = try Self.make(RTPBackend.capture, ["device": "rtp://127.0.0.1:\(port)", "encoding": "L16/48000/2", "sap": "127.0.0.1:\(try S3Server.freePort())"])
        try await BackendConformance.capture(backend, format: Self.format, frames: 9_600)
    }
}
#endif
