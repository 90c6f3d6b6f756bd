import Foundation
import TapedeckCore

/// Where a rule's alerts go. A plain value; credentials are named (an environment variable or a
/// private file), never held in it, so it can be printed.
public enum AlertRoute: Sendable, Hashable {
    /// A JSON POST (`template: default`), or `{"text": …}` for chat hooks (`template: text`).
    case webhook(url: String, template: WebhookTemplate, credentials: AlertCredentialSource)
    /// An ntfy topic: the message as the POST's body, the title and priority as headers.
    case ntfy(url: String, credentials: AlertCredentialSource)
    /// A mail over SMTP.
    case email(EmailRoute)

    public enum WebhookTemplate: String, Sendable, Hashable, CaseIterable {
        case `default`, text
    }

    /// `webhook`, `ntfy` or `email`.
    public var type: String {
        switch self {
        case .webhook: "webhook"
        case .ntfy: "ntfy"
        case .email: "email"
        }
    }

    /// Where it goes, for messages: the URL without its query and user part, or the server and
    /// the recipients.
    public var destination: String {
        switch self {
        case .webhook(let url, _, _), .ntfy(let url, _): Self.shown(url)
        case .email(let mail): "\(mail.to.joined(separator: ", ")) through \(mail.server)"
        }
    }

    /// A URL as messages show it: scheme, host and port, and `/…` for a path: a chat hook's path
    /// and an ntfy topic are secrets, as a query or user part may be.
    static func shown(_ url: String) -> String {
        guard let parts = URLComponents(string: url), let scheme = parts.scheme, let host = parts.host else { return "(a URL)" }
        let path = parts.path.isEmpty || parts.path == "/" ? "" : "/…"
        return "\(scheme)://\(host)\(parts.port.map { ":\($0)" } ?? "")\(path)"
    }
}

/// An `email:` route. A plain value.
public struct EmailRoute: Sendable, Hashable {
    /// `HOST:PORT` (587 when no port is given; 465 is TLS from the start).
    public var server: String
    public var from: String
    public var to: [String]
    /// STARTTLS required (the default): a server that does not offer it is not sent to.
    public var startTLS: Bool
    public var username: String?
    public var credentials: AlertCredentialSource

    /// The URL libcurl is given: `smtps://` on port 465, else `smtp://`.
    public var url: String {
        let port = server.split(separator: ":").last.flatMap { Int($0) }
        return (port == 465 ? "smtps://" : "smtp://") + server
    }
}

/// One entry of the config's `alerts:` list: which events, where to, and how many messages at
/// most in a time (`limit: 6/10m`; more are held back and sent as one summary). A plain value.
public struct AlertRule: Sendable, Hashable {
    /// The rule's place in the list, from 1.
    public var number: Int
    /// `name:`, or `alerts[N]`.
    public var name: String
    /// Whether the config names it (`name:`): its waiting alerts follow it when its route changes.
    public var named = false
    public var when: Set<AlertKind>
    public var route: AlertRoute
    public var limitCount: Int
    public var limitSeconds: Double

    /// The default limit: 6 messages in 10 minutes.
    public static let defaultLimit = (count: 6, seconds: 600.0)

    /// What the outbox files its alerts under: the rule's name (letters, digits and dashes), or
    /// for a rule without a name its route (``AlertOutbox/fingerprint(_:)``), so moving a rule in
    /// the list keeps its alerts; an unnamed rule whose route changes leaves its alerts unrouted
    /// (`tapedeck alerts` says so).
    public var key: String {
        guard named else { return "route-" + AlertOutbox.fingerprint(route) + (duplicate > 0 ? "-\(duplicate + 1)" : "") }
        let allowed = name.lowercased().map { $0.isLetter || $0.isNumber ? $0 : "-" }
        return "rule-" + String(allowed.prefix(40))
    }
    /// Unnamed rules with the same route before this one.
    var duplicate = 0
}

/// A rule as the config file gives it: its keys (dotted, inside the list entry) with their
/// values and lines. A list inside it (`when: [silence, disk-low]`) is one value, its items
/// joined with ", ".
public struct AlertRuleText: Sendable, Hashable {
    public var line: Int?
    public var values: [String: String]
    public var lines: [String: Int]

    public init(line: Int?, values: [String: String], lines: [String: Int]) {
        self.line = line
        self.values = values
        self.lines = lines
    }
}

/// Reads the `alerts:` list. Every member is a pure function; any thread, never blocks.
public enum AlertRules {
    /// The keys an entry accepts.
    public static let keys: [String] = ["name", "when", "limit",
        "webhook", "webhook.url", "webhook.template", "webhook.token-env", "webhook.credentials-file",
        "ntfy", "ntfy.url", "ntfy.token-env", "ntfy.credentials-file",
        "email.smtp", "email.from", "email.to", "email.starttls", "email.username", "email.password-env", "email.credentials-file"]

