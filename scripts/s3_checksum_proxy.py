#!/usr/bin/env python3
"""A test proxy in front of an S3 server that lies about checksums.

Every request is passed to the server unchanged (signatures stay valid: the Host header is
kept); in every answer the ETag and x-amz-checksum-* headers are replaced by wrong values, so a
client that trusts them would call a damaged upload verified. Used by Tapedeck's tests only.

    s3_checksum_proxy.py UPSTREAM_PORT LISTEN_PORT
"""
import http.client
import http.server
import socketserver
import sys

UPSTREAM = int(sys.argv[1])
LISTEN = int(sys.argv[2])
WRONG_MD5 = '"0123456789abcdef0123456789abcdef"'
WRONG_SHA = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="


class Proxy(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def relay(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        upstream = http.client.HTTPConnection("127.0.0.1", UPSTREAM, timeout=120)
        headers = {k: v for k, v in self.headers.items()}
        upstream.request(self.command, self.path, body=body, headers=headers)
        answer = upstream.getresponse()
        data = answer.read()
        self.send_response(answer.status, answer.reason)
        for name, value in answer.getheaders():
            lower = name.lower()
            if lower in ("transfer-encoding", "connection", "content-length"):
                continue
            if lower == "etag":
                value = WRONG_MD5
            elif lower.startswith("x-amz-checksum-") and lower != "x-amz-checksum-type":
                value = WRONG_SHA
            self.send_header(name, value)
        if self.command == "HEAD":
            self.send_header("Content-Length", answer.getheader("Content-Length") or "0")
        else:
            self.send_header("Content-Length", str(len(data)))
        try:
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up on this answer (it retries or fails on its own)
        upstream.close()

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = relay


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


Server(("127.0.0.1", LISTEN), Proxy).serve_forever()
