import ArgumentParser
import Foundation
import TapedeckApp
import TapedeckAssembly
import Synchronization
import TapedeckCore
#if canImport(Glibc)
import Glibc
#endif

struct PushCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "push",
        abstract: "Upload finished takes to the configured remote (sync: in the config file), verified.",
        discussion: """
            Each take goes up as MACHINE/SESSION-ID/TAKE-ID.EXT: the audio first, then a check of \
            what the server holds (size and its checksum), then a manifest (TAKE-ID.json) that \
            marks the take complete. Only then is the take "verified" in the library. Running push \
            again sends nothing that is already there; an upload stopped by Ctrl-C, a dropped \
            network or a killed process resumes where it stopped. Takes being recorded wait for \
            the next run. Nothing local is deleted unless sync.keep-local says so, and then only \
            verified takes. A verified take is not looked at again unless --verify-remote asks \
            (or sync.keep-local or fleet doctor found its remote copy in doubt: the next push \
            checks those by itself); what is missing on the remote, or older than the take here, \
            is sent again. Exit status: 0 when every take is verified, else that of the first \
            failure (69: the server could not be reached or failed, 73: the remote holds other \
            audio under a take's name, 74: the remote's copy and the take here differ though the \
            take did not change, 78: configuration or credentials).
            """ + HelpExamples.text([
            "tapedeck push --dry-run": "What would go, checked against what the remote holds.",
            "tapedeck push": "Every finished take not yet verified on the remote.",
            "tapedeck push --watch": "Each take as it finishes, until Ctrl-C.",
        ]))

    @Argument(help: "Takes (SESSION/TAKE, a short id, `last`) or sessions to push.", completion: TakeCompletion.kind(.both))
    var references: [String] = []

    @Flag(help: "Push every finished take of the library (the default when no take or session is named).")
    var all = false

    @Flag(name: .customLong("dry-run"), help: "Only say which takes would be pushed.")
    var dryRun = false

    @Flag(name: .customLong("verify-remote"),
          help: "Check that the remote still holds every verified take (its audio's size and checksum, read again from the file here, and its manifest) and send again what is missing or stale. With --watch: the first round only.")
    var verifyRemote = false

    @Flag(help: "Print the result as JSON.")
    var json = false

    @Flag(help: "Keep running: push takes as they finish, until Ctrl-C (beside an unattended recorder).")
    var watch = false

    @Option(name: .customLong("interval"), help: "With --watch: seconds between looks at the library (default 10).")
    var interval: Double = 10

    @Option(name: .customLong("limit-rate"), help: "Send at most this many bytes per second, e.g. 500k, 2M, 2MiB/s.")
    var limitRate: String?

    @OptionGroup var global: GlobalOptions

    @MainActor
    mutating func run() async throws {
        let (references, all, dryRun, json, watch, interval, limitRate) = (self.references, self.all, self.dryRun, self.json, self.watch, self.interval, self.limitRate)
        let verifyRemote = self.verifyRemote
        try await reportingErrors {
            if all && !references.isEmpty {
                throw TapedeckError(.invalidArgument, "--all pushes every take: give it without takes or sessions.")
            }
            if watch && (dryRun || !references.isEmpty) {
                throw TapedeckError(.invalidArgument, "--watch pushes every take as it finishes: give it without takes, sessions or --dry-run.")
            }
            guard interval >= 1 && interval <= 86_400 else {
                throw TapedeckError(.invalidArgument, "--interval \(interval): give seconds between 1 and 86400.")
            }
            var options = UploadOptions()
            if let limitRate {
                guard let rate = RateLimiter.parse(limitRate) else {
                    throw TapedeckError(.invalidArgument, "--limit-rate \(limitRate): not a rate. Give bytes per second, e.g. 500k, 2M or 2MiB/s.")
                }
                options.bytesPerSecond = rate
            }
            // The remote's settings and credentials are checked before the library is opened (or made).
            let studio = try global.makeStudioWithoutLibrary()
            let keepLocal = try studio.keepLocalSeconds()
            let remote = try studio.makeRemote()
            let catalog = try studio.makeFleetIndex(environment: ProcessInfo.processInfo.environment)
            let pusher: TakePusher
            let lock: Int32
            do {
                ErrorAdvice.current?.writingLibrary(studio)
                try await studio.openLibrary(loadingSessions: true)
                pusher = studio.makePusher(remote: remote)
                lock = try pusher.ledger.claim(timeout: watch ? 0 : 5)
            } catch {
                await remote.shutdown()
                throw error
            }
            defer { close(lock) }
            // The trap is armed before the work starts, so that no stop is missed and a trap that
            // cannot be armed leaves nothing running.
            let stopRequested = StopRequest()
            let signals: SignalTrap
            do { signals = try SignalTrap(signals: [SIGINT, SIGTERM, SIGHUP]) { _ in stopRequested.stop() } } catch {
                await remote.shutdown()
                throw error
            }
            defer { signals.cancel() }
            let alerts = watch ? PushAlerts.start(studio) : nil
            let heartbeat = watch ? CatalogHeartbeat.start(studio, role: "push", state: CatalogHeartbeat.pushing(pusher)) : nil
            defer { heartbeat?.stop() }
            let work = Task { @MainActor () -> [PushRound] in
                var rounds: [PushRound] = []
                var catalogDown = false
                repeat {
                    do {
                        if watch { try await studio.store.refresh() }
                        let selected = try Self.select(references, in: studio.store)
                        // --verify-remote checks every verified take once; later rounds only new takes.
                        let items = try pusher.pending(in: selected, verifyRemote: verifyRemote && rounds.isEmpty)
                        let empty = !selected.contains { $0.0.state != .recording }
                        if dryRun {
                            // Asks the remote what it holds: credentials, bucket and server checked now.
                            let held = items.isEmpty ? [:] : try await pusher.remoteSizes(of: items)
                            rounds.append(PushRound(items: items, outcomes: [], deleted: [], dryRun: true, libraryIsEmpty: empty, remoteSizes: held))
                            break
                        }
                        if items.isEmpty && watch {
                            await Self.catalogue(pusher, catalog, json: json, down: &catalogDown)
                            alerts?.lookAtBacklog(pusher)
                            try await Task.sleep(for: .seconds(interval))
                            continue
                        }
                        let display = PushDisplay(json: json, machine: pusher.machine, location: remote.location, count: items.count)
                        let outcomes = await pusher.push(items, options: options) { display.show($0) }
                        display.end()
                        alerts?.roundEnded(outcomes)
                        alerts?.lookAtBacklog(pusher)
                        var deleted: [Take] = []
                        if let keepLocal, !Task.isCancelled {
                            try await studio.store.refresh()
                            deleted = try await pusher.applyRetention(olderThan: keepLocal)
                        }
                        await Self.catalogue(pusher, catalog, json: json, down: &catalogDown)
                        rounds.append(PushRound(items: items, outcomes: outcomes, deleted: deleted, dryRun: false, libraryIsEmpty: empty))
                        if watch && !json { display.summary(rounds.last!) }
                        if watch { try await Task.sleep(for: .seconds(interval)) }
                    } catch is CancellationError {
                        break
                    } catch let error as TapedeckError where watch && (error.code == .remoteUnavailable || error.code == .busy) {
                        // The server may come back: say so and look again after the interval.
                        Terminal.printError(error.message)
                        alerts?.remoteFailed(error)
                        alerts?.lookAtBacklog(pusher)
                        try? await Task.sleep(for: .seconds(interval))
                    }
                } while watch && !Task.isCancelled
                return rounds
            }
            stopRequested.onStop { work.cancel() }
            let rounds: [PushRound]
            do { rounds = try await work.value } catch {
                await remote.shutdown()
                await catalog?.shutdown()
                await alerts?.end()
                throw error
            }
            await remote.shutdown()
            await catalog?.shutdown()
            await alerts?.end()
            let stopped = work.isCancelled
            try Self.report(rounds, json: json, watch: watch, machine: pusher.machine, location: remote.location, stopped: stopped)
            let failures: [TapedeckError] = rounds.last?.outcomes.compactMap { (_, outcome) -> TapedeckError? in
                if case .failed(let e) = outcome { return e }
                return nil
            } ?? []
            if stopped && !watch {
                throw TapedeckError(.cancelled, "Stopped. Takes verified before the stop stay verified; the take being sent resumes at the next push.")
            }
            if let first = failures.first { throw ExitCode(ExitStatus.code(for: first)) }
        }
    }

    /// The takes named (all of the library's when none is named).
    @MainActor
    static func select(_ references: [String], in store: SessionStore) throws -> [(Take, Session)] {
        guard !references.isEmpty else { return store.sessions.flatMap { s in s.takes.map { ($0, s) } } }
        var out: [(Take, Session)] = []
        for reference in references {
            switch try store.resolve(reference) {
            case .take(let t, let s): out.append((t, s))
            case .session(let s): out += s.takes.map { ($0, s) }
            }
        }
        return out
    }

    /// Adds the verified takes the fleet catalog lacks to it (`sync.catalog`), saying on stderr
    /// what it added, what it refused and, when it cannot be reached, that they wait. `down`
    /// carries from round to round of `--watch` whether it was unreachable: an outage is said
    /// when it begins (and its end by what is then added), not every round.
    @MainActor
    static func catalogue(_ pusher: TakePusher, _ catalog: (any FleetIndex)?, json: Bool, down: inout Bool) async {
        guard let catalog else { return }
        let outcome = await pusher.addToCatalog(catalog)
        if outcome.added > 0 && !json && !Terminal.quiet.load(ordering: .relaxed) {
            Terminal.printError("The fleet catalog at \(catalog.location) has \(Terminal.counted(outcome.added, "take")) more.", priority: .info, event: "catalog-added")
        }
        for conflict in outcome.conflicts {
            Terminal.printError("warning: the fleet catalog at \(catalog.location) holds take \(conflict.takeID) from \(conflict.machine) with other audio (SHA-256 \(conflict.held.prefix(12))…, here \(conflict.offered.prefix(12))…); it was left as it is. `tapedeck fleet doctor` looks at the remote.", event: "catalog-conflict")
        }
        if let error = outcome.unreachable, !down {
            Terminal.printError("warning: \(error.message) \(Terminal.counted(outcome.waiting, "verified take")) wait to be added; they are safe on the remote, and the next push adds them.", event: "catalog-unreachable")
        }
        if outcome.unreachable != nil { down = true } else if outcome.added > 0 || outcome.waiting == 0 { down = false }
    }

    /// Prints what the last round did (every round with --watch was shown as it ended).
    @MainActor
    static func report(_ rounds: [PushRound], json: Bool, watch: Bool, machine: String, location: String, stopped: Bool) throws {
        if json {
            try Terminal.printJSON(rounds.flatMap { $0.json })
            return
        }
        guard let round = rounds.last, !watch else { return }
        if round.dryRun {
            if round.items.isEmpty {
                print(round.libraryIsEmpty ? "The library has no finished takes yet: record or import some, then push." : "Every take is verified on \(location); nothing to push.")
            }
            for item in round.items {
                let state = switch round.dryRunResult(item) {
                case "check": "verified; its remote copy is checked again"
                case "already-there": "on \(location) already (same size): checked, not sent"
                case "conflict": "the remote holds other audio under its key (\(Terminal.bytes(round.remoteSizes[item.take.id] ?? 0))): the push would refuse it"
                case "resumes": "resumes an upload"
                case "retry": "failed before: \(item.record?.reason ?? "")"
                default: "pending"
                }
                print("\(Terminal.safe(item.session.name))/\(Terminal.safe(item.take.name)) [\(item.take.shortID)] \(Terminal.bytes(item.size)): \(state)")
            }
            let sending = round.items.filter { ["pending", "resumes", "retry"].contains(round.dryRunResult($0)) }
            if !sending.isEmpty {
                print("\(Terminal.counted(sending.count, "take")) (\(Terminal.bytes(sending.reduce(0) { $0 + $1.size }))) would go to \(location) as \(machine)/. Run without --dry-run to push.")
            }
            let there = round.items.filter { round.dryRunResult($0) == "already-there" }.count
            if there > 0 { print("\(Terminal.counted(there, "take")) \(there == 1 ? "is" : "are") on \(location) already: checked and recorded, not sent again.") }
            let checks = round.items.filter(\.recheck).count
            if checks > 0 {
                print("\(Terminal.counted(checks, "verified take")) would be checked again on \(location) (sent again where missing or stale). Run without --dry-run to check.")
            }
            return
        }
        if round.items.isEmpty && !stopped {
            print(round.libraryIsEmpty ? "The library has no finished takes yet: record or import some, then push." : "Every take is verified on \(location); nothing to push.")
            if !round.deleted.isEmpty {
                print("\(Terminal.counted(round.deleted.count, "take")) deleted locally (sync.keep-local), confirmed on \(location) first.")
            }
            return
        }
        PushDisplay.summarize(round)
    }
}

