import Foundation
import TapedeckTesting
import Testing

/// `tapedeck` on a real terminal: tmux gives it a pseudo-terminal of a chosen size, and the
/// screen is read back as a person would see it.
@Suite("terminal end to end", .endToEnd, .serialized)
struct TerminalEndToEndTests {
    /// Runs `tapedeck ARGS` in a fresh tmux server with a `columns`-wide window and returns the
    /// screen and its scrollback once `done` appears on it (or after `timeout` seconds).
    static func screen(_ cli: CLIHarness, _ args: [String], columns: Int, until done: String, timeout: Double = 20) async throws -> String {
        let socket = "tapedeck-\(UUID().uuidString.prefix(8))"
        /// tmux through ``ChildProcess``: the server it starts outlives the client.
        @discardableResult
        func tmux(_ more: [String]) async throws -> String { try await ChildProcess.runAsync(["tmux", "-L", socket] + more).output }
        // The tmux server goes when this returns, before the test does.
        defer { CLIHarness.killTmuxServer(socket) }
        let command = ([try CLIHarness.binary.path] + args).map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }
            .joined(separator: " ") + "; sleep 60"
        let environment = cli.environment.filter { $0.key.hasPrefix("TAPEDECK_") || $0.key == "PATH" || $0.key == "HOME" }
        try await tmux(["new-session", "-d", "-x", String(columns), "-y", "24"]
                       + environment.flatMap { ["-e", "\($0.key)=\($0.value)"] } + ["-e", "TERM=xterm", command])
        var text = ""
        _ = try await CLIHarness.wait(timeout: timeout) {
            text = (try? await tmux(["capture-pane", "-p", "-S", "-200"])) ?? ""
            return text.contains(done)
        }
        return text
    }

    @Test("at 80 columns the meter redraws one row: a 3 s stereo recording leaves no meter rows behind")
    func meterFitsTheTerminal() async throws {
        let cli = try CLIHarness()
        let screen = try await Self.screen(cli, ["record", "-d", "3"], columns: 80, until: "Recorded")
        #expect(screen.contains("Recorded Session 1/Take 1"), "\(screen)")
        let meterRows = screen.split(separator: "\n").filter { $0.contains("●") }
        #expect(meterRows.isEmpty, "meter rows left on screen: \(meterRows)")
    }
}
