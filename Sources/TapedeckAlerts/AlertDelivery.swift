public import Foundation
import CCurlTransfer
import TapedeckCore

/// A route's answer that sending again cannot change (an HTTP 4xx other than 408 and 429): the
/// alert leaves the outbox, and the error is logged.
public struct AlertRefused: Error, Sendable, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}

/// Sends one alert through one route with libcurl: a POST for webhooks and ntfy, a mail over SMTP
/// (STARTTLS unless turned off). A plain value; ``send(_:through:)`` blocks until the server
/// answers or `timeoutSeconds` pass, so call it off the main actor. Any thread.
public struct AlertDelivery: Sendable {
    public var environment: [String: String]
    public var timeoutSeconds: Int
    /// `tapedeck/VERSION`, the webhook's User-Agent and the mail's X-Mailer.
    public var agent: String

    public init(environment: [String: String], timeoutSeconds: Int = 15, agent: String = "tapedeck") {
        self.environment = environment
        self.timeoutSeconds = timeoutSeconds
        self.agent = agent
    }

    /// Sends `event`. - Throws: `.configuration` for missing or unreadable credentials, `.io`
    /// when the server cannot be reached or refuses (the message names the route, never a secret).
    public func send(_ event: AlertEvent, through route: AlertRoute) throws {
        try send(event, through: route, timeoutSeconds: timeoutSeconds)
    }

    /// Sends `event`, the transfer ending within `timeoutSeconds`.
    /// - Throws: as ``send(_:through:)``, and ``AlertRefused`` when the server refuses it for good.
    public func send(_ event: AlertEvent, through route: AlertRoute, timeoutSeconds: Int) throws {
        var copy = self
        copy.timeoutSeconds = max(1, timeoutSeconds)
        try copy.deliver(event, through: route)
    }

    private func deliver(_ event: AlertEvent, through route: AlertRoute) throws {
        switch route {
        case .webhook(let url, let template, let source):
            let secrets = try AlertSecrets.load(source, secret: "token", environment: environment)
            let body = template == .text ? Self.chatJSON(event) : Self.json(event)
            try post(url, body: body, headers: ["Content-Type: application/json", "Idempotency-Key: \(event.id)"], secrets: secrets, route: route)
        case .ntfy(let url, let source):
            let secrets = try AlertSecrets.load(source, secret: "token", environment: environment)
            let headers = ["Content-Type: text/plain; charset=utf-8",
                           "Title: " + Self.headerText("\(event.title) (\(event.machine))"),
                           "Tags: " + (event.phase == .began ? "warning" : event.phase == .resolved ? "white_check_mark" : "information_source"),
                           "Priority: " + (event.phase == .began ? "4" : "3"),
                           "X-Tapedeck-Alert: \(event.id)"]
            try post(url, body: Data(event.message.utf8), headers: headers, secrets: secrets, route: route)
        case .email(let mail):
            let secrets = try AlertSecrets.load(mail.credentials, secret: "password", environment: environment)
            try sendMail(event, mail, secrets: secrets)
        }
    }

    private func post(_ url: String, body: Data, headers: [String], secrets: AlertSecrets, route: AlertRoute) throws {
        var lines = headers + ["User-Agent: \(agent)"]
        if let token = secrets.token { lines.append("Authorization: Bearer \(token)") }
        var result = tapedeck_transfer_result()
        let code = Self.withCStrings(lines) { headerPointers, count in
            body.withUnsafeBytes { bytes in
                tapedeck_http_post(url, headerPointers, count, bytes.baseAddress?.assumingMemoryBound(to: CChar.self), body.count,
                                   timeoutSeconds, secrets.token == nil ? secrets.username : nil, secrets.token == nil ? secrets.password : nil, &result)
            }
        }
        let error = Self.text(of: &result.error)
        guard code == 0 else {
            throw TapedeckError(.io, "The \(route.type) \(route.destination) could not be reached: \(AlertCenter.sentence(error)).")
        }
        guard (200..<300).contains(result.status) else {
            let said = Self.text(of: &result.body).split(whereSeparator: \.isNewline).first.map { ": " + $0.prefix(160) } ?? ""
            let hint = result.status == 401 || result.status == 403 ? " Check the route's token or credentials." : ""
            let message = "The \(route.type) \(route.destination) answered \(result.status)\(AlertCenter.sentence(String(said))).\(hint)"
            // A request the server will refuse again; 408 and 429 ask to come back later.
            if (400..<500).contains(result.status) && result.status != 408 && result.status != 429 {
                throw AlertRefused(message: message)
            }
            throw TapedeckError(.io, message)
        }
    }

