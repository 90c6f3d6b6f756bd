import Foundation
public import Logging
import Synchronization
import TapedeckCore

/// Raises alerts and sends them: each event goes to every rule whose `when:` takes it, within the
/// rule's limit (more are held back and sent as one summary when the rule has room again, or
/// when the run ends), through the outbox on disk, in order, each once. A route that fails is
/// tried again later (2 s, doubling to a minute) without holding up the others.
///
/// A class safe from any thread: ``raise(_:)`` never blocks (writing and sending run on the
/// center's own serial queue); ``finish(within:)`` suspends until the outbox is empty or the time
/// is up. Nothing is sent before ``start()``.
public final class AlertCenter: Sendable {
    public let rules: [AlertRule]
    public let outbox: AlertOutbox
    private let delivery: AlertDelivery
    private let logger: Logger
    private let queue = DispatchQueue(label: "tapedeck.alerts")
    private let state = Mutex(State())
    /// Between ``start()`` and ``finish(within:)``: the queue looks every second.
    private let running = Atomic<Bool>(false)

    private struct State {
        /// Per rule: when its recent messages were queued (monotonic seconds), and what it held back.
        var recent: [String: [Double]] = [:]
        var held: [String: [AlertEvent]] = [:]
        /// Per rule: a failed route's next try (monotonic seconds), its back-off, and what it said.
        var retry: [String: (at: Double, backoff: Double, error: String)] = [:]
    }

    public init(rules: [AlertRule], outbox: AlertOutbox, delivery: AlertDelivery, logger: Logger) {
        self.rules = rules
        self.outbox = outbox
        self.delivery = delivery
        self.logger = logger
    }

    /// Sends what earlier runs left in the outbox, then looks every second for alerts to send
    /// and summaries due.
    public func start() {
        guard !running.exchange(true, ordering: .acquiringAndReleasing) else { return }
        queue.async { [self] in tick() }
    }

    /// On the queue: summaries due, a pass over the outbox, and the next look in a second.
    private func tick() {
        guard running.load(ordering: .acquiring) else { return }
        summarizeDue(all: false)
        pass()
        queue.asyncAfter(deadline: .now() + 1) { [weak self] in self?.tick() }
    }

    /// Queues `event` for each rule that takes it, within the rule's limit.
    public func raise(_ event: AlertEvent) {
        let now = Self.monotonic()
        var accepted: [AlertRule] = []
        state.withLock { st in
            for rule in rules where event.matches(rule.when) {
                var recent = st.recent[rule.key, default: []].filter { now - $0 < rule.limitSeconds }
                if recent.count < rule.limitCount && st.held[rule.key, default: []].isEmpty {
                    recent.append(now)
                    accepted.append(rule)
                } else {
                    st.held[rule.key, default: []].append(event)
                }
                st.recent[rule.key] = recent
            }
        }
        guard !accepted.isEmpty else { return }
        let chosen = accepted
        queue.async { [self] in
            for rule in chosen { store(event, for: rule) }
            pass()
        }
    }

    /// Stops looking, sends the summaries of everything held back, and tries to send what waits
    /// until the outbox is empty or `within` has passed. Returns a sentence for each route whose
    /// alerts are left in the outbox (they are sent by the next run, or `tapedeck alerts send`).
    public func finish(within: Duration) async -> [String] {
        running.store(false, ordering: .releasing)
        let deadline = Self.monotonic() + Double(within.components.seconds) + Double(within.components.attoseconds) / 1e18
        return await withCheckedContinuation { (continuation: CheckedContinuation<[String], Never>) in
            queue.async { [self] in
                summarizeDue(all: true)
                while true {
                    let waiting = pass()
                    if waiting.isEmpty || Self.monotonic() >= deadline {
                        continuation.resume(returning: waiting)
                        return
                    }
                    let next = state.withLock { st in st.retry.values.map(\.at).min() } ?? Self.monotonic() + 0.5
                    let sleep = max(0.05, min(next, deadline) - Self.monotonic())
                    Thread.sleep(forTimeInterval: sleep)
                }
            }
        }
    }

    // MARK: on the queue

    private func store(_ event: AlertEvent, for rule: AlertRule) {
        do {
            try outbox.add(event, for: rule)
        } catch {
            logger.error("\(String(describing: (error as? TapedeckError)?.message ?? "\(error)")) The alert \"\(event.title)\" for \(rule.name) is not kept.")
        }
    }