    /// The rules, and a sentence for each problem (`FILE:LINE: alerts[N]: …`).
    public static func parse(_ items: [AlertRuleText], file: String) -> (rules: [AlertRule], problems: [String]) {
        var rules: [AlertRule] = []
        var problems: [String] = []
        for (index, item) in items.enumerated() {
            var reader = EntryReader(item: item, number: index + 1, file: file)
            if let rule = reader.rule() { rules.append(rule) }
            problems += reader.problems
        }
        var names = Set<String>()
        for index in rules.indices where !rules[index].named {
            rules[index].duplicate = rules[..<index].filter { !$0.named && $0.route == rules[index].route }.count
        }
        for rule in rules where !names.insert(rule.key).inserted {
            problems.append("\(file): alerts: two rules are named \"\(rule.name)\". Give each a name of its own (name: …).")
        }
        return (rules, problems)
    }

    /// A sentence for each rule whose credentials file cannot be used as it is (missing, a
    /// link, readable by others, another user's, without a secret), for `config check`.
    /// Environment variables are not checked: a service has an environment of its own.
    /// - Thread: any. Blocks briefly on reading the files.
    public static func credentialProblems(_ rules: [AlertRule], environment: [String: String]) -> [String] {
        rules.compactMap { rule in
            let source: AlertCredentialSource
            switch rule.route {
            case .webhook(_, _, let s), .ntfy(_, let s): source = s
            case .email(let mail): source = mail.credentials
            }
            guard case .file = source else { return nil }
            do {
                _ = try AlertSecrets.load(source, secret: "password", environment: environment)
                return nil
            } catch {
                return "alerts[\(rule.number)] (\(rule.name)): \((error as? TapedeckError)?.message ?? "\(error)")"
            }
        }
    }

    /// `6/10m` → (6, 600). - Throws: a sentence naming the forms accepted.
    static func limit(_ text: String) throws -> (Int, Double) {
        let parts = text.split(separator: "/", maxSplits: 1).map { String($0.trimmingSpaces) }
        guard parts.count == 2, let count = Int(parts[0]) else {
            throw TapedeckError(.configuration, "limit: \"\(text)\" is not a limit. Write messages per time, e.g. 6/10m or 20/1h.")
        }
        guard count >= 1, count <= 1000 else {
            throw TapedeckError(.configuration, "limit: \"\(text)\": give from 1 to 1000 messages per time, e.g. 6/10m.")
        }
        let per = parts[1].lowercased()
        let seconds: Double?
        if per.hasSuffix("h"), let h = Double(per.dropLast()) { seconds = h * 3600 }
        else if per.hasSuffix("m"), let m = Double(per.dropLast()) { seconds = m * 60 }
        else if per.hasSuffix("s"), let s = Double(per.dropLast()) { seconds = s }
        else if per.hasSuffix("d"), let d = Double(per.dropLast()) { seconds = d * 86_400 }
        else { seconds = nil }
        guard let seconds, seconds >= 1, seconds <= 7 * 86_400 else {
            throw TapedeckError(.configuration, "limit: \"\(text)\": the time must be seconds, minutes, hours or days (10m, 1h), at most a week.")
        }
        return (count, seconds)
    }
}

/// Reads one entry, collecting its problems.
private struct EntryReader {
    let item: AlertRuleText
    let number: Int
    let file: String
    var problems: [String] = []

    init(item: AlertRuleText, number: Int, file: String) {
        self.item = item
        self.number = number
        self.file = file
    }

    func place(_ key: String?) -> String {
        let line = key.flatMap { item.lines[$0] } ?? item.line
        return line.map { "\(file):\($0)" } ?? file
    }

    mutating func problem(_ key: String?, _ text: String) {
        problems.append("\(place(key)): alerts[\(number)]\(key.map { ".\($0)" } ?? ""): \(text)")
    }

    func value(_ key: String) -> String? {
        item.values[key].map { String($0.trimmingSpaces) }.flatMap { $0.isEmpty ? nil : $0 }
    }

    mutating func rule() -> AlertRule? {
        for key in item.values.keys.sorted() where !AlertRules.keys.contains(key) {
            let guess = Suggestion.closest(to: key, in: AlertRules.keys).map { " (did you mean \"\($0)\"?)" } ?? ""
            problem(key, "unknown setting\(guess). An alert takes when, a route (webhook, ntfy or email) and optionally name and limit.")
        }
        let when = kinds()
        var limit = AlertRule.defaultLimit
        if let text = value("limit") {
            do { limit = try AlertRules.limit(text) } catch let error as TapedeckError {
                problem("limit", String(error.message.dropFirst("limit: ".count)))
            } catch {}
        }
        let routes = ["webhook", "ntfy", "email"].filter { r in item.values.keys.contains { $0 == r || $0.hasPrefix(r + ".") } }
        guard routes.count == 1 else {
            problem(nil, routes.isEmpty
                ? "no route. Give one of webhook: { url: … }, ntfy: { url: … } or email: { smtp: …, from: …, to: … }."
                : "\(routes.joined(separator: " and ")) in one entry. Give each route an entry of its own.")
            return nil
        }
        guard let route = self.route(routes[0]), let when else { return nil }
        let name = value("name") ?? "alerts[\(number)]"
        var rule = AlertRule(number: number, name: name, when: when, route: route, limitCount: limit.count, limitSeconds: limit.seconds)
        rule.named = value("name") != nil
        return rule
    }

