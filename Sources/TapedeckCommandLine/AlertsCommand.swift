import ArgumentParser
import Foundation
import TapedeckAlerts
import TapedeckAssembly
import TapedeckCore

struct AlertsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "alerts",
        abstract: "The alerts of the config's alerts: rules: list them, test every route, send what waits.",
        discussion: """
            A recording raises alerts when the input goes silent (--silence-alarm) and when sound \
            is back, when the device is lost and back, on overruns, when no frame arrives for 10 s, \
            when the disk runs low (storage.warn-free-minutes) and when a take is cut short. Each \
            rule of the config file's alerts: list sends the events its when: names through one \
            route (webhook, ntfy or email), at most as many as its limit: (6/10m unless given); \
            more are sent as one summary. An alert that cannot be sent waits in the outbox \
            ($XDG_STATE_HOME/tapedeck/alerts) and is sent, in order and once, when the route \
            takes it again, also by the next run. `tapedeck config example` shows the rules.
            """,
        subcommands: [AlertsListCommand.self, AlertsTestCommand.self, AlertsSendCommand.self],
        defaultSubcommand: AlertsListCommand.self)
}

/// `tapedeck alerts list`: the rules and what waits for each.
struct AlertsListCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "List the alert rules, where each sends, and the alerts waiting in the outbox.")

    @OptionGroup var global: GlobalOptions

    /// `10m`, `1h`, `90s`: a limit's time as the config writes it.
    static func window(_ seconds: Double) -> String {
        let s = Int(seconds)
        return s % 86_400 == 0 ? "\(s / 86_400)d" : s % 3600 == 0 ? "\(s / 3600)h" : s % 60 == 0 ? "\(s / 60)m" : "\(s)s"
    }

    @MainActor
    func run() async throws {
        try await reportingErrors {
            let studio = try global.makeStudioWithoutLibrary()
            let rules = studio.configuration.alerts
            guard !rules.isEmpty else {
                print(AlertsTestCommand.noRules(studio))
                return
            }
            let outbox = AlertOutbox(folder: UserPaths(environment: ProcessInfo.processInfo.environment).alertsFolder)
            let entries = outbox.entries()
            let waiting = Dictionary(grouping: entries, by: \.rule)
            let keys = Set(rules.map(\.key))
            defer {
                let unrouted = entries.filter { !keys.contains($0.rule) }.count
                if unrouted > 0 {
                    print("\(Terminal.counted(unrouted, "alert")) \(unrouted == 1 ? "waits" : "wait") for a rule no longer in the config (removed, or an unnamed rule whose route changed; give rules a name: to keep their alerts when the route changes). `tapedeck alerts send --discard-unrouted` removes \(unrouted == 1 ? "it" : "them").")
                }
            }
            for rule in rules {
                let kinds = AlertKind.selectable.filter { rule.when.contains($0) }.map(\.rawValue).joined(separator: ", ")
                print("\(rule.name): \(rule.route.type) \(rule.route.destination)")
                print("  when: \(kinds); at most \(rule.limitCount) in \(Self.window(rule.limitSeconds))")
                if let entries = waiting[rule.key], !entries.isEmpty {
                    print("  waiting in the outbox: \(Terminal.counted(entries.count, "alert")), the oldest from \(entries[0].event.timeText)")
                }
            }
        }
    }
}

