public import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// An RFC 3161 time-stamping authority on loopback, for tests: a CA and a TSA certificate made
/// with openssl, and an HTTP server (python's http.server) that answers each POSTed request with
/// `openssl ts -reply`. It can be stopped and started again on the same port (an authority that
/// was unreachable and is back). Every member blocks briefly (openssl, starting the server).
public final class TimeStampAuthority: @unchecked Sendable {
    /// The folder holding `ca.pem` (the CA to trust), `tsa.pem` (the authority's certificate)
    /// and `tsa.cnf`.
    public let folder: URL
    public private(set) var port: Int = 0
    private var pid: pid_t = 0

    /// Makes the certificates and starts the server on a free port.
    public init() throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("tsa-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try Self.makeCertificates(in: folder)
        try Self.script.write(to: folder.appendingPathComponent("tsa_server.py"), atomically: true, encoding: .utf8)
        try start()
    }

    deinit { stop() }

    /// The URL to POST requests to.
    public var url: String { "http://127.0.0.1:\(port)/tsr" }
    /// The CA certificate that vouches for the authority (PEM).
    public var caFile: URL { folder.appendingPathComponent("ca.pem") }
    /// The authority's own certificate (PEM), for `openssl ts -verify -untrusted`.
    public var certificateFile: URL { folder.appendingPathComponent("tsa.pem") }
    /// How many requests it has answered.
    public var answered: Int {
        ((try? String(contentsOf: folder.appendingPathComponent("answered.log"), encoding: .utf8)) ?? "").split(separator: "\n").count
    }

    /// Starts the server (again, on the same port after ``stop()``).
    public func start() throws {
        guard pid == 0 else { return }
        let portFile = folder.appendingPathComponent("port")
        var arguments = ["python3", folder.appendingPathComponent("tsa_server.py").path, folder.path, portFile.path]
        if port != 0 { arguments.append(String(port)) }
        (pid, port) = try ChildProcess.startServer(arguments, portFile: portFile, output: folder.appendingPathComponent("output.txt"), what: "The time-stamping authority")
    }

    /// Stops it: connections are refused until ``start()``.
    public func stop() {
        guard pid != 0 else { return }
        ChildProcess.terminate(pid, SIGTERM)
        pid = 0
    }

    /// Stops it and removes its folder.
    public func close() {
        stop()
        try? FileManager.default.removeItem(at: folder)
    }

    /// What `openssl ts -verify` says of `token` (DER) for the SHA-256 `digest` (hex), against
    /// the CA: its exit status and output.
    public func opensslVerify(token: Data, digest: String) throws -> (status: Int32, output: String) {
        let file = folder.appendingPathComponent("token-\(UUID().uuidString.prefix(8)).der")
        try token.write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        return try Self.run(["openssl", "ts", "-verify", "-digest", digest, "-in", file.path, "-token_in",
                             "-CAfile", caFile.path, "-untrusted", certificateFile.path], in: folder)
    }

    static func makeCertificates(in folder: URL) throws {
        try "extendedKeyUsage=critical,timeStamping\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n"
            .write(to: folder.appendingPathComponent("ext.cnf"), atomically: true, encoding: .utf8)
        try "01\n".write(to: folder.appendingPathComponent("tsaserial"), atomically: true, encoding: .utf8)
        try """
            [ tsa ]
            default_tsa = tsa1
            [ tsa1 ]
            dir = \(folder.path)
            serial = $dir/tsaserial
            signer_cert = $dir/tsa.pem
            certs = $dir/ca.pem
            signer_key = $dir/tsa.key
            signer_digest = sha256
            default_policy = 1.2.3.4.1
            digests = sha256
            accuracy = secs:1
            ess_cert_id_alg = sha256
            """.write(to: folder.appendingPathComponent("tsa.cnf"), atomically: true, encoding: .utf8)
        for args in [
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-subj", "/CN=Tapedeck Test CA", "-days", "2",
             "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign"],
            ["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", "tsa.key", "-out", "tsa.csr", "-subj", "/CN=Tapedeck Test TSA"],
            ["openssl", "x509", "-req", "-in", "tsa.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out", "tsa.pem", "-days", "2", "-extfile", "ext.cnf"],
        ] {
            let (status, said) = try run(args, in: folder)
            guard status == 0 else { throw ChildProcess.SpawnError(description: "\(args.joined(separator: " ")): \(said)") }
        }
    }

    /// Runs `args` in `folder`: the exit status and what it printed (stdout and stderr).
    public static func run(_ args: [String], in folder: URL) throws -> (status: Int32, output: String) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = args
        p.currentDirectoryURL = folder
        let out = Pipe()
        p.standardOutput = out
        p.standardError = out
        try p.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return (p.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    private static let script = #"""
#!/usr/bin/env python3
"""A time-stamping authority for tests: tsa_server.py FOLDER PORTFILE [PORT]. Each POST's body
(an RFC 3161 TimeStampReq) is answered by `openssl ts -reply -config FOLDER/tsa.cnf`; the port is
written to PORTFILE once listening; each answer adds a line to FOLDER/answered.log."""
import http.server, os, subprocess, sys, tempfile, threading

folder, portfile = sys.argv[1], sys.argv[2]
port = int(sys.argv[3]) if len(sys.argv) > 3 else 0
lock = threading.Lock()


class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        with lock, tempfile.TemporaryDirectory() as tmp:
            query, reply = os.path.join(tmp, "q.der"), os.path.join(tmp, "r.der")
            with open(query, "wb") as f:
                f.write(body)
            done = subprocess.run(["openssl", "ts", "-reply", "-queryfile", query, "-config",
                                   os.path.join(folder, "tsa.cnf"), "-out", reply],
                                  cwd=folder, capture_output=True)
            if done.returncode != 0:
                self.send_response(400)
                self.end_headers()
                self.wfile.write(done.stderr)
                return
            with open(reply, "rb") as f:
                answer = f.read()
            with open(os.path.join(folder, "answered.log"), "a") as f:
                f.write("answered\n")
        self.send_response(200)
        self.send_header("Content-Type", "application/timestamp-reply")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


http.server.ThreadingHTTPServer.allow_reuse_address = True
server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
tmp = portfile + ".tmp"
with open(tmp, "w") as f:
    f.write(str(server.server_address[1]))
os.rename(tmp, portfile)
server.serve_forever()
"""#
}
