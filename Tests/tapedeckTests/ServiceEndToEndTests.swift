import Foundation
import Synchronization
import TapedeckTesting
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `record` under systemd (`Type=notify`), with the test as the service manager: a Unix datagram
/// socket of its own as `NOTIFY_SOCKET`, no systemd needed. And `tapedeck service print`.
@Suite("a recorder run as a systemd service", .endToEnd, .serialized)
struct ServiceEndToEndTests {
    @Test("READY=1 once audio flows, WATCHDOG=1 at the interval while it flows, none once the device hangs")
    func watchdog() async throws {
        let socket = try NotifySocket()
        defer { socket.close() }
        var cli = try CLIHarness()
        defer { try? FileManager.default.removeItem(at: cli.library) }
        // A watchdog of 0.4 s: pings every 0.2 s while frames flow.
        cli.extraEnvironment = ["NOTIFY_SOCKET": socket.path, "WATCHDOG_USEC": "400000"]
        // The null device hangs after one second of audio (48 kHz), as a driver that stops answering.
        let (p, out, err) = try cli.start(["record", "--set", "capture.null.freeze-at-frame=48000", "30s"])
        defer {
            try? FileManager.default.removeItem(at: out)
            try? FileManager.default.removeItem(at: err)
        }
        let ready = try await CLIHarness.wait(timeout: 30) { socket.messages.contains { $0.text.contains("READY=1") } }
        #expect(ready, "no READY=1; stderr: \((try? String(contentsOf: err, encoding: .utf8)) ?? "")")
        // The device hangs about a second after the first frame; then 3 s with no audio.
        try await Task.sleep(for: .seconds(4))
        let stillRunning = p.isRunning
        kill(p.processIdentifier, SIGKILL)
        try await CLIHarness.waitForExit(p)
        #expect(stillRunning, "a recording whose device hangs does not end by itself: only its watchdog tells")

        let messages = socket.messages
        let readyAt = try #require(messages.first { $0.text.contains("READY=1") }).at
        #expect(messages.first?.text.contains("READY=1") == true, "the first message is READY=1: \(messages.map(\.text))")
        #expect(messages.first { $0.text.contains("READY=1") }?.text.contains("STATUS=Recording Session 1/Take 1") == true)
        let pings = messages.filter { $0.text == "WATCHDOG=1" }.map(\.at)
        #expect(pings.count >= 3, "pings while audio flowed: \(pings.count)")
        // At the interval while audio flows: no two pings further apart than two intervals.
        for (a, b) in zip(pings, pings.dropFirst()) {
            #expect(b - a <= 0.8, "pings \(String(format: "%.2f", b - a)) s apart")
        }
        // And none once the device hangs: the last one came within the second of audio, and
        // none in the seconds after.
        let last = try #require(pings.last)
        #expect(last - readyAt <= 1.0 + 0.8, "the last ping came \(last - readyAt) s after READY=1")
        #expect(socket.now - last >= 2.0, "pings went on after the device hung")
    }

    @Test("a resuming run whose device is gone keeps the watchdog fed while it tries the device, and says it waits")
    func resumeWaits() async throws {
        let socket = try NotifySocket()
        defer { socket.close() }
        var cli = try CLIHarness()
        defer { try? FileManager.default.removeItem(at: cli.library) }
        // A 3 s watchdog (pings every 1.5 s); the device goes after 0.5 s of audio and is back 4 s later.
        cli.extraEnvironment = ["NOTIFY_SOCKET": socket.path, "WATCHDOG_USEC": "3000000"]
        let r = try await cli.run("record", "--resume", "--set", "capture.null.device-loss-at-frame=24000",
                                  "--set", "capture.null.device-back-after=4", "7s")
        #expect(r.status == 4, "\(r.stderr)")
        let messages = socket.messages
        #expect(messages.contains { $0.text.hasPrefix("STATUS=Waiting for the device, lost at ") }, "\(messages.map(\.text))")
        let pings = messages.filter { $0.text == "WATCHDOG=1" }.map(\.at)
        #expect(pings.count >= 3, "\(messages.map(\.text))")
        for (a, b) in zip(pings, pings.dropFirst()) {
            #expect(b - a < 3.0, "pings \(String(format: "%.2f", b - a)) s apart: systemd would have restarted the recorder")
        }
    }

    @Test("a recording that ends tells STOPPING=1, and no watchdog is pinged without WATCHDOG_USEC")
    func stopping() async throws {
        let socket = try NotifySocket()
        defer { socket.close() }
        var cli = try CLIHarness()
        defer { try? FileManager.default.removeItem(at: cli.library) }
        cli.extraEnvironment = ["NOTIFY_SOCKET": socket.path]
        let r = try await cli.run("record", "1500ms")
        #expect(r.status == 0, "\(r.stderr)")
        let texts = socket.messages.map(\.text)
        #expect(texts.first?.hasPrefix("READY=1\nSTATUS=Recording Session 1/Take 1: ") == true, "\(texts)")
        #expect(texts.last?.hasPrefix("STOPPING=1") == true, "\(texts)")
        #expect(!texts.contains("WATCHDOG=1"))
    }

