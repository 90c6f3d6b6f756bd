#!/usr/bin/env python3
"""A test proxy in front of an S3 server that answers some requests with errors.

Every request is passed to the server unchanged (signatures stay valid: the Host header is
kept), except those a rule of the plan matches while it has answers left: they are answered by
the proxy with the rule's status (an S3 error document, and `Retry-After` when the rule has one)
without reaching the server. A rule may also hold its answer for a while first (`hold`, in
seconds), to let a test cancel a request under way. Used by Tapedeck's tests only.

    s3_fault_proxy.py UPSTREAM_PORT LISTEN_PORT PLAN_JSON LOG_FILE

PLAN_JSON is a list of rules, tried in order:
    {"method": "PUT", "path": "partNumber=1&", "status": 429, "retry_after": "1", "times": 1, "hold": 0}
`path` is a substring of the request's path and query. LOG_FILE gets one line per request, as it
arrives: `SECONDS METHOD PATH ACTION`, SECONDS on a monotonic clock, ACTION `pass` or the status
answered (`fault-429`).
"""
import http.client
import http.server
import json
import socketserver
import sys
import threading
import time

UPSTREAM = int(sys.argv[1])
LISTEN = int(sys.argv[2])
PLAN = json.loads(sys.argv[3])
LOG = sys.argv[4]
LOCK = threading.Lock()
REASONS = {429: "Too Many Requests", 500: "Internal Server Error", 501: "Not Implemented", 502: "Bad Gateway",
           503: "Service Unavailable", 504: "Gateway Timeout", 400: "Bad Request"}
CODES = {429: "SlowDown", 500: "InternalError", 501: "NotImplemented", 502: "BadGateway", 503: "SlowDown",
         504: "GatewayTimeout", 400: "InvalidRequest"}


def decide(method, path):
    """The rule that answers this request (its count taken), or None; the arrival is logged."""
    with LOCK:
        chosen = None
        for rule in PLAN:
            if rule.get("times", 1) > 0 and rule.get("method", method) == method and rule.get("path", "") in path:
                rule["times"] = rule.get("times", 1) - 1
                chosen = rule
                break
        action = "pass" if chosen is None else "fault-%d" % chosen["status"]
        with open(LOG, "a") as log:
            log.write("%.6f %s %s %s\n" % (time.monotonic(), method, path, action))
        return chosen


class Proxy(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def relay(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        rule = decide(self.command, self.path)
        try:
            if rule is not None:
                self.fault(rule)
            else:
                self.forward(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up on this answer (it retries, fails or was cancelled)

    def fault(self, rule):
        time.sleep(rule.get("hold", 0))
        status = rule["status"]
        document = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>%s</Code><Message>Injected by the test proxy</Message></Error>"
                    % CODES.get(status, "InternalError")).encode()
        self.send_response(status, REASONS.get(status, "Error"))
        self.send_header("Content-Type", "application/xml")
        if "retry_after" in rule:
            self.send_header("Retry-After", rule["retry_after"])
        self.send_header("Content-Length", "0" if self.command == "HEAD" else str(len(document)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(document)

    def forward(self, body):
        upstream = http.client.HTTPConnection("127.0.0.1", UPSTREAM, timeout=120)
        headers = {k: v for k, v in self.headers.items()}
        upstream.request(self.command, self.path, body=body, headers=headers)
        answer = upstream.getresponse()
        data = answer.read()
        self.send_response(answer.status, answer.reason)
        for name, value in answer.getheaders():
            if name.lower() in ("transfer-encoding", "connection", "content-length"):
                continue
            self.send_header(name, value)
        if self.command == "HEAD":
            self.send_header("Content-Length", answer.getheader("Content-Length") or "0")
        else:
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        upstream.close()

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = relay


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


Server(("127.0.0.1", LISTEN), Proxy).serve_forever()