    mutating func kinds() -> Set<AlertKind>? {
        guard let text = value("when") else {
            problem(nil, "no when. Name the events, e.g. when: [silence, device-lost, disk-low]; known: \(AlertKind.selectable.map(\.rawValue).joined(separator: ", ")), or all.")
            return nil
        }
        var kinds = Set<AlertKind>()
        for word in text.split(separator: ",").map({ $0.trimmingSpaces.lowercased() }) where !word.isEmpty {
            if word == "all" { kinds.formUnion(AlertKind.selectable); continue }
            guard let kind = AlertKind(rawValue: word), kind != .test else {
                let known = AlertKind.selectable.map(\.rawValue)
                let guess = Suggestion.closest(to: word, in: known).map { " (did you mean \"\($0)\"?)" } ?? ""
                problem("when", "\"\(word)\" is not an event\(guess). Known: \(known.joined(separator: ", ")), or all.")
                return nil
            }
            kinds.insert(kind)
        }
        return kinds
    }

    mutating func credentials(_ route: String, secret: String) -> AlertCredentialSource {
        let env = value("\(route).\(secret)-env")
        let file = value("\(route).credentials-file")
        if env != nil && file != nil {
            problem("\(route).credentials-file", "give \(route).\(secret)-env or \(route).credentials-file, not both.")
        }
        if let env { return .environment(env) }
        if let file {
            // A relative path is the config file's folder's, as the config names it.
            if file.hasPrefix("/") || file.hasPrefix("~") { return .file(file) }
            return .file(URL(fileURLWithPath: self.file).deletingLastPathComponent().appendingPathComponent(file).standardizedFileURL.path)
        }
        return .none
    }

    mutating func url(_ route: String) -> String? {
        let key = item.values["\(route).url"] != nil ? "\(route).url" : route
        guard let url = value(key) else {
            problem(key, "no URL. Give \(route): { url: https://… }.")
            return nil
        }
        guard let parts = URLComponents(string: url), let scheme = parts.scheme?.lowercased(), ["http", "https"].contains(scheme),
              let host = parts.host, !host.isEmpty else {
            problem(key, "\"\(AlertRoute.shown(url))\" is not an http:// or https:// URL.")
            return nil
        }
        if parts.password != nil {
            problem(key, "the URL holds a password. Keep it out of the config: put it in a credentials file (\(route).credentials-file) or name an environment variable (\(route).token-env).")
            return nil
        }
        return url
    }

    mutating func route(_ type: String) -> AlertRoute? {
        switch type {
        case "webhook":
            let templateText = value("webhook.template") ?? "default"
            guard let template = AlertRoute.WebhookTemplate(rawValue: templateText) else {
                problem("webhook.template", "\"\(templateText)\" is not a template. Known: default (the event as JSON), text ({\"text\": …} for chat hooks).")
                return nil
            }
            let credentials = self.credentials("webhook", secret: "token")
            guard let url = url("webhook") else { return nil }
            return .webhook(url: url, template: template, credentials: credentials)
        case "ntfy":
            let credentials = self.credentials("ntfy", secret: "token")
            guard let url = url("ntfy") else { return nil }
            return .ntfy(url: url, credentials: credentials)
        default:
            return email()
        }
    }

    mutating func email() -> AlertRoute? {
        let credentials = self.credentials("email", secret: "password")
        var server = value("email.smtp")
        if server == nil { problem("email", "no email.smtp. Give the server as HOST:PORT, e.g. smtp: smtp.example.org:587.") }
        if let s = server, !s.contains(":") { server = s + ":587" }
        if let s = server, s.split(separator: ":").last.flatMap({ Int($0) }).map({ !(1...65535).contains($0) }) ?? true {
            problem("email.smtp", "\"\(s)\" is not HOST:PORT.")
            server = nil
        }
        let from = value("email.from")
        if from.map({ !$0.contains("@") }) ?? true { problem(from == nil ? "email" : "email.from", "give the sender's address (from: recorder@example.org).") }
        let to = (value("email.to") ?? "").split(separator: ",").map { String($0.trimmingSpaces) }.filter { !$0.isEmpty }
        if to.isEmpty || to.contains(where: { !$0.contains("@") }) {
            problem(to.isEmpty ? "email" : "email.to", "give the recipients' addresses (to: [you@example.org]).")
        }
        var startTLS = true
        if let text = value("email.starttls") {
            guard let flag = ["true": true, "yes": true, "on": true, "false": false, "no": false, "off": false][text.lowercased()] else {
                problem("email.starttls", "\"\(text)\" is not true or false.")
                return nil
            }
            startTLS = flag
        }
        let username = value("email.username")
        if username == nil, credentials != .none, case .environment = credentials {
            problem("email.password-env", "a password needs email.username too.")
        }
        guard let server, let from, !to.isEmpty, !to.contains(where: { !$0.contains("@") }) else { return nil }
        return .email(EmailRoute(server: server, from: from, to: to, startTLS: startTLS, username: username, credentials: credentials))
    }
}