    @Test("service print writes a notify unit with a watchdog that runs this binary's record, and refuses wrong record options")
    func unitFile() async throws {
        let cli = try CLIHarness()
        defer { try? FileManager.default.removeItem(at: cli.library) }
        let binary = try CLIHarness.binary.resolvingSymlinksInPath().path
        let r = try await cli.run("service", "print", "--config", "Configuration/ci.yaml", "--set", "capture.null.level=0.25 ")
        #expect(r.status == 0, "\(r.stderr)")
        let lines = r.stdout.split(separator: "\n").map(String.init)
        for line in ["Type=notify", "NotifyAccess=main", "WatchdogSec=30", "Restart=always", "SuccessExitStatus=3 4 6 130",
                     "RestartPreventExitStatus=64 78", "WantedBy=default.target"] {
            #expect(lines.contains(line), "no \(line) in:\n\(r.stdout)")
        }
        let root = FileManager.default.currentDirectoryPath
        #expect(lines.contains("ExecStart=\(binary) record --resume --split 1h --config \(root)/Configuration/ci.yaml --set \"capture.null.level=0.25 \""),
                "\(r.stdout)")
        #expect(r.stdout.contains("~/.config/systemd/user/tapedeck.service"))

        let system = try await cli.run("service", "print", "--system", "--user", "recorder", "--watchdog", "0", "--", "--session", "Night 50%", "--split", "30m")
        #expect(system.status == 0, "\(system.stderr)")
        #expect(system.stdout.contains("User=recorder\n") && system.stdout.contains("WantedBy=multi-user.target"))
        #expect(!system.stdout.contains("WatchdogSec"))
        #expect(system.stdout.contains("record --session \"Night 50%%\" --split 30m"), "\(system.stdout)")

        // A run that ends by itself is started again only when it fails.
        let timed = try await cli.run("service", "print", "--", "-d", "1h")
        #expect(timed.stdout.contains("\nRestart=on-failure\n"), "\(timed.stdout)")

        // What the service could not start with is refused now, with record's and config check's words.
        let wrong = try await cli.run("service", "print", "--", "--no-such-option")
        #expect(wrong.status == 64)
        #expect(wrong.stderr.contains("--no-such-option") && wrong.stderr.contains("tapedeck record --help"), "\(wrong.stderr)")
        #expect(wrong.stdout.isEmpty)
        let value = try await cli.run("service", "print", "--", "--split", "banana")
        #expect(value.status == 64 && value.stdout.isEmpty, "\(value.stderr)")
        let setting = try await cli.run("service", "print", "--set", "capture.backend=nosuch")
        #expect(setting.status == 78 && setting.stderr.contains("nosuch") && setting.stdout.isEmpty, "\(setting.stderr)")
    }

    @Test("systemd itself reads the unit without a complaint")
    func systemdReadsIt() async throws {
        let cli = try CLIHarness()
        defer { try? FileManager.default.removeItem(at: cli.library) }
        let r = try await cli.run("service", "print", "--system", "--user", "root")
        #expect(r.status == 0, "\(r.stderr)")
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("unit-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let unit = folder.appendingPathComponent("tapedeck.service")
        try r.stdout.write(to: unit, atomically: true, encoding: .utf8)
        let verify = try await CLIHarness.tool("systemd-analyze", ["verify", "--man=no", unit.path])
        // Units it depends on that this machine lacks (sound.target in a container) are not the unit's fault.
        let complaints = (verify.stdout + verify.stderr).split(separator: "\n").filter { line in
            line.contains("tapedeck.service") && !line.contains("sound.target") && !line.contains("network-online.target")
        }
        #expect(complaints.isEmpty, "systemd-analyze verify: \(verify.stdout) \(verify.stderr)")
    }
}

/// A service manager's end of `NOTIFY_SOCKET`: a Unix datagram socket in the temporary folder
/// that a thread of its own reads, keeping each message with the time it came (seconds on the
/// monotonic clock).
final class NotifySocket: Sendable {
    let path: String
    private let fd: Int32
    private let received = Mutex<[(at: Double, text: String)]>([])
    private let closing = Atomic<Bool>(false)

    init() throws {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("notify-\(UUID().uuidString.prefix(8))").path
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw CLIHarness.CLIError("socket: \(String(cString: strerror(errno)))") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { throw CLIHarness.CLIError("socket path too long: \(path)") }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in raw.copyBytes(from: bytes) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0 else { throw CLIHarness.CLIError("bind \(path): \(String(cString: strerror(errno)))") }
        var timeout = timeval(tv_sec: 0, tv_usec: 100_000)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        Thread.detachNewThread { [self] in self.readLoop() }
    }

    /// Seconds on the monotonic clock, as the messages are stamped.
    var now: Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    var messages: [(at: Double, text: String)] { received.withLock { $0 } }

    private func readLoop() {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !closing.load(ordering: .acquiring) {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n > 0 {
                let text = String(decoding: buffer[0..<n], as: UTF8.self)
                let at = now
                received.withLock { $0.append((at, text)) }
            }
        }
        Glibc.close(fd)
        unlink(path)
    }

    /// Stops reading; the socket is closed and its file removed by the reading thread.
    func close() { closing.store(true, ordering: .releasing) }
}
