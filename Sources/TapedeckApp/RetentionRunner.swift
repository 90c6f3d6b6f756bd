public import Foundation
public import Logging
public import TapedeckCore
#if canImport(Glibc)
import Glibc
#endif

/// Applies the `retention:` rules to a library: plans with ``RetentionPlanner`` (the clock read
/// through ``RetentionClock``, remembered between runs in a state file), then deletes through the
/// store, the catalog and the file together as `tapedeck delete` does, logging each deletion and
/// counting them in the state file (`/metrics`).
///
/// Runs on the main actor, as the store does; suspends while the library is read and written.
@MainActor
public final class RetentionRunner {
    /// What the state file keeps between runs.
    public struct State: Sendable, Hashable, Codable {
        public var clock = RetentionClock()
        public var deletedTakes = 0
        public var deletedBytes: Int64 = 0
        public var lastRun: Date?

        public init() {}
    }

    public let store: SessionStore
    public let policy: RetentionPolicy
    /// Where the state is kept (`$XDG_STATE_HOME/tapedeck/retention-….json`).
    public let stateFile: URL
    private let verified: @MainActor (Take) -> Bool
    private let logger: Logger

    /// - Parameters:
    ///   - store: the library.
    ///   - policy: the rules (`retention:`).
    ///   - stateFile: where the clock's last reading and the deletions are kept (``stateFile(library:stateFolder:)``).
    ///   - logger: where each deletion is logged.
    ///   - verified: whether a take's upload is verified on the remote (asked only when
    ///     `policy.requireVerified`).
    public init(store: SessionStore, policy: RetentionPolicy, stateFile: URL, logger: Logger,
                verified: @escaping @MainActor (Take) -> Bool = { _ in false }) {
        self.store = store
        self.policy = policy
        self.stateFile = stateFile
        self.logger = logger
        self.verified = verified
    }

    /// The state file of the library at `library` in `stateFolder`.
    public nonisolated static func stateFile(library: URL, stateFolder: URL) -> URL {
        stateFolder.appendingPathComponent("retention-\(PrivateFile.stableName(library.standardizedFileURL.path)).json")
    }

    /// The state as the last run left it (a new one when there is none or it cannot be read).
    public func state() -> State {
        guard let data = FileManager.default.contents(atPath: stateFile.path) else { return State() }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return (try? decoder.decode(State.self, from: data)) ?? State()
    }

    private func save(_ state: State) {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.sortedKeys]
        guard let data = try? encoder.encode(state) else { return }
        do {
            try FileModes.makePrivateFolder(stateFile.deletingLastPathComponent())
            try data.write(to: stateFile, options: .atomic)
        } catch {
            logger.warning("Could not keep retention's state in \(stateFile.path): \(error). The clock's steps are not remembered between runs.")
        }
    }

    /// What the rules would delete now; the clock's reading is remembered.
    /// - Parameter reading: the clocks (a test's own; the machine's by default).
    public func plan(reading: RetentionClock.Reading = .now()) async throws -> RetentionPlan {
        try await store.refresh()
        var state = state()
        var items: [RetentionItem] = []
        for session in store.sessions {
            for take in session.takes {
                let bytes = (try? store.storage.audioURL(for: take)).flatMap { url -> Int64? in
                    var st = stat()
                    return stat(url.path, &st) == 0 ? Int64(st.st_size) : nil
                } ?? 0
                items.append(RetentionItem(take: take, session: session.id, sessionName: session.name, bytes: bytes,
                                           verified: policy.requireVerified ? verified(take) : true))
            }
        }
        let newest = items.map(\.take.createdAt).max()
        let (now, trusted, problem) = state.clock.trustedNow(reading, newestTake: newest)
        save(state)
        let root = store.storage.rootURL.path
        var disk: (Int64, Int64)?
        if let free = FreeSpace.available(at: root) {
            var fs = statvfs()
            if statvfs(root, &fs) == 0 { disk = (free, Int64(fs.f_blocks) * Int64(fs.f_frsize)) }
        }
        return RetentionPlanner.plan(items, policy: policy, now: now, agesTrusted: trusted, clockProblem: problem, disk: disk)
    }

    /// Deletes what `plan` lists, each through the store, logging why. Returns the deleted ones.
    /// - Throws: the store's error for a deletion that fails (those before it are done).
    public func apply(_ plan: RetentionPlan) async throws -> [RetentionPlan.Deletion] {
        var done: [RetentionPlan.Deletion] = []
        defer {
            if !done.isEmpty {
                var state = state()
                state.deletedTakes += done.count
                state.deletedBytes += done.reduce(0) { $0 + $1.item.bytes }
                state.lastRun = Date()
                save(state)
            }
        }
        for deletion in plan.deletions {
            guard let session = store.sessions.first(where: { $0.id == deletion.item.session }),
                  let take = session.takes.first(where: { $0.id == deletion.item.take.id }), take.state != .recording else { continue }
            try await store.delete(.take(take, in: session))
            done.append(deletion)
            logger.notice("Retention deleted \(deletion.item.sessionName)/\(take.name) [\(take.shortID)]: \(Self.why(deletion.reason, policy: policy)).",
                          metadata: ["take": "\(take.id)", "event": "retention-delete"])
        }
        return done
    }

    /// Why a take goes, as a phrase.
    public nonisolated static func why(_ reason: RetentionPlan.Reason, policy: RetentionPolicy) -> String {
        switch reason {
        case .age(let age): "recorded \(RetentionClock.duration(age)) ago, more than retention.keep (\(RetentionClock.duration(policy.keepSeconds ?? 0)))"
        case .freeSpace: "the disk was below retention.free-space-floor, and it was among the oldest"
        }
    }
}