    private func sendMail(_ event: AlertEvent, _ mail: EmailRoute, secrets: AlertSecrets) throws {
        let message = Self.mail(event, mail, agent: agent)
        var result = tapedeck_transfer_result()
        let recipients = mail.to.map { "<\($0)>" }
        let user = mail.username ?? secrets.username
        let code = Self.withCStrings(recipients) { pointers, count in
            message.withUnsafeBytes { bytes in
                tapedeck_smtp_send(mail.url, mail.startTLS && !mail.url.hasPrefix("smtps") ? 1 : 0, secrets.password == nil ? nil : user,
                                   secrets.password, "<\(mail.from)>", pointers, count,
                                   bytes.baseAddress?.assumingMemoryBound(to: CChar.self), message.count, timeoutSeconds, &result)
            }
        }
        guard code == 0 else {
            let error = Self.text(of: &result.error)
            let hint = error.lowercased().contains("ssl") || error.lowercased().contains("tls")
                ? " The server may not offer STARTTLS: set email.starttls: false only for a server on this machine or a trusted network."
                : result.status == 535 ? " Check the username and password." : ""
            let code = result.status >= 400 ? " (the server answered \(result.status))" : ""
            throw TapedeckError(.io, "The mail to \(mail.to.joined(separator: ", ")) through \(mail.server) was not sent: \(AlertCenter.sentence(error))\(code).\(hint)")
        }
    }

    // MARK: what is sent

    /// The default webhook body: the event as JSON (docs/JSON.md, "Alerts").
    public static func json(_ event: AlertEvent) -> Data {
        var object: [String: Any] = ["id": event.id, "event": event.kind.rawValue, "phase": event.phase.rawValue,
                                     "title": event.title, "message": event.message, "time": event.timeText, "machine": event.machine]
        object["session"] = event.session
        object["take"] = event.take
        object["run"] = event.run
        object["frame"] = event.frame
        object["sampleRate"] = event.sampleRate
        object["offsetSeconds"] = event.offsetSeconds
        object["durationSeconds"] = event.durationSeconds
        object["resolves"] = event.resolves
        object["heldBack"] = event.heldBack
        return (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data()
    }

    /// `{"text": …}`, what Slack, Mattermost and Rocket.Chat hooks take.
    static func chatJSON(_ event: AlertEvent) -> Data {
        (try? JSONSerialization.data(withJSONObject: ["text": "\(event.title) on \(event.machine): \(event.message)"], options: [])) ?? Data()
    }

    /// The mail: headers and a plain-text body, CRLF line ends.
    static func mail(_ event: AlertEvent, _ route: EmailRoute, agent: String) -> Data {
        let date = DateFormatter()
        date.locale = Locale(identifier: "en_US_POSIX")
        date.dateFormat = "EEE, dd MMM yyyy HH:mm:ss Z"
        let domain = route.from.split(separator: "@").last.map(String.init) ?? "tapedeck"
        var lines = ["From: \(route.from)", "To: \(route.to.joined(separator: ", "))",
                     "Subject: " + headerText("[\(event.machine)] \(event.title)" + (event.take.map { ": \($0)" } ?? "")),
                     "Date: \(date.string(from: event.time))", "Message-ID: <\(event.id)@\(domain)>",
                     "MIME-Version: 1.0", "Content-Type: text/plain; charset=utf-8", "Content-Transfer-Encoding: 8bit",
                     "X-Mailer: \(agent)", "", event.message, ""]
        var facts = ["Machine: \(event.machine)", "Time: \(event.timeText)"]
        if let session = event.session { facts.append("Session: \(session)") }
        if let take = event.take { facts.append("Take: \(take)") }
        if let frame = event.frame, let seconds = event.offsetSeconds { facts.append(String(format: "Where: frame %lld of the run (%.3f s)", frame, seconds)) }
        if let held = event.heldBack { facts += held.sorted { $0.key < $1.key }.map { "Held back: \($0.value) × \($0.key)" } }
        facts.append("Alert: \(event.id)")
        lines += facts
        // A line of a single dot would end the mail early: libcurl escapes it, as SMTP asks.
        return Data(lines.joined(separator: "\r\n").appending("\r\n").utf8)
    }

    /// Header text in ASCII: as it is, or RFC 2047's encoded form when it is not.
    static func headerText(_ text: String) -> String {
        let line = text.split(whereSeparator: \.isNewline).joined(separator: " ")
        if line.unicodeScalars.allSatisfy({ $0.isASCII && $0.value >= 32 }) { return line }
        return "=?UTF-8?B?" + Data(line.utf8).base64EncodedString() + "?="
    }

    // MARK: C strings

    private static func text<T>(of tuple: inout T) -> String {
        withUnsafeBytes(of: &tuple) { raw in
            String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
        }
    }

    private static func withCStrings<R>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>?, Int) -> R) -> R {
        var pointers: [UnsafeMutablePointer<CChar>?] = strings.map { strdup($0) }
        defer { pointers.forEach { free($0) } }
        return pointers.withUnsafeMutableBufferPointer { buffer in
            buffer.baseAddress!.withMemoryRebound(to: UnsafePointer<CChar>?.self, capacity: max(1, buffer.count)) { base in
                body(UnsafePointer(base), strings.count)
            }
        }
    }
}