/// One pass over the library: what was pending, how each push ended, what retention deleted.
struct PushRound {
    var items: [TakePusher.Item]
    var outcomes: [(TakePusher.Item, TakePusher.Outcome)]
    var deleted: [Take]
    var dryRun: Bool
    /// Whether the takes looked at were none at all (not: all verified already).
    var libraryIsEmpty = false
    /// A dry run: the size of what the remote holds at each take's key (by take id).
    var remoteSizes: [String: Int64] = [:]

    /// What a dry run says of an item: `pending`, `resumes`, `retry`, `check`, `already-there`
    /// (the remote holds an object of its size at its key: checked, not sent) or `conflict`
    /// (another size there: the push would refuse it).
    func dryRunResult(_ i: TakePusher.Item) -> String {
        if i.recheck { return "check" }
        if let size = remoteSizes[i.take.id] { return size == i.size ? "already-there" : "conflict" }
        return i.record.map { $0.state == .uploading ? "resumes" : "retry" } ?? "pending"
    }

    struct Entry: Encodable {
        var kind = "push-result"
        var schema = JSONSchema.version
        var session: String
        var sessionID: String
        var take: String
        var takeID: String
        var key: String?
        var result: String
        var size: Int64
        var sha256: String?
        var checked: String?
        var reason: String?
        /// Of a resumed upload: bytes already on the remote, not sent again.
        var resumedBytes: Int64?
    }

