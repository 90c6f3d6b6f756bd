import Foundation
import Logging
import TapedeckAlerts
import TapedeckTesting
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The alerts' rules, limits, outbox and routes, against real receivers on loopback (an HTTP
/// server, and aiosmtpd asking for a password).
@Suite("alerts: rules, limits, the outbox and the routes")
struct AlertsTests {
    static func rules(_ items: [[String: String]]) -> (rules: [AlertRule], problems: [String]) {
        AlertRules.parse(items.enumerated().map { AlertRuleText(line: $0.offset + 1, values: $0.element, lines: [:]) }, file: "config.yaml")
    }

    static func center(_ rules: [AlertRule], folder: URL, environment: [String: String] = [:]) -> AlertCenter {
        AlertCenter(rules: rules, outbox: AlertOutbox(folder: folder), delivery: AlertDelivery(environment: environment, timeoutSeconds: 5),
                    logger: Logger(label: "alerts-test"))
    }

    static func folder() -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("alerts-\(UUID().uuidString)")
    }

    @Test("rules are read with their routes, limits and events; every mistake is named with its line and what to write")
    func parsing() throws {
        let good = Self.rules([
            ["when": "silence, device-back", "webhook.url": "https://hooks.example.org/t?key=1", "limit": "3/1h", "name": "Team"],
            ["when": "all", "ntfy": "https://ntfy.sh/topic"],
            ["when": "disk-low", "email.smtp": "mail.example.org", "email.from": "rec@example.org", "email.to": "a@example.org, b@example.org",
             "email.username": "rec", "email.password-env": "MAIL_PASSWORD"],
        ])
        #expect(good.problems == [])
        #expect(good.rules.count == 3)
        #expect(good.rules[0].when == [.silence, .deviceBack] && good.rules[0].limitCount == 3 && good.rules[0].limitSeconds == 3600)
        #expect(good.rules[0].route.destination == "https://hooks.example.org/…", "a path or a query may hold a secret: never shown")
        #expect(good.rules[1].when == Set(AlertKind.selectable) && good.rules[1].limitCount == 6)
        guard case .email(let mail) = good.rules[2].route else { Issue.record("not a mail route"); return }
        #expect(mail.server == "mail.example.org:587" && mail.to == ["a@example.org", "b@example.org"] && mail.startTLS)

        let bad = Self.rules([
            ["when": "silense", "webhook.url": "https://x.example"],
            ["when": "silence"],
            ["when": "silence", "webhook.url": "ftp://x.example"],
            ["when": "silence", "webhook.url": "https://user:secret@x.example"],
            ["when": "silence", "ntfy": "https://x.example", "limit": "lots"],
            ["when": "silence", "ntfy": "https://x.example", "colour": "red"],
        ])
        #expect(bad.problems.count == 6, "\(bad.problems)")
        #expect(bad.problems[0].contains("config.yaml:1: alerts[1].when: \"silense\" is not an event (did you mean \"silence\"?)"))
        #expect(bad.problems[1].contains("no route"))
        #expect(bad.problems[2].contains("not an http:// or https:// URL"))
        #expect(bad.problems[3].contains("holds a password") && !bad.problems[3].contains("secret"))
        #expect(bad.problems[4].contains("is not a limit"))
        #expect(bad.problems[5].contains("unknown setting"))
    }

    @Test("a flood of events is held to the rule's limit, and what is held back comes as one summary")
    func limit() async throws {
        let receiver = try AlertReceiver(.http)
        defer { receiver.close() }
        let folder = Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let rules = Self.rules([["when": "silence", "webhook.url": receiver.url, "limit": "6/10m"]]).rules
        let center = Self.center(rules, folder: folder)
        center.start()
        // 100 flaps: a began and a resolved each.
        for i in 0..<100 {
            center.raise(AlertEvent(kind: .silence, phase: .began, machine: "test", title: "Silence began", message: "flap \(i)"))
            center.raise(AlertEvent(kind: .silence, phase: .resolved, machine: "test", title: "Silence resolved", message: "flap \(i)"))
        }
        // Another kind the rule does not take: never sent.
        center.raise(AlertEvent(kind: .diskLow, phase: .began, machine: "test", title: "Disk low", message: "not for this rule"))
        let left = await center.finish(within: .seconds(20))
        #expect(left.waiting.isEmpty, "\(left)")
        let bodies = receiver.jsonBodies()
        #expect(bodies.count == 7, "6 alerts and one summary: \(bodies.map { $0["title"] ?? "" })")
        #expect(bodies.prefix(6).map { $0["message"] as? String } == ["flap 0", "flap 0", "flap 1", "flap 1", "flap 2", "flap 2"])
        let held = try #require(bodies.last?["heldBack"] as? [String: Int])
        #expect(held == ["Silence began": 97, "Silence resolved": 97])
        #expect((bodies.last?["message"] as? String)?.hasSuffix("The latest: flap 99") == true)
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.appendingPathComponent("outbox").path).isEmpty)
    }

    @Test("alerts raised while the route is down wait in the outbox and arrive once, in order, after a restart")
    func outbox() async throws {
        let receiver = try AlertReceiver(.http)
        defer { receiver.close() }
        receiver.stop()
        let folder = Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let rules = Self.rules([["when": "all", "webhook.url": receiver.url]]).rules
        // The first process: the route is down; its alerts stay in the outbox when it ends.
        let first = Self.center(rules, folder: folder)
        first.start()
        var began = AlertEvent(kind: .deviceLost, phase: .began, machine: "test", title: "Device lost", message: "one")
        began.frame = 48_000
        began.sampleRate = 48_000
        first.raise(began)
        var back = AlertEvent(kind: .deviceLost, phase: .resolved, machine: "test", title: "Device back", message: "two")
        back.resolves = began.id
        first.raise(back)
        let left = await first.finish(within: .seconds(2))
        #expect(left.waiting.count == 1 && left.waiting[0].hasPrefix("2 alerts for alerts[1] (webhook http://127.0.0.1:\(receiver.port)/…): The webhook"), "\(left)")
        #expect(AlertOutbox(folder: folder).entries().map(\.event.id) == [began.id, back.id])
        // The route is back; a new process sends what waits, in order, once.
        try receiver.start()
        let second = Self.center(rules, folder: folder)
        second.start()
        #expect(await second.finish(within: .seconds(10)).waiting.isEmpty)
        let third = Self.center(rules, folder: folder)
        third.start()
        #expect(await third.finish(within: .seconds(2)) == AlertCenter.Outcome())
        let received = receiver.received()
        #expect(received.map { ($0["headers"] as? [String: String])?["idempotency-key"] } == [began.id, back.id])
        let bodies = receiver.jsonBodies()
        #expect(bodies.map { $0["phase"] as? String } == ["began", "resolved"])
        #expect(bodies[0]["frame"] as? Int == 48_000 && bodies[0]["offsetSeconds"] as? Double == 1.0)
        #expect(bodies[1]["resolves"] as? String == began.id)
        #expect(AlertOutbox(folder: folder).entries().isEmpty)
    }

    @Test("a named rule's waiting alerts follow its new URL; an unnamed rule's are kept unrouted; a 400 takes the alert out")
    func routeChanges() async throws {
        let receiver = try AlertReceiver(.http)
        defer { receiver.close() }
        let folder = Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let down = "http://127.0.0.1:\(receiver.port)/old"
        receiver.stop()
        let before = Self.rules([["when": "silence", "name": "Team", "webhook.url": down], ["when": "silence", "ntfy": down]]).rules
        let first = Self.center(before, folder: folder)
        first.start()
        first.raise(AlertEvent(kind: .silence, phase: .began, machine: "test", title: "Silence began", message: "queued"))
        #expect(await first.finish(within: .seconds(1)).waiting.count == 2)
        try receiver.start()
        // The URLs fixed: the named rule's alert goes to the new one; the unnamed rule's waits.
        let after = Self.rules([["when": "silence", "name": "Team", "webhook.url": receiver.url], ["when": "silence", "ntfy": receiver.url]]).rules
        let second = Self.center(after, folder: folder)
        second.start()
        let outcome = await second.finish(within: .seconds(10))
        #expect(outcome.unrouted == 1 && outcome.waiting.isEmpty, "\(outcome)")
        #expect(receiver.received().map { $0["path"] as? String } == ["/hook"])
        #expect(second.discardUnrouted() == 1 && AlertOutbox(folder: folder).entries().isEmpty)
        // A refusal (400) is not tried again.
        let refusing = Self.center(Self.rules([["when": "silence", "webhook.url": "http://127.0.0.1:\(receiver.port)/refuse"]]).rules, folder: folder)
        refusing.start()
        refusing.raise(AlertEvent(kind: .silence, phase: .began, machine: "test", title: "Silence began", message: "refused"))
        #expect(await refusing.finish(within: .seconds(10)).waiting.isEmpty)
        #expect(receiver.received().count == 2 && AlertOutbox(folder: folder).entries().isEmpty)
    }

    @Test("a mail goes through SMTP with the password from a private file, and the password is never said")
    func mail() async throws {
        let password = "pw-\(UUID().uuidString.prefix(8))"
        let receiver = try AlertReceiver(.smtp(user: "recorder", password: password))
        defer { receiver.close() }
        let folder = Self.folder()
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let credentials = folder.appendingPathComponent("mail-credentials")
        try "username = recorder\npassword = \(password)\n".write(to: credentials, atomically: true, encoding: .utf8)
        chmod(credentials.path, 0o644)
        let rules = Self.rules([["when": "silence", "email.smtp": "127.0.0.1:\(receiver.port)", "email.from": "rec@example.org",
                                 "email.to": "ops@example.org", "email.starttls": "false", "email.credentials-file": credentials.path]]).rules
        var event = AlertEvent(kind: .silence, phase: .began, machine: "studio", title: "Silence began", message: "The input has been silent.")
        event.take = "Dawn chorus/Take 1"
        let delivery = AlertDelivery(environment: [:], timeoutSeconds: 5)
        // Readable by others: refused, naming the fix.
        let open = #expect(throws: (any Error).self) { try delivery.send(event, through: rules[0].route) }
        #expect("\(open.map { "\($0)" } ?? "")".contains("chmod 600 \(credentials.path)"))
        #expect(!"\(open.map { "\($0)" } ?? "")".contains(password))
        chmod(credentials.path, 0o600)
        try delivery.send(event, through: rules[0].route)
        let mails = receiver.received()
        #expect(mails.count == 1)
        let data = try #require(mails.first?["data"] as? String)
        #expect(mails.first?["authenticated"] as? Bool == true)
        #expect(mails.first?["to"] as? [String] == ["ops@example.org"])
        #expect(data.contains("Subject: [studio] Silence began: Dawn chorus/Take 1"))
        #expect(data.contains("Message-ID: <\(event.id)@example.org>"))
        #expect(data.contains("The input has been silent."))
        #expect(!data.contains(password))
        // A wrong password: refused by the server, said without the password.
        try "username = recorder\npassword = wrong-\(password)\n".write(to: credentials, atomically: false, encoding: .utf8)
        let refused = #expect(throws: (any Error).self) { try delivery.send(event, through: rules[0].route) }
        let said = refused.map { "\($0)" } ?? ""
        #expect(said.contains("was not sent") && !said.contains(password), "\(said)")
    }
}
