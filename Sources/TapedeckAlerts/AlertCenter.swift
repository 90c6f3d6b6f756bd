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
/// center's own queues: one writes the outbox, one sends); ``finish(within:)`` suspends until the outbox is empty or the time
/// is up. Nothing is sent before ``start()``.
public final class AlertCenter: Sendable {
    public let rules: [AlertRule]
    public let outbox: AlertOutbox
    private let delivery: AlertDelivery
    private let logger: Logger
    private let queue = DispatchQueue(label: "tapedeck.alerts")
    /// Writes to the outbox, in the order alerts are raised: never behind a route that does not answer.
    private let writes = DispatchQueue(label: "tapedeck.alerts.outbox")
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
        writes.async { [self] in
            for rule in chosen { store(event, for: rule) }
            queue.async { [self] in pass() }
        }
    }

    /// What a ``finish(within:)`` did: alerts sent, a sentence for each route whose alerts are
    /// left waiting, and alerts waiting for a rule no longer in the config (never sent elsewhere).
    public struct Outcome: Sendable, Hashable {
        public var sent = 0
        public var waiting: [String] = []
        public var unrouted = 0

        public init(sent: Int = 0, waiting: [String] = [], unrouted: Int = 0) {
            self.sent = sent
            self.waiting = waiting
            self.unrouted = unrouted
        }
    }

    /// Stops looking, sends the summaries of everything held back, and tries to send what waits
    /// until the outbox is empty or `within` has passed (a route that does not answer is given no
    /// more than the time left). What is left is sent by the next run or `tapedeck alerts send`.
    public func finish(within: Duration) async -> Outcome {
        running.store(false, ordering: .releasing)
        let deadline = Self.monotonic() + Double(within.components.seconds) + Double(within.components.attoseconds) / 1e18
        return await withCheckedContinuation { (continuation: CheckedContinuation<Outcome, Never>) in
            queue.async { [self] in
                writes.sync {}  // every alert raised is in the outbox
                summarizeDue(all: true)
                var outcome = Outcome()
                while true {
                    let pass = pass(deadline: deadline)
                    outcome.sent += pass.sent
                    outcome.waiting = pass.waiting
                    outcome.unrouted = pass.unrouted
                    if pass.waiting.isEmpty || Self.monotonic() >= deadline {
                        continuation.resume(returning: outcome)
                        return
                    }
                    let next = state.withLock { st in st.retry.values.map(\.at).min() } ?? Self.monotonic() + 0.5
                    Thread.sleep(forTimeInterval: max(0.05, min(next, deadline) - Self.monotonic()))
                }
            }
        }
    }

    /// The alerts waiting for a rule no longer in the config (an unnamed rule whose route changed,
    /// or one removed): taken out of the outbox. Returns how many. Blocks on the disk.
    public func discardUnrouted() -> Int {
        let keys = Set(rules.map(\.key))
        var count = 0
        for entry in outbox.entries() where !keys.contains(entry.rule) {
            outbox.remove(entry)
            count += 1
        }
        return count
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
        writes.sync {
            for (rule, held) in due { store(Self.summary(of: held, rule: rule), for: rule) }
        }
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

    /// Sends what waits, oldest first, each route's alerts in their order and the routes side by
    /// side (one that does not answer holds up only its own); a route that fails waits for its
    /// next try. Transfers end by `deadline` (or in 15 s). Holds the sending lock: another process
    /// sending meanwhile makes this pass do nothing.
    @discardableResult
    private func pass(deadline: Double? = nil) -> Outcome {
        let result = outbox.whileSending { () -> Outcome in
            let keys = Set(rules.map(\.key))
            let entries = outbox.entries()
            var outcome = Outcome()
            outcome.unrouted = entries.filter { !keys.contains($0.rule) }.count
            let groups = rules.map { rule in (rule, entries.filter { $0.rule == rule.key }) }.filter { !$0.1.isEmpty }
            let counts = Mutex([Int](repeating: 0, count: groups.count))
            DispatchQueue.concurrentPerform(iterations: groups.count) { index in
                let sent = send(groups[index].1, through: groups[index].0, deadline: deadline)
                counts.withLock { $0[index] = sent }
            }
            let sent = counts.withLock { $0 }
            outcome.sent = sent.reduce(0, +)
            for (index, (rule, group)) in groups.enumerated() where sent[index] < group.count {
                let left = group.count - sent[index]
                let error = state.withLock { $0.retry[rule.key]?.error } ?? "not tried yet"
                outcome.waiting.append("\(left) alert\(left == 1 ? "" : "s") for \(rule.name) (\(rule.route.type) \(rule.route.destination)): \(Self.sentence(error))")
            }
            return outcome
        }
        return result ?? Outcome()
    }

    /// Sends `entries` (one rule's, oldest first) until one fails; returns how many left the outbox.
    private func send(_ entries: [AlertOutbox.Entry], through rule: AlertRule, deadline: Double?) -> Int {
        var done = 0
        for entry in entries {
            let now = Self.monotonic()
            if state.withLock({ $0.retry[rule.key].map { now < $0.at } ?? false }) { return done }
            let timeout = deadline.map { Int(max(1, min(15, ($0 - now).rounded(.up)))) } ?? 15
            if deadline.map({ now >= $0 }) ?? false { return done }
            do {
                try delivery.send(entry.event, through: rule.route, timeoutSeconds: timeout)
                outbox.remove(entry)
                done += 1
                if state.withLock({ $0.retry.removeValue(forKey: rule.key) }) != nil {
                    logger.notice("The \(rule.route.type) of \(rule.name) takes alerts again.")
                }
            } catch let refused as AlertRefused {
                // Sending it again would be refused again: it leaves the outbox, said loudly.
                logger.error("\(refused.message) The alert \"\(entry.event.title)\" (\(entry.event.id)) is taken out of the outbox: fix the route, then `tapedeck alerts test`.")
                outbox.remove(entry)
                done += 1
            } catch {
                let message = (error as? TapedeckError)?.message ?? "\(error)"
                let first = state.withLock { st in
                    let backoff = min(60, (st.retry[rule.key]?.backoff ?? 1) * 2)
                    let first = st.retry[rule.key] == nil
                    st.retry[rule.key] = (now + backoff, backoff, message)
                    return first
                }
                if first { logger.warning("\(message) The alert waits in the outbox and is tried again.") }
                return done
            }
        }
        return done
    }

    /// `text` without its closing full stop, to go inside another sentence.
    static func sentence(_ text: String) -> String {
        text.hasSuffix(".") ? String(text.dropLast()) : text
    }

    private static func monotonic() -> Double {
        Double(DispatchTime.now().uptimeNanoseconds) / 1e9
    }
}
