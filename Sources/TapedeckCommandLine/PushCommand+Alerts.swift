import Foundation
import TapedeckAlerts
import TapedeckApp
import TapedeckAssembly
import TapedeckCore

/// Turns what `push --watch` finds into alerts (the config's `alerts:` rules): `upload-failed`
/// when a take's upload fails or the remote cannot be reached, resolved when the take is
/// verified or the remote answers again; `upload-stale` when a finished take has waited longer
/// than an hour (``UploadBacklog/staleSeconds``), resolved when none has. Main actor only; the
/// alert center writes and sends off it.
@MainActor
final class PushAlerts {
    let center: AlertCenter
    let machine: String
    /// The open `upload-failed` alerts, by take id (`""` for the remote itself).
    private var failing: [String: AlertEvent] = [:]
    private var stale: AlertEvent?

    init(center: AlertCenter, machine: String) {
        self.center = center
        self.machine = machine
    }

    /// The alerts of `studio`'s config, started; `nil` when there are none.
    static func start(_ studio: Studio) -> PushAlerts? {
        guard let center = studio.makeAlertCenter(environment: ProcessInfo.processInfo.environment) else { return nil }
        center.start()
        return PushAlerts(center: center, machine: studio.machineName)
    }

    @discardableResult
    private func raise(_ kind: AlertKind, _ phase: AlertEvent.Phase, _ title: String, _ message: String,
                       take: String? = nil, resolving began: AlertEvent? = nil) -> AlertEvent {
        var event = AlertEvent(kind: kind, phase: phase, machine: machine, title: title, message: message)
        event.take = take ?? began?.take
        event.session = event.take?.split(separator: "/").first.map(String.init)
        if let began {
            event.resolves = began.id
            event.durationSeconds = max(0, event.time.timeIntervalSince(began.time))
        }
        center.raise(event)
        return event
    }

    /// A round of uploads ended with these outcomes: failures began, recoveries resolved (a
    /// round that ran also means the remote answered).
    func roundEnded(_ outcomes: [(TakePusher.Item, TakePusher.Outcome)]) {
        // A remote that cannot be reached is one alert, not one per take.
        let unreachable = outcomes.lazy.compactMap { _, outcome -> TapedeckError? in
            if case .failed(let error) = outcome, error.code == .remoteUnavailable { return error }
            return nil
        }.first
        if let unreachable { remoteFailed(unreachable) } else if !outcomes.isEmpty { remoteAnswered() }
        for (item, outcome) in outcomes {
            let name = "\(item.session.name)/\(item.take.name)"
            if case .failed(let error) = outcome {
                guard error.code != .remoteUnavailable else { continue }
                guard failing[item.take.id] == nil else { continue }
                failing[item.take.id] = raise(.uploadFailed, .began, "Upload failed",
                                              "The upload of \(name) failed: \(error.message) `push --watch` tries it again each round.", take: name)
            } else if let began = failing.removeValue(forKey: item.take.id) {
                raise(.uploadFailed, .resolved, "Upload done", "\(name) is uploaded and verified after all.", resolving: began)
            }
        }
    }

    /// The remote could not be reached (or was busy) for a round.
    func remoteFailed(_ error: TapedeckError) {
        guard failing[""] == nil else { return }
        failing[""] = raise(.uploadFailed, .began, "Remote unreachable",
                            "\(error.message) `push --watch` tries again each round; takes wait in the library meanwhile.")
    }

    private func remoteAnswered() {
        if let began = failing.removeValue(forKey: "") {
            raise(.uploadFailed, .resolved, "Remote reachable", "The remote answers again; the takes that waited are being uploaded.", resolving: began)
        }
    }

    /// What waits for upload in `pusher`'s library now (see ``look(at:)``).
    func lookAtBacklog(_ pusher: TakePusher) {
        if let backlog = UploadBacklog.measure(pusher.store, ledger: pusher.ledger) { look(at: backlog) }
    }

    /// What waits for upload now: stale began when a take has waited more than an hour,
    /// resolved when none has.
    func look(at backlog: UploadBacklog) {
        if stale == nil, backlog.isStale {
            stale = raise(.uploadStale, .began, "Uploads behind",
                  "\(Terminal.counted(backlog.takes, "take")) wait for upload; \(backlog.oldest ?? "the oldest") finished \(RecordAlerts.duration(backlog.oldestSeconds ?? 0)) ago and is not yet verified on the remote.",
                  take: backlog.oldest)
        } else if let began = stale, !backlog.isStale {
            stale = nil
            raise(.uploadStale, .resolved, "Uploads caught up",
                  backlog.takes == 0 ? "Every finished take is uploaded and verified." : "No take has waited longer than an hour for its upload now.", resolving: began)
        }
    }

    /// `push --watch` is stopping: what waits is sent for up to 10 s; what is left stays in the
    /// outbox for the next run or `tapedeck alerts send`.
    func end() async {
        let outcome = await center.finish(within: .seconds(RecordAlerts.flushSeconds))
        for line in outcome.waiting {
            Terminal.printError("\(line). They wait in the outbox: the next run sends them, or `tapedeck alerts send`.")
        }
    }
}
