import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import Synchronization
import Testing
import TapedeckCore
@testable import TapedeckServer
#if canImport(Glibc)
import Glibc
#endif

/// Hostile connections and requests (issue 37, defect 7 and its smaller findings): the server
/// runs as `tapedeck serve` runs it (``WebServer/run(listening:)`` on 127.0.0.1), and raw TCP
/// connections send what no well-behaved client would. Timeouts are shortened per test.
extension ServerAPITests {
    /// Runs the fixture's server as `tapedeck serve` does, hands `body` its port, then stops it.
    func running(_ f: Fixture, _ body: @escaping @Sendable (Int) async throws -> Void) async throws {
        let box = AddressBox()
        let server = f.server
        let serving = Task { try await server.run { address in box.address.withLock { $0 = address } } }
        var port: Int?
        let deadline = Self.deadline(30)
        while port == nil, ContinuousClock.now < deadline {
            port = box.address.withLock { $0 }.flatMap { URLComponents(string: $0)?.port }
            if port == nil { try await Task.sleep(for: .milliseconds(20)) }
        }
        do {
            try await body(try #require(port))
        } catch {
            server.shutdown()
            _ = try? await serving.value
            throw error
        }
        server.shutdown()
        try await serving.value
    }

    @Test("the header timeout closes a connection that sends nothing, half a request, or its head a byte at a time; the idle timeout one left idle after an answer")
    func connectionTimeouts() async throws {
        let f = try await fixture { $0.headerTimeout = .seconds(1); $0.idleTimeout = .seconds(2) }
        try await running(f) { port in
            async let silent = offMain { () -> (closed: Bool, after: Double) in
                let c = try RawConnection(port: port)
                defer { c.hangUp() }
                let start = Date()
                let closed = c.receive(for: 8).closed
                return (closed, Date().timeIntervalSince(start))
            }
            async let half = offMain { () -> (closed: Bool, bytes: [UInt8]) in
                let c = try RawConnection(port: port)
                defer { c.hangUp() }
                c.transmit(Array("GET /api/health HTTP/1.1\r\nHo".utf8))
                let r = c.receive(for: 8)
                return (r.closed, r.bytes)
            }
            async let drip = offMain { () -> (closed: Bool, after: Double) in
                let c = try RawConnection(port: port)
                defer { c.hangUp() }
                let start = Date()
                for byte in HTTPText.request("/api/health") {
                    guard c.transmit([byte]), !c.isClosed else { break }
                    Thread.sleep(forTimeInterval: 0.25)
                }
                let closed = c.isClosed || c.receive(for: 3).closed
                return (closed, Date().timeIntervalSince(start))
            }
            async let idle = offMain { () -> (answered: Bool, closed: Bool, after: Double) in
                let c = try RawConnection(port: port)
                defer { c.hangUp() }
                c.transmit(HTTPText.request("/api/health"))
                let first = c.receive(for: 5, until: HTTPText.answered).bytes
                // Well within both timeouts: the connection is still there for a second request.
                Thread.sleep(forTimeInterval: 0.5)
                c.transmit(HTTPText.request("/api/health"))
                let second = c.receive(for: 5, until: HTTPText.answered).bytes
                let start = Date()
                let closed = c.receive(for: 8).closed
                return (HTTPText.answered(first) && HTTPText.answered(second), closed, Date().timeIntervalSince(start))
            }
            let (s, h, d, i) = try await (silent, half, drip, idle)
            #expect(s.closed && s.after > 0.5 && s.after < 4, "a silent connection: \(s)")
            #expect(h.closed && h.bytes.isEmpty, "half a request: closed \(h.closed), answered \(String(decoding: h.bytes, as: UTF8.self))")
            #expect(d.closed && d.after < 4, "a head a byte every 250 ms: \(d)")
            #expect(i.answered && i.closed && i.after > 1 && i.after < 5, "idle after two answers: \(i)")
        }
    }

    @Test("a request's body must arrive within the idle timeout of its head: a byte now and then does not hold the connection")
    func slowBody() async throws {
        let f = try await fixture { $0.headerTimeout = .seconds(1); $0.idleTimeout = .seconds(2) }
        try await running(f) { port in
            let (closed, after) = try await offMain { () -> (Bool, Double) in
                let c = try RawConnection(port: port)
                defer { c.hangUp() }
                let start = Date()
                c.transmit(Array("POST /api/markers HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Tapedeck-Request: 1\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n".utf8))
                for _ in 0..<40 {
                    guard c.transmit([UInt8(ascii: " ")]), !c.isClosed else { break }
                    Thread.sleep(forTimeInterval: 0.25)
                }
                return (c.isClosed || c.receive(for: 2).closed, Date().timeIntervalSince(start))
            }
            #expect(closed && after < 6, "a body dripped a byte every 250 ms held the connection \(after) s")
        }
    }

    @Test("answers under way are never cut short: the event stream and the live socket outlast both timeouts")
    func streamsOutlastTimeouts() async throws {
        let f = try await fixture { $0.headerTimeout = .seconds(1); $0.idleTimeout = .seconds(1) }
        try await running(f) { port in
            async let events = offMain { () -> (closed: Bool, text: String) in
                let c = try RawConnection(port: port)
                defer { c.hangUp() }
                c.transmit(HTTPText.request("/api/events"))
                let r = c.receive(for: 3.5)
                return (r.closed, String(decoding: r.bytes, as: UTF8.self))
            }
            async let socket = offMain { () -> (closed: Bool, head: String, frameBytes: Int) in
                let c = try RawConnection(port: port)
                defer { c.hangUp() }
                c.transmit(HTTPText.request("/api/live", extra: "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nX-Tapedeck-Request: 1\r\n"))
                let r = c.receive(for: 3.5)
                let text = String(decoding: r.bytes, as: UTF8.self)
                let head = text.components(separatedBy: "\r\n\r\n").first ?? ""
                return (r.closed, head, r.bytes.count - head.utf8.count - 4)
            }
            let (e, w) = try await (events, socket)
            #expect(!e.closed && e.text.hasPrefix("HTTP/1.1 200") && e.text.components(separatedBy: "event: state").count > 2, "events: \(e)")
            #expect(!w.closed && w.head.hasPrefix("HTTP/1.1 101") && w.frameBytes > 100, "live socket: \(w)")
        }
    }

    @Test("a malformed request is answered 400 and its connection closed, before the first request and after one")
    func malformedRequests() async throws {
        let f = try await fixture { $0.headerTimeout = .seconds(30) }
        let host = "Host: 127.0.0.1\r\n"
        let cases: [(String, [UInt8])] = [
            ("two Content-Lengths", Array("POST /api/markers HTTP/1.1\r\n\(host)X-Tapedeck-Request: 1\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}".utf8)),
            ("Content-Length with Transfer-Encoding", Array("POST /api/markers HTTP/1.1\r\n\(host)X-Tapedeck-Request: 1\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n".utf8)),
            ("Transfer-Encoding : chunked", Array("POST /api/markers HTTP/1.1\r\n\(host)X-Tapedeck-Request: 1\r\nTransfer-Encoding : chunked\r\n\r\n0\r\n\r\n".utf8)),
            ("a negative length", Array("POST /api/markers HTTP/1.1\r\n\(host)X-Tapedeck-Request: 1\r\nContent-Length: -1\r\n\r\n".utf8)),
            ("LF-only lines", Array("GET /api/health HTTP/1.1\nHost: 127.0.0.1\n\n".utf8)),
            ("HTTP/0.9", Array("GET /\r\n\r\n".utf8)),
            ("HTTP/2.0 in HTTP/1 framing", Array("GET /api/health HTTP/2.0\r\n\(host)\r\n".utf8)),
            ("a NUL in a header", Array("GET /api/health HTTP/1.1\r\n\(host)X-A: a".utf8) + [0] + Array("b\r\n\r\n".utf8)),
            ("a 100 KB request line", Array("GET /\(String(repeating: "a", count: 100_000)) HTTP/1.1\r\n\(host)\r\n".utf8)),
        ]
        try await running(f) { port in
            try await withThrowingTaskGroup(of: (String, Bool, String).self) { group in
                for (name, request) in cases {
                    group.addTask {
                        try await offMain {
                            let c = try RawConnection(port: port)
                            defer { c.hangUp() }
                            c.transmit(request)
                            let r = c.receive(for: 5)
                            return (name, r.closed, String(decoding: r.bytes.prefix(200), as: UTF8.self))
                        }
                    }
                }
                // After a well-formed request on the same connection (the server's HTTP handling
                // then runs, not only the first request's).
                group.addTask {
                    try await offMain {
                        let c = try RawConnection(port: port)
                        defer { c.hangUp() }
                        c.transmit(HTTPText.request("/api/health"))
                        let first = c.receive(for: 5, until: HTTPText.answered)
                        c.transmit(cases[0].1)
                        let r = c.receive(for: 5)
                        let answered = HTTPText.answered(first.bytes) ? "" : "(the first request was not answered) "
                        return ("two Content-Lengths after a good request", r.closed, answered + String(decoding: r.bytes.prefix(200), as: UTF8.self))
                    }
                }
                for try await (name, closed, answer) in group {
                    #expect(answer.hasPrefix("HTTP/1.1 400") && closed, "\(name): closed \(closed), answered \(answer.debugDescription)")
                }
            }
        }
    }

    @Test("one address holding connections gets 32 of them; another address is still answered, and the first again once it lets go")
    func connectionsPerAddress() async throws {
        let f = try await fixture { $0.headerTimeout = .seconds(60); $0.connectionsPerAddress = 32 }
        try await running(f) { port in
            let held = try await offMain { try (0..<100).map { _ in try RawConnection(port: port, from: "127.0.0.1") } }
            defer { held.forEach { $0.hangUp() } }
            let (dropped, kept) = try await offMain { () -> (Int, Int) in
                let end = Date().addingTimeInterval(10)
                while Date() < end, held.filter(\.isClosed).count < 68 { Thread.sleep(forTimeInterval: 0.05) }
                Thread.sleep(forTimeInterval: 0.3)  // and no more than those
                let closed = held.filter(\.isClosed).count
                return (closed, held.count - closed)
            }
            #expect(dropped == 68 && kept == 32, "of 100 connections from 127.0.0.1, \(dropped) were closed and \(kept) kept")
            // Another address (127.0.0.2 is this machine too) is answered while those are held.
            let other = try await offMain { () -> [UInt8] in
                let c = try RawConnection(port: port, from: "127.0.0.2")
                defer { c.hangUp() }
                c.transmit(HTTPText.request("/api/health"))
                return c.receive(for: 5, until: HTTPText.answered).bytes
            }
            #expect(HTTPText.answered(other), "127.0.0.2: \(String(decoding: other, as: UTF8.self))")
            let refused = try await offMain { () -> Bool in
                let c = try RawConnection(port: port, from: "127.0.0.1")
                defer { c.hangUp() }
                c.transmit(HTTPText.request("/api/health"))
                let r = c.receive(for: 5, until: HTTPText.answered)
                return r.closed && !HTTPText.answered(r.bytes)
            }
            #expect(refused, "a 101st connection from 127.0.0.1 was served")
            held.forEach { $0.hangUp() }
            let servedAgain = try await offMain { () -> Bool in
                let end = Date().addingTimeInterval(5)
                while Date() < end {
                    let c = try RawConnection(port: port, from: "127.0.0.1")
                    defer { c.hangUp() }
                    c.transmit(HTTPText.request("/api/health"))
                    if HTTPText.answered(c.receive(for: 2, until: HTTPText.answered).bytes) { return true }
                    Thread.sleep(forTimeInterval: 0.1)
                }
                return false
            }
            #expect(servedAgain, "127.0.0.1 was not served again after closing its connections")
        }
    }

    @Test("connections are counted per IPv4 address, IPv4-mapped IPv6 as IPv4, other IPv6 per /64")
    func addressKeys() throws {
        let v4 = try SocketAddress(ipAddress: "10.1.2.3", port: 1)
        let mapped = try SocketAddress(ipAddress: "::ffff:10.1.2.3", port: 1)
        let one = try SocketAddress(ipAddress: "2001:db8:1:2:aaaa::1", port: 1)
        let other = try SocketAddress(ipAddress: "2001:db8:1:2:bbbb::9", port: 1)
        #expect(OpenConnections.addressKey(v4) == "10.1.2.3")
        #expect(OpenConnections.addressKey(mapped) == "10.1.2.3")
        #expect(OpenConnections.addressKey(one) == "2001:0db8:0001:0002::/64")
        #expect(OpenConnections.addressKey(other) == "2001:0db8:0001:0002::/64")
        #expect(OpenConnections.addressKey(nil) == "")
    }

    @Test("connections in all stay below the descriptor limit: past the cap every address is refused but loopback, which has 64 more; each closed one is counted back")
    func connectionsInAll() throws {
        var options = try ServerOptions(tokenFile: URL(fileURLWithPath: "/nonexistent"))
        options.connectionsInAll = 40
        let connections = OpenConnections(limits: ConnectionLimits(options), logger: Logger(label: "connections-test"))
        // Two addresses of 32 (the most per address): the cap of 40 stops the second at 8.
        let first = (0..<32).map { _ in connections.admit("10.0.0.1") }
        let second = (0..<32).map { _ in connections.admit("10.0.0.2") }
        #expect(first.allSatisfy { $0 } && second.filter { $0 }.count == 8)
        #expect(!connections.admit("2001:0db8:0001:0002::/64"))
        // This machine still gets in, up to its own allowance.
        let local = (0..<32).map { _ in connections.admit("127.0.0.1") } + (0..<32).map { _ in connections.admit("0000:0000:0000:0000::/64") }
        #expect(local.allSatisfy { $0 })
        #expect(!connections.admit("127.0.0.2"))
        connections.release("10.0.0.1")
        connections.release("127.0.0.1")
        #expect(!connections.admit("10.0.0.3"), "loopback's allowance is above the cap, not in it")
        // Every connection counts toward the cap, this machine's too.
        for _ in 0..<31 { connections.release("127.0.0.1") }
        for _ in 0..<32 { connections.release("0000:0000:0000:0000::/64") }
        #expect(connections.admit("10.0.0.3"))
        #expect(!connections.admit("10.0.0.4"))
        // Without the option: the descriptor limit less the reserve.
        let defaults = ConnectionLimits(try ServerOptions(tokenFile: URL(fileURLWithPath: "/nonexistent")))
        var limit = rlimit()
        #expect(getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0)
        #expect(defaults.inAll == max(16, Int(clamping: limit.rlim_cur) - ConnectionLimits.reserve))
    }

    @Test("a request with two Host headers (or an HTTP/1.1 request with none) is refused 400, never decided by the first")
    func hostHeaders() async throws {
        let f = try await fixture()
        try await running(f) { port in
            let answers = try await offMain { () -> [String] in
                try ["Host: 127.0.0.1\r\nHost: evil.example\r\n", "Host: evil.example\r\nHost: 127.0.0.1\r\n", "", "Host: 127.0.0.1\r\n"].map { hosts in
                    let c = try RawConnection(port: port)
                    defer { c.hangUp() }
                    c.transmit(Array("GET /api/health HTTP/1.1\r\n\(hosts)\r\n".utf8))
                    let r = c.receive(for: 5, until: HTTPText.answered)
                    return String(decoding: r.bytes.prefix(40), as: UTF8.self)
                }
            }
            #expect(answers[0].hasPrefix("HTTP/1.1 400") && answers[1].hasPrefix("HTTP/1.1 400"), "two Host headers: \(answers)")
            #expect(answers[2].hasPrefix("HTTP/1.1 400"), "no Host header: \(answers[2])")
            #expect(answers[3].hasPrefix("HTTP/1.1 200"), "one Host header: \(answers[3])")
        }
    }

    @Test("HEAD is answered wherever GET is: the same status and headers, no body")
    func headRequests() async throws {
        let f = try await fixture()
        try await serving(f) { client in
            let get = try await client.execute(uri: "/api/health", method: .get) { $0 }
            try await client.execute(uri: "/api/health", method: .head) {
                #expect($0.status == .ok)
                #expect($0.body.readableBytes == 0)
                #expect($0.headers[.contentType] == "application/json; charset=utf-8")
                #expect($0.headers[.contentLength] == String(get.body.readableBytes))
            }
            for uri in ["/", "/api/state", "/api/sessions", "/api/openapi.yaml", "/assets/app.js", "/api/events", "/doctor"] {
                try await client.execute(uri: uri, method: .head) {
                    #expect($0.status == .ok, "HEAD \(uri)")
                    #expect($0.body.readableBytes == 0, "HEAD \(uri)")
                }
            }
            try await client.execute(uri: "/api/takes/nope", method: .head) { #expect($0.status == .notFound) }
            try await client.execute(uri: "/api/takes/nope/audio", method: .head) { #expect($0.status == .notFound) }
        }
    }

    @Test("a method a path does not take is answered 405 with Allow (TRACE too), an unknown path still 404")
    func methodNotAllowed() async throws {
        let f = try await fixture()
        try await serving(f) { client in
            try await client.execute(uri: "/api/state", method: .put, headers: Self.script) {
                #expect($0.status == .methodNotAllowed)
                #expect($0.headers[.allow] == "GET, HEAD")
                #expect(Self.errorCode($0.body) == "method-not-allowed")
            }
            let wrong: [(String, HTTPRequest.Method, String)] = [
                ("/api/stop", .trace, "POST"), ("/api/stop", .get, "POST"), ("/api/takes/x", .post, "DELETE, GET, HEAD, PATCH"),
                ("/logout", .get, "POST"), ("/", .delete, "GET, HEAD"),
            ]
            for (uri, method, allow) in wrong {
                try await client.execute(uri: uri, method: method) {
                    #expect($0.status == .methodNotAllowed, "\(method) \(uri)")
                    #expect($0.headers[.allow] == allow, "\(method) \(uri)")
                }
            }
            try await client.execute(uri: "/api/no-such-thing", method: .put, headers: Self.script) { #expect($0.status == .notFound) }
        }
    }

    @Test("GET /api/live without a WebSocket upgrade answers 426 Upgrade Required")
    func liveWithoutUpgrade() async throws {
        let f = try await fixture()
        try await serving(f) { client in
            try await client.execute(uri: "/api/live", method: .get) {
                #expect($0.status == .upgradeRequired)
                #expect($0.headers[.upgrade] == "websocket")
                #expect(Self.errorCode($0.body) == "upgrade-required")
            }
        }
    }

    @Test("notes holding a NUL are refused (400) before anything changes, as names are")
    func nulInNotes() async throws {
        #expect(throws: TapedeckError.self) { try TakeAnnotations(notes: "before\u{0}after").validate() }
        let f = try await fixture()
        try await serving(f) { client in
            let takeID = try await Self.recordShortTake(client)
            try await client.execute(uri: "/api/takes/\(takeID)", method: .patch, headers: Self.script,
                                     body: Self.body(#"{"name": "Changed", "notes": "before\u0000after"}"#)) {
                #expect($0.status == .badRequest)
                #expect(Self.errorCode($0.body) == "invalid-argument")
                #expect(Self.errorMessage($0.body)?.contains("NUL") == true)
            }
            let take = try await client.execute(uri: "/api/takes/\(takeID)", method: .get) { try Self.json($0.body) }
            #expect(take["name"] as? String != "Changed")
            #expect((take["notes"] as? String ?? "").isEmpty)
            try await client.execute(uri: "/api/takes/\(takeID)", method: .patch, headers: Self.script, body: Self.body(#"{"notes": "two\nlines"}"#)) {
                #expect($0.status == .ok)
            }
        }
    }

    @Test("wrong tokens sent as the cookie count toward the limit (the same stale cookie once)")
    func cookieGuesses() async throws {
        let l = LoginLimiter(limit: 2, globalLimit: 100, window: 60)
        for _ in 0..<5 { l.failed("a", guess: "stale", now: 0) }
        #expect(l.retryAfter("a", now: 1) == nil)
        l.failed("a", guess: "other", now: 2)
        #expect(l.retryAfter("a", now: 3) != nil)

        let token = AccessToken(value: String(repeating: "ef", count: 32))
        let f = try await fixture(token: token, requireToken: true)
        try await serving(f) { client in
            // A browser still holding an old token sends it with every request: counted once.
            for _ in 0..<8 {
                try await client.execute(uri: "/api/state", method: .get, headers: [.cookie: "tapedeck_token=stale"]) { #expect($0.status == .unauthorized) }
            }
            try await client.execute(uri: "/api/state", method: .get, headers: [.cookie: "tapedeck_token=\(token.value)"]) { #expect($0.status == .ok) }
            // Guesses are counted each: with the stale one, five.
            for i in 0..<4 {
                try await client.execute(uri: "/api/state", method: .get, headers: [.cookie: "tapedeck_token=guess\(i)"]) { #expect($0.status == .unauthorized) }
            }
            try await client.execute(uri: "/api/state", method: .get, headers: [.authorization: "Bearer \(token.value)"]) {
                #expect($0.status == .tooManyRequests)
                #expect(Int($0.headers[.retryAfter] ?? "") ?? 0 > 0)
            }
            try await client.execute(uri: "/", method: .get, headers: [.cookie: "tapedeck_token=\(token.value)"]) { #expect($0.status == .tooManyRequests) }
        }
    }

    @Test("a named pipe given as the token file is refused at once with what to do, never waited on")
    func tokenFileIsAPipe() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("fifo-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("serve-token").path
        #expect(mkfifo(path, 0o600) == 0)
        // Were it opened, the open would wait for a writer: one comes after 3 s, so a failing
        // test ends.
        let rescue = Task.detached {
            try await Task.sleep(for: .seconds(3))
            let fd = open(path, O_WRONLY | O_NONBLOCK)
            if fd >= 0 { close(fd) }
        }
        let started = ContinuousClock.now
        let refusal = await Task.detached { () -> TapedeckError? in
            do {
                _ = try AccessToken.load(from: URL(fileURLWithPath: path))
                return nil
            } catch {
                return error as? TapedeckError
            }
        }.value
        rescue.cancel()
        #expect(ContinuousClock.now - started < .seconds(2))
        #expect(refusal?.code == .configuration)
        #expect(refusal?.message.contains("named pipe") == true && refusal?.message.contains("--token-file") == true, "\(refusal?.message ?? "no refusal")")
    }

    @Test("a client that reads nothing of a download is closed after the stall timeout; the next download is whole")
    func stalledDownload() async throws {
        // The null source as fast as it goes: a take of many megabytes, more than the sockets hold.
        let f = try await fixture(paced: false) { $0.stallTimeout = .seconds(1) }
        try await running(f) { port in
            let takeID = try await offMain { () -> String in
                func call(_ method: String, _ path: String, _ body: String = "") throws -> String {
                    let c = try RawConnection(port: port)
                    defer { c.hangUp() }
                    c.transmit(Array("\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Tapedeck-Request: 1\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)".utf8))
                    return String(decoding: c.receive(for: 10).bytes, as: UTF8.self)
                }
                _ = try call("POST", "/api/record", #"{"session": "Stall"}"#)
                // At least 4 million frames (16 MB at 16-bit stereo), however busy the machine is.
                for _ in 0..<200 {
                    Thread.sleep(forTimeInterval: 0.1)
                    let state = try call("GET", "/api/state")
                    if let range = state.range(of: #""frames":"#), let frames = Int(state[range.upperBound...].prefix { $0.isNumber }), frames >= 4_000_000 { break }
                }
                _ = try call("POST", "/api/stop")
                for _ in 0..<300 {
                    let state = try call("GET", "/api/state")
                    if state.contains(#""recording":false"#), let range = state.range(of: #""takeID":""#) {
                        return String(state[range.upperBound...].prefix { $0 != "\"" })
                    }
                    Thread.sleep(forTimeInterval: 0.1)
                }
                return ""
            }
            try #require(!takeID.isEmpty)
            let (stalled, whole) = try await offMain { () -> ((bytes: Int, closed: Bool), (bytes: Int, closed: Bool)) in
                let request = HTTPText.request("/api/takes/\(takeID)/audio")
                let idle = try RawConnection(port: port, receiveBuffer: 4096)
                defer { idle.hangUp() }
                idle.transmit(request)
                Thread.sleep(forTimeInterval: 4)
                let late = idle.receive(for: 10)
                let reader = try RawConnection(port: port)
                defer { reader.hangUp() }
                reader.transmit(request)
                let read = reader.receive(for: 20) { bytes in
                    let head = String(decoding: bytes.prefix(1000), as: UTF8.self)
                    guard let end = head.range(of: "\r\n\r\n"), let line = head[..<end.lowerBound].split(separator: "\r\n").first(where: { $0.lowercased().hasPrefix("content-length:") }),
                          let length = Int(line.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) else { return false }
                    return bytes.count >= head[..<end.upperBound].utf8.count + length
                }
                return ((late.bytes.count, late.closed), (read.bytes.count, read.closed))
            }
            #expect(stalled.closed && stalled.bytes < whole.bytes, "the stalled download: \(stalled), the whole one: \(whole)")
            #expect(whole.bytes > 8_000_000 && !whole.closed)
        }
    }

    /// Records a take of about half a second through the API; its id.
    nonisolated static func recordShortTake(_ client: any TestClientProtocol) async throws -> String {
        try await client.execute(uri: "/api/record", method: .post, headers: script, body: body(#"{"session": "Short"}"#)) {
            #expect($0.status == .accepted)
        }
        try await Task.sleep(for: .milliseconds(500))
        try await client.execute(uri: "/api/stop", method: .post, headers: script) { #expect($0.status == .accepted) }
        let until = deadline(60)
        while ContinuousClock.now < until {
            let state = try await client.execute(uri: "/api/state", method: .get) { try json($0.body) }
            if state["recording"] as? Bool == false, let id = (state["last"] as? [String: Any])?["takeID"] as? String { return id }
            try await Task.sleep(for: .milliseconds(100))
        }
        Issue.record("The recording did not finish within a minute.")
        return "none"
    }
}

/// Where the server said it listens.
final class AddressBox: Sendable {
    let address = Mutex<String?>(nil)
}

/// Runs blocking work (raw sockets) on a thread of its own, off the main actor and Swift's pool.
func offMain<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread { continuation.resume(with: Result { try body() }) }
    }
}

/// Requests as bytes, and whether an answer has come.
enum HTTPText {
    /// `GET path` with this machine's Host and `extra` header lines (each ending in CRLF).
    static func request(_ path: String, extra: String = "") -> [UInt8] {
        Array("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n\(extra)\r\n".utf8)
    }

    /// Whether `bytes` hold a whole 200 answer with a JSON body (as `/api/health` gives).
    static func answered(_ bytes: [UInt8]) -> Bool {
        let text = String(decoding: bytes, as: UTF8.self)
        return text.hasPrefix("HTTP/1.1 200") && text.hasSuffix("}")
    }
}

/// A TCP connection to the server on 127.0.0.1, from any loopback address, that sends and reads
/// raw bytes. Blocking; use from one thread at a time (``offMain(_:)``).
final class RawConnection: @unchecked Sendable {
    private let fd: Int32
    private let lock = NSLock()
    private var connected = true

    struct Failure: Error, CustomStringConvertible { var description: String }

    /// Connects to 127.0.0.1:`port` from `source` (every 127.x.y.z address is this machine's on Linux).
    /// `receiveBuffer`: a small one makes a client that reads nothing stall the server soon.
    init(port: Int, from source: String = "127.0.0.1", receiveBuffer: Int32? = nil) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket: errno \(errno)") }
        if var size = receiveBuffer { setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size)) }
        var local = sockaddr_in()
        local.sin_family = sa_family_t(AF_INET)
        local.sin_port = 0
        local.sin_addr.s_addr = inet_addr(source)
        var remote = sockaddr_in()
        remote.sin_family = sa_family_t(AF_INET)
        remote.sin_port = in_port_t(UInt16(port).bigEndian)
        remote.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        let joined = bound == 0 ? withUnsafePointer(to: &remote) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        } : -1
        // (On failure the socket is closed by deinit.)
        guard joined == 0 else { throw Failure(description: "connecting from \(source) to port \(port): errno \(errno)") }
    }

    deinit { hangUp() }

    /// Sends `bytes` whole; `false` once the server has closed the connection.
    @discardableResult func transmit(_ bytes: [UInt8]) -> Bool {
        var sent = 0
        while sent < bytes.count {
            let n = bytes.withUnsafeBytes { send(fd, $0.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL)) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { return false }
            sent += n
        }
        return true
    }

    /// Reads for `seconds`, or until `done` says what came is enough, or until the server closes
    /// the connection (`closed`; a reset counts).
    func receive(for seconds: Double, until done: ([UInt8]) -> Bool = { _ in false }) -> (bytes: [UInt8], closed: Bool) {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        let end = Date().addingTimeInterval(seconds)
        while !done(bytes) {
            let left = end.timeIntervalSinceNow
            guard left > 0 else { break }
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&p, 1, Int32(left * 1000) + 1) > 0 else { continue }
            let n = recv(fd, &buffer, buffer.count, 0)
            if n > 0 {
                bytes += buffer[0..<n]
            } else if n == 0 || (errno != EINTR && errno != EAGAIN) {
                return (bytes, true)
            }
        }
        return (bytes, false)
    }

    /// Whether the server has closed the connection (looked at without waiting).
    var isClosed: Bool {
        var byte: UInt8 = 0
        let n = recv(fd, &byte, 1, Int32(MSG_DONTWAIT | MSG_PEEK))
        return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
    }

    /// Closes this end (once).
    func hangUp() {
        let wasConnected = lock.withLock {
            defer { connected = false }
            return connected
        }
        if wasConnected { close(fd) }
    }
}
