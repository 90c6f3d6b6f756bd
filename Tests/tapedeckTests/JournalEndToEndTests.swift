import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Under systemd, stderr is the journal and `JOURNAL_STREAM` says so: messages then go to the
/// journal's socket as entries with fields. Here the socket is a test-owned datagram socket, read
/// by a small python receiver that decodes the native protocol on its own.
@Suite("journal entries with fields", .endToEnd, .serialized)
struct JournalEndToEndTests {
    /// A datagram socket in a new folder; each entry it receives, decoded, as a JSON line in `entries`.
    final class Receiver {
        let folder: URL
        let socket: String
        let entries: URL
        let process: Process

        init() throws {
            folder = FileManager.default.temporaryDirectory.appendingPathComponent("journal-\(UUID().uuidString.prefix(8))")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            socket = folder.appendingPathComponent("socket").path
            entries = folder.appendingPathComponent("entries.jsonl")
            let script = """
                import json, socket, struct, sys
                s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
                s.bind(sys.argv[1])
                out = open(sys.argv[2], "a")
                while True:
                    data, i, entry = s.recv(1 << 20), 0, {}
                    while i < len(data):
                        end = data.index(b"\\n", i)
                        line = data[i:end]
                        if b"=" in line:
                            key, value = line.split(b"=", 1)
                            i = end + 1
                        else:
                            key = line
                            size = struct.unpack("<Q", data[end + 1:end + 9])[0]
                            value = data[end + 9:end + 9 + size]
                            assert data[end + 9 + size:end + 10 + size] == b"\\n"
                            i = end + 10 + size
                        entry[key.decode()] = value.decode()
                    out.write(json.dumps(entry) + "\\n"); out.flush()
                """
            process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["python3", "-c", script, socket, entries.path]
            // Not the test runner's own output: a receiver left behind must not hold it open.
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            let deadline = Date().addingTimeInterval(10)
            while !FileManager.default.fileExists(atPath: socket) && Date() < deadline { Thread.sleep(forTimeInterval: 0.02) }
        }

        func received() -> [[String: String]] {
            let text = (try? String(contentsOf: entries, encoding: .utf8)) ?? ""
            return text.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: String] }
        }

        func stop() {
            // SIGKILL: a runner started with SIGTERM ignored passes that on to the receiver.
            if process.processIdentifier > 0 { kill(process.processIdentifier, SIGKILL) }
            if process.isRunning { process.waitUntilExit() }
            try? FileManager.default.removeItem(at: folder)
        }

        deinit { stop() }
    }

    /// `cli` with stderr (its own file) announced as the journal's stream, and the socket `receiver`'s.
    static func journaled(_ cli: CLIHarness, _ receiver: Receiver) -> CLIHarness {
        var journaled = cli
        journaled.extraEnvironment["TAPEDECK_JOURNAL_SOCKET"] = receiver.socket
        // The stream systemd gives a service: stderr's device and inode in JOURNAL_STREAM.
        journaled.launcher = ["sh", "-c", #"export JOURNAL_STREAM=$(stat -L -c '%d:%i' /proc/self/fd/2); exec "$@""#, "sh"]
        return journaled
    }

    @Test("a run cut short says so in an entry with the take's, session's and run's ids and an EVENT; an error is an entry at error priority; stderr stays empty")
    func fields() async throws {
        let receiver = try Receiver()
        defer { receiver.stop() }
        let cli = try CLIHarness()
        defer { try? FileManager.default.removeItem(at: cli.library) }
        let journal = Self.journaled(cli, receiver)
        let run = try await journal.run("record", "--session", "Logged", "--split", "1s", "--set", "capture.null.device-loss-at-frame=120000", "4s")
        #expect(run.status == 4, "\(run.stderr)")
        #expect(run.stderr.isEmpty, "messages went to the journal, not stderr: \(run.stderr)")
        let entries = receiver.received()
        let cut = try #require(entries.first { $0["EVENT"] == "take-interrupted" }, "\(entries)")
        #expect(cut["PRIORITY"] == "4" && cut["SYSLOG_IDENTIFIER"] == "tapedeck", "\(cut)")
        #expect(cut["MESSAGE"]?.contains("Everything captured before that was kept") == true, "\(cut)")
        // The ids are those of the take the run ended in, as `list --json` gives them.
        let listed = try await cli.run("list", "--json")
        let sessions = try #require(try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [[String: Any]])
        let takes = try #require(sessions.first?["takes"] as? [[String: Any]])
        #expect(takes.count == 3, "\(listed.stdout)")
        #expect(cut["TAKE_ID"] == takes.last?["id"] as? String, "\(cut) \(takes)")
        #expect(cut["SESSION_ID"] == sessions.first?["id"] as? String)
        let run0 = (takes.last?["run"] as? [String: Any])?["id"] as? String
        #expect(cut["RUN_ID"] != nil && cut["RUN_ID"] == run0, "\(cut) \(takes.last ?? [:])")

        let missing = try await journal.run("show", "Nothing/here")
        #expect(missing.status == 66 && missing.stderr.isEmpty, "\(missing.stderr)")
        let error = try #require(receiver.received().first { $0["EVENT"] == "error-not-found" }, "\(receiver.received())")
        #expect(error["PRIORITY"] == "3" && error["MESSAGE"]?.contains("Nothing") == true, "\(error)")

        // Not the journal's stream (a pipe or a file of its own): stderr as always.
        var elsewhere = cli
        elsewhere.extraEnvironment["TAPEDECK_JOURNAL_SOCKET"] = receiver.socket
        elsewhere.extraEnvironment["JOURNAL_STREAM"] = "1:1"
        let plain = try await elsewhere.run("show", "Nothing/here")
        #expect(plain.status == 66 && plain.stderr.contains("Nothing"), "\(plain.stderr)")
    }
}