/// `tapedeck alerts test`: one test message through every route, and what each said.
struct AlertsTestCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "test",
        abstract: "Send a test alert through every route of the config's alerts: rules and say which worked.",
        discussion: "Exits 0 when every route took the test, 74 when one did not (its message says why), 78 when there are no rules or one is wrong.")

    @OptionGroup var global: GlobalOptions

    @MainActor
    static func noRules(_ studio: Studio) -> String {
        "No alerts are configured\(studio.configPlace). Add an alerts: list, e.g.\n"
            + "  alerts:\n    - when: [silence, device-lost, disk-low]\n      webhook: { url: https://hooks.example.org/tapedeck }\n"
            + "`tapedeck config example` shows every route and event."
    }

    @MainActor
    func run() async throws {
        try await reportingErrors {
            let studio = try global.makeStudioWithoutLibrary()
            let rules = studio.configuration.alerts
            guard !rules.isEmpty else { throw TapedeckError(.configuration, Self.noRules(studio)) }
            let environment = ProcessInfo.processInfo.environment
            let delivery = AlertDelivery(environment: environment, agent: "tapedeck/\(TapedeckVersion.string)")
            let machine = studio.machineName
            var failed = 0
            for rule in rules {
                let event = AlertEvent(kind: .test, phase: .once, machine: machine, title: "Test alert",
                                       message: "A test of \(rule.name) from `tapedeck alerts test` on \(machine): this route works.")
                let route = rule.route
                let outcome: String? = await Task.detached {
                    do { try delivery.send(event, through: route); return nil } catch {
                        return (error as? TapedeckError)?.message ?? "\(error)"
                    }
                }.value
                if let outcome {
                    failed += 1
                    print("\(rule.name): \(route.type) \(route.destination): FAILED: \(outcome)")
                } else {
                    print("\(rule.name): \(route.type) \(route.destination): sent")
                }
            }
            if failed > 0 {
                throw TapedeckError(.io, "\(failed) of \(rules.count) route\(rules.count == 1 ? "" : "s") did not take the test alert. Fix what each says, then run `tapedeck alerts test` again.")
            }
        }
    }
}

/// `tapedeck alerts send`: sends what waits in the outbox now.
struct AlertsSendCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "send",
        abstract: "Send the alerts waiting in the outbox now (a recording sends them by itself).",
        discussion: "Tries for up to --wait seconds. Exits 0 when the outbox is empty, 74 when alerts are left (each route's reason is said).")

    @Option(help: ArgumentHelp("Seconds to keep trying a route that fails.", valueName: "seconds"))
    var wait = 10

    @Flag(help: "Remove the alerts that wait for a rule no longer in the config, instead of keeping them.")
    var discardUnrouted = false

    @OptionGroup var global: GlobalOptions

    @MainActor
    func run() async throws {
        try await reportingErrors {
            let studio = try global.makeStudioWithoutLibrary()
            guard let center = studio.makeAlertCenter(environment: ProcessInfo.processInfo.environment) else {
                throw TapedeckError(.configuration, AlertsTestCommand.noRules(studio))
            }
            let discarded = discardUnrouted ? center.discardUnrouted() : 0
            if discarded > 0 { print("Removed \(Terminal.counted(discarded, "alert")) that waited for a rule no longer in the config.") }
            let outcome = await center.finish(within: .seconds(max(0, wait)))
            if outcome.sent > 0 { print("Sent \(Terminal.counted(outcome.sent, "alert")).") }
            for line in outcome.waiting { Terminal.printError("\(line).") }
            if outcome.unrouted > 0 {
                Terminal.printError("\(Terminal.counted(outcome.unrouted, "alert")) \(outcome.unrouted == 1 ? "waits" : "wait") for a rule no longer in the config; `tapedeck alerts send --discard-unrouted` removes \(outcome.unrouted == 1 ? "it" : "them").")
            }
            if !outcome.waiting.isEmpty {
                throw TapedeckError(.io, "Alerts are left in the outbox. Run `tapedeck alerts send` again once the route works.")
            }
            let left = center.outbox.entries().count - outcome.unrouted
            if left > 0 {
                print("Another Tapedeck (a recording, or `tapedeck alerts send`) is sending the \(Terminal.counted(left, "alert")) that wait.")
            } else if outcome.sent == 0 && discarded == 0 {
                print("The outbox is empty: nothing to send.")
            }
        }
    }
}

extension Studio {
    /// Where a section of the config goes, for messages that ask for one: ` in FILE`, or, with
    /// no config file, where `tapedeck config init` writes one. - Thread: main actor.
    @MainActor
    var configPlace: String {
        if let file = configuration.file { return " in \(file)" }
        let home = UserPaths(environment: ProcessInfo.processInfo.environment).configHome
        return " (there is no config file: `tapedeck config init` writes one at \(home)/tapedeck/config.yaml)"
    }
}
