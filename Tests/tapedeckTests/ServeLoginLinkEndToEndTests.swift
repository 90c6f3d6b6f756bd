import Foundation
import Testing

/// Logging in from a phone (issue 38, point 6): `serve` prints a one-time login link and its QR
/// code on a terminal; the code, read back by zbar from the screen, opens the page once.
@Suite("serve's one-time login link", .endToEnd, .serialized)
struct ServeLoginLinkEndToEndTests {
    /// The QR code drawn between the link's line and "Press Ctrl-C", as a PBM picture, read by zbarimg.
    static func decode(_ screen: String, in folder: URL) async throws -> String {
        let capture = folder.appendingPathComponent("screen.txt")
        try screen.write(to: capture, atomically: true, encoding: .utf8)
        let script = """
            import sys
            lines = open(sys.argv[1], encoding="utf-8").read().split("\\n")
            start = next(i for i, l in enumerate(lines) if "once=" in l) + 1
            end = next(i for i, l in enumerate(lines) if l.startswith("Press Ctrl-C"))
            rows = []
            for l in lines[start:end]:
                rows += [[c in "█▀" for c in l], [c in "█▄" for c in l]]
            w, scale = max(len(r) for r in rows), 4
            with open(sys.argv[2], "w") as f:
                f.write(f"P1\\n{w * scale} {len(rows) * scale}\\n")
                for r in rows:
                    line = " ".join("1" if v else "0" for v in r + [False] * (w - len(r)) for _ in range(scale))
                    for _ in range(scale): f.write(line + "\\n")
            """
        let picture = folder.appendingPathComponent("code.pbm").path
        let drawn = try await CLIHarness.tool("python3", ["-c", script, capture.path, picture])
        #expect(drawn.status == 0, "\(drawn.stderr)")
        return try await CLIHarness.tool("zbarimg", ["--raw", "-q", picture]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// GET without following redirects: the status and the Set-Cookie header.
    static func open(_ url: String) async throws -> (status: Int, cookie: String) {
        let script = """
            import sys, urllib.request, urllib.error
            class Stay(urllib.request.HTTPRedirectHandler):
                def redirect_request(self, *a, **k): return None
            try:
                r = urllib.request.build_opener(Stay).open(sys.argv[1], timeout=10); print(r.status); print(r.headers.get("Set-Cookie", ""))
            except urllib.error.HTTPError as e:
                print(e.code); print(e.headers.get("Set-Cookie", ""))
            """
        let lines = try await CLIHarness.tool("python3", ["-c", script, url]).stdout.split(separator: "\n", omittingEmptySubsequences: false)
        return (Int(lines.first ?? "") ?? 0, lines.count > 1 ? String(lines[1]) : "")
    }

    @Test("on a terminal, serve with a token prints a login link and its QR code; the code read off the screen logs in once")
    func loginLink() async throws {
        let cli = try CLIHarness()
        let folder = cli.library.appendingPathExtension("login")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let tokenFile = folder.appendingPathComponent("token").path
        let screen = try await PickUpEndToEndTests.Screen(cli, ["serve", "--listen", "127.0.0.1:0", "--require-token", "--token-file", tokenFile])
        let shown = try await screen.wait(for: "Press Ctrl-C")
        #expect(shown.contains("once, within 15 minutes"), "\(shown)")
        let link = try await Self.decode(shown, in: folder)
        #expect(link.range(of: #"^http://127\.0\.0\.1:[0-9]+/login\?once=[0-9a-f]{32}$"#, options: .regularExpression) != nil, "read \(link) off \(shown)")
        #expect(shown.contains(link), "the code holds the link printed above it")
        let token = try String(contentsOfFile: tokenFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let first = try await Self.open(link)
        #expect(first.status == 303 && first.cookie.contains("tapedeck_token=\(token)") && first.cookie.contains("HttpOnly"), "\(first)")
        let again = try await Self.open(link)
        #expect(again.status == 401 && !again.cookie.contains(token), "a link logs in once: \(again)")
        let guessed = try await Self.open(String(link.dropLast(32)) + String(repeating: "0", count: 32))
        #expect(guessed.status == 401)
        // Stopped as a person stops it: a server the test runner's ignored SIGHUP reached through
        // tmux would outlive the tmux server's end.
        try await screen.tmux(["send-keys", "C-c"])
        _ = try await screen.wait(for: "Stopped.")
    }
}
