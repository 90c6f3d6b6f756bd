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
answered (`fault-429`), or the hostile action taken (`loop`, `endless`, …).

A rule with an `action` plays a hostile server instead of answering an error:
- `loop`: a listing (ListObjectsV2, ListParts or ListMultipartUploads, told apart by the query)
  that never ends: every page says IsTruncated with the same continuation token or marker
  (`"token": "same"`, the default) or a new one each time (`"token": "new"`), and lists the same
  one entry (an object `PREFIX` + `loop-object`, part 1, or an upload of that key).
- `endless`: a 200 answer whose body (zeros, chunked) never ends, until the client hangs up.
- `drip`: a 200 answer of `size` bytes (`Content-Length` given) sent one byte every `interval`
  seconds.
- `age`: passed through, with every `<LastModified>` and `<Initiated>` in the answer set `days`
  days back (objects and uploads look old without waiting for them to be).
- `say`: an error answer of `status` whose S3 `Message` is the rule's `message` (any text, line
  breaks and escape sequences included).
"""
import datetime
import http.client
import http.server
import json
import re
import socketserver
import sys
import threading
import time
import urllib.parse
from xml.sax.saxutils import escape

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
        if chosen is None:
            action = "pass"
        elif chosen.get("action", "fault") == "fault":
            action = "fault-%d" % chosen["status"]
        else:
            action = chosen["action"]
            chosen["answered"] = chosen.get("answered", 0) + 1
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
            kind = None if rule is None else rule.get("action", "fault")
            if kind is None:
                self.forward(body)
            elif kind == "age":
                self.forward(body, age_days=rule.get("days", 3))
            else:
                getattr(self, kind)(rule)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up on this answer (it retries, fails or was cancelled)

    def fault(self, rule):
        time.sleep(rule.get("hold", 0))
        status = rule["status"]
        document = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>%s</Code><Message>Injected by the test proxy</Message></Error>"
                    % CODES.get(status, "InternalError")).encode()
        self.answer(status, document, rule)

    def say(self, rule):
        status = rule.get("status", 400)
        document = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>%s</Code><Message>%s</Message></Error>"
                    % (escape(rule.get("code", "InvalidRequest")), escape(rule.get("message", "")))).encode()
        self.answer(status, document)

    def answer(self, status, document, rule=None):
        rule = rule or {}
        self.send_response(status, REASONS.get(status, "Error") if status != 200 else "OK")
        self.send_header("Content-Type", "application/xml")
        if "retry_after" in rule:
            self.send_header("Retry-After", rule["retry_after"])
        self.send_header("Content-Length", "0" if self.command == "HEAD" else str(len(document)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(document)

    def loop(self, rule):
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query, keep_blank_values=True)
        token = "loop-token" if rule.get("token", "same") == "same" else "loop-token-%d" % rule.get("answered", 0)
        prefix = query.get("prefix", [""])[0]
        key = escape(prefix + "loop-object")
        if "list-type" in query:
            document = ("<ListBucketResult><Name>b</Name><Prefix>%s</Prefix><KeyCount>1</KeyCount><MaxKeys>1000</MaxKeys>"
                        "<IsTruncated>true</IsTruncated><Contents><Key>%s</Key><LastModified>2024-01-01T00:00:00.000Z</LastModified>"
                        "<ETag>\"00\"</ETag><Size>5</Size><StorageClass>STANDARD</StorageClass></Contents>"
                        "<NextContinuationToken>%s</NextContinuationToken></ListBucketResult>") % (escape(prefix), key, token)
        elif "uploadId" in query:
            document = ("<ListPartsResult><IsTruncated>true</IsTruncated><NextPartNumberMarker>%s</NextPartNumberMarker>"
                        "<Part><PartNumber>1</PartNumber><ETag>\"00\"</ETag><Size>5</Size></Part></ListPartsResult>"
                        % ("1" if rule.get("token", "same") == "same" else str(1 + rule.get("answered", 0))))
        else:
            document = ("<ListMultipartUploadsResult><IsTruncated>true</IsTruncated><NextKeyMarker>%s</NextKeyMarker>"
                        "<NextUploadIdMarker>%s</NextUploadIdMarker><Upload><Key>%s</Key><UploadId>loop-upload</UploadId>"
                        "<Initiated>2024-01-01T00:00:00.000Z</Initiated></Upload></ListMultipartUploadsResult>") % (key, token, key)
        self.answer(200, document.encode())

    def endless(self, rule):
        self.send_response(200, "OK")
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        chunk = b"\0" * 65536
        while True:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))

    def drip(self, rule):
        size = rule.get("size", 1000)
        self.send_response(200, "OK")
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(size))
        self.end_headers()
        for _ in range(size):
            self.wfile.write(b" ")
            self.wfile.flush()
            time.sleep(rule.get("interval", 20))

    def forward(self, body, age_days=None):
        upstream = http.client.HTTPConnection("127.0.0.1", UPSTREAM, timeout=120)
        headers = {k: v for k, v in self.headers.items()}
        upstream.request(self.command, self.path, body=body, headers=headers)
        answer = upstream.getresponse()
        data = answer.read()
        if age_days is not None:
            old = (datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(days=age_days)).strftime("%Y-%m-%dT%H:%M:%S.000Z").encode()
            data = re.sub(rb"<(LastModified|Initiated)>[^<]*</", lambda m: b"<" + m.group(1) + b">" + old + b"</", data)
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