    /// Queues a summary for each rule with alerts held back that has room again (`all`: every one).
    private func summarizeDue(all: Bool) {
        let now = Self.monotonic()
        let due: [(AlertRule, [AlertEvent])] = state.withLock { st in
            rules.compactMap { rule in
                guard let held = st.held[rule.key], !held.isEmpty else { return nil }
                let recent = st.recent[rule.key, default: []].filter { now - $0 < rule.limitSeconds }
                guard all || recent.count < rule.limitCount else { return nil }
                st.held[rule.key] = nil
                st.recent[rule.key] = recent + [now]
                return (rule, held)
            }
        }
        for (rule, held) in due { store(Self.summary(of: held, rule: rule), for: rule) }
    }

    /// One summary for alerts a rule held back.
    static func summary(of held: [AlertEvent], rule: AlertRule) -> AlertEvent {
        var counts: [String: Int] = [:]
        for event in held { counts[event.title, default: 0] += 1 }
        let last = held[held.count - 1]
        let list = counts.sorted { $0.key < $1.key }.map { "\($0.key) ×\($0.value)" }.joined(separator: ", ")
        let window = rule.limitSeconds >= 3600 ? "\(Int(rule.limitSeconds / 3600)) h" : rule.limitSeconds >= 60 ? "\(Int(rule.limitSeconds / 60)) min" : "\(Int(rule.limitSeconds)) s"
        var event = AlertEvent(kind: last.kind, phase: .once, machine: last.machine,
                               title: "\(held.count) more alert\(held.count == 1 ? "" : "s")",
                               message: "\(held.count) alert\(held.count == 1 ? " was" : "s were") held back (\(rule.name) sends at most \(rule.limitCount) in \(window)): \(list). The latest: \(last.message)")
        event.session = last.session
        event.take = last.take
        event.heldBack = counts
        return event
    }

    /// Sends what waits, oldest first, each route in its order; a route that fails waits for its
    /// next try. Returns a sentence per route with alerts still waiting.
    @discardableResult
    private func pass() -> [String] {
        let result = outbox.whileSending { () -> [String] in
            var stopped = Set<String>()
            var waiting: [String: Int] = [:]
            for entry in outbox.entries() {
                guard let rule = rules.first(where: { $0.key == entry.rule && AlertOutbox.fingerprint($0.route) == entry.route }) else {
                    logger.warning("An alert for \(entry.rule) was not sent: that rule is no longer in the config (or sends elsewhere now). It is taken out of the outbox.")
                    outbox.remove(entry)
                    continue
                }
                let now = Self.monotonic()
                if stopped.contains(rule.key) || (state.withLock { $0.retry[rule.key].map { now < $0.at } ?? false }) {
                    stopped.insert(rule.key)
                    waiting[rule.key, default: 0] += 1
                    continue
                }
                do {
                    try delivery.send(entry.event, through: rule.route)
                    outbox.remove(entry)
                    let recovered = state.withLock { $0.retry.removeValue(forKey: rule.key) }
                    if recovered != nil { logger.notice("The \(rule.route.type) of \(rule.name) takes alerts again.") }
                } catch {
                    let message = (error as? TapedeckError)?.message ?? "\(error)"
                    let first = state.withLock { st in
                        let backoff = min(60, (st.retry[rule.key]?.backoff ?? 1) * 2)
                        let first = st.retry[rule.key] == nil
                        st.retry[rule.key] = (now + backoff, backoff, message)
                        return first
                    }
                    if first { logger.warning("\(message) The alert waits in the outbox and is tried again.") }
                    stopped.insert(rule.key)
                    waiting[rule.key, default: 0] += 1
                }
            }
            return waiting.sorted { $0.key < $1.key }.map { key, count in
                let rule = rules.first { $0.key == key }
                let error = state.withLock { $0.retry[key]?.error } ?? ""
                return "\(count) alert\(count == 1 ? "" : "s") for \(rule?.name ?? key) (\(rule?.route.type ?? "route") \(rule?.route.destination ?? "")): \(error)"
            }
        }
        // Another process sends meanwhile: nothing is said to wait here.
        return result ?? []
    }

    private static func monotonic() -> Double {
        Double(DispatchTime.now().uptimeNanoseconds) / 1e9
    }
}