    var json: [Entry] {
        if dryRun {
            return items.map { i in
                Entry(session: i.session.name, sessionID: i.session.id, take: i.take.name, takeID: i.take.id, key: i.record?.key,
                      result: dryRunResult(i), size: i.size,
                      reason: i.recheck ? i.record?.unconfirmed : i.record?.reason)
            }
        }
        return outcomes.map { i, o in
            switch o {
            case .uploaded(let d, let how):
                Entry(session: i.session.name, sessionID: i.session.id, take: i.take.name, takeID: i.take.id, key: nil, result: "uploaded", size: d.size, sha256: d.sha256, checked: how,
                      resumedBytes: d.resumedBytes)
            case .alreadyThere(let d, let how):
                Entry(session: i.session.name, sessionID: i.session.id, take: i.take.name, takeID: i.take.id, key: nil, result: "already-there", size: d.size, sha256: d.sha256, checked: how)
            case .confirmed(let d, let how):
                Entry(session: i.session.name, sessionID: i.session.id, take: i.take.name, takeID: i.take.id, key: nil, result: "confirmed", size: d.size, sha256: d.sha256, checked: how)
            case .resent(let d, let how, let found, _):
                Entry(session: i.session.name, sessionID: i.session.id, take: i.take.name, takeID: i.take.id, key: nil, result: "resent", size: d.size, sha256: d.sha256, checked: how,
                      reason: found)
            case .failed(let e):
                Entry(session: i.session.name, sessionID: i.session.id, take: i.take.name, takeID: i.take.id, key: nil, result: "failed", size: i.size, reason: e.message)
            }
        } + deleted.map { t in
            Entry(session: "", sessionID: t.sessionID, take: t.name, takeID: t.id, key: nil, result: "deleted-locally", size: 0)
        }
    }
}

/// A stop asked for by a signal, before or after the work it stops has begun: the action given
/// by ``onStop(_:)`` runs once, at the stop or at once if the stop came first. Any thread.
final class StopRequest: Sendable {
    private let state = Mutex<(stopped: Bool, action: (@Sendable () -> Void)?)>((false, nil))

    func stop() {
        let action = state.withLock { s -> (@Sendable () -> Void)? in
            s.stopped = true
            defer { s.action = nil }
            return s.action
        }
        action?()
    }

    func onStop(_ action: @escaping @Sendable () -> Void) {
        let now = state.withLock { s -> Bool in
            if s.stopped { return true }
            s.action = action
            return false
        }
        if now { action() }
    }
}
