import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A receiver of alerts on loopback, for tests: an HTTP server that keeps every POST, or an SMTP
/// server (python's aiosmtpd) that asks for a username and password and keeps every mail. Each
/// runs as a child process the receiver starts, stops and can start again on the same port (a
/// route that was down and is back). Every member blocks briefly (starting waits for the port).
public final class AlertReceiver: @unchecked Sendable {
    public enum Kind: Sendable {
        case http
        /// Asks for AUTH with these credentials; no TLS (loopback only).
        case smtp(user: String, password: String)
    }

    public let kind: Kind
    /// The port it listens on (kept across ``stop()`` and ``start()``).
    public private(set) var port: Int = 0
    private let folder: URL
    private var pid: pid_t = 0

    /// Starts it on a free port.
    public init(_ kind: Kind) throws {
        self.kind = kind
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("alert-receiver-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try Self.script.write(to: folder.appendingPathComponent("receiver.py"), atomically: true, encoding: .utf8)
        try start()
    }

    deinit { stop() }

    /// The URL to POST to (``Kind/http``), path `/hook`.
    public var url: String { "http://127.0.0.1:\(port)/hook" }

    /// Starts it (again, on the same port after ``stop()``).
    public func start() throws {
        guard pid == 0 else { return }
        let portFile = folder.appendingPathComponent("port")
        let log = folder.appendingPathComponent("received.jsonl").path
        var arguments = ["python3", folder.appendingPathComponent("receiver.py").path]
        switch kind {
        case .http: arguments += ["http", portFile.path, log]
        case .smtp(let user, let password): arguments += ["smtp", portFile.path, log, user, password]
        }
        if port != 0 { arguments.append(String(port)) }
        (pid, port) = try ChildProcess.startServer(arguments, portFile: portFile, output: folder.appendingPathComponent("output.txt"), what: "The alert receiver")
    }

    /// Stops it: connections are refused until ``start()``.
    public func stop() {
        guard pid != 0 else { return }
        ChildProcess.terminate(pid, SIGTERM)
        pid = 0
    }

    /// What it received, oldest first: for HTTP `path`, `headers` (names in lower case) and
    /// `body`; for SMTP `from`, `to`, `data` and `authenticated`.
    public func received() -> [[String: Any]] {
        guard let text = try? String(contentsOf: folder.appendingPathComponent("received.jsonl"), encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { line in
            (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
        }
    }

    /// The bodies of the POSTs received, parsed as JSON objects.
    public func jsonBodies() -> [[String: Any]] {
        received().compactMap { ($0["body"] as? String).flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] } }
    }

    /// Stops it and removes its folder.
    public func close() {
        stop()
        try? FileManager.default.removeItem(at: folder)
    }

    private static let script = #"""
#!/usr/bin/env python3
"""Receivers for the alert tests, on loopback; each writes its port to PORTFILE once listening.

    alert_receivers.py http PORTFILE LOG [PORT]   every POST as one JSON line in LOG:
                                                   {"path", "headers", "body"}; answers 200
                                                   (400 to a path ending in /refuse)
    alert_receivers.py smtp PORTFILE LOG USER PASSWORD [PORT]
                                                   an SMTP server (aiosmtpd) that asks for
                                                   AUTH PLAIN/LOGIN with USER and PASSWORD (no
                                                   TLS: loopback only); every mail as one JSON
                                                   line in LOG: {"from", "to", "data"}
"""
import json, os, sys, threading


def write_port(portfile, port):
    tmp = portfile + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(port))
    os.rename(tmp, portfile)


def append(log, record):
    with open(log, "a") as f:
        f.write(json.dumps(record) + "\n")
        f.flush()
        os.fsync(f.fileno())


def http(portfile, log, port=0):
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            length = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(length).decode("utf-8", "replace")
            append(log, {"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}, "body": body})
            refuse = self.path.endswith("/refuse")
            self.send_response(400 if refuse else 200)
            answer = b"no such hook" if refuse else b"ok"
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args):
            pass

    ThreadingHTTPServer.allow_reuse_address = True
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    write_port(portfile, server.server_address[1])
    server.serve_forever()


def smtp(portfile, log, user, password, port=0):
    import socket
    from aiosmtpd.controller import Controller
    from aiosmtpd.smtp import AuthResult

    class Handler:
        async def handle_DATA(self, server, session, envelope):
            append(log, {"from": envelope.mail_from, "to": envelope.rcpt_tos,
                         "data": envelope.content.decode("utf-8", "replace"),
                         "authenticated": bool(session.authenticated)})
            return "250 OK"

    def authenticator(server, session, envelope, mechanism, auth_data):
        ok = auth_data.login.decode() == user and auth_data.password.decode() == password
        return AuthResult(success=ok)

    if port == 0:
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
    controller = Controller(Handler(), hostname="127.0.0.1", port=port, authenticator=authenticator,
                            auth_required=True, auth_require_tls=False)
    controller.start()
    write_port(portfile, port)
    threading.Event().wait()


if __name__ == "__main__":
    kind = sys.argv[1]
    if kind == "http":
        http(sys.argv[2], sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 0)
    else:
        smtp(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], int(sys.argv[6]) if len(sys.argv) > 6 else 0)
"""#
}
