public import Foundation
public import TapedeckCore

/// The takes still to be uploaded to a remote: finished (or interrupted) takes whose upload the
/// library's ledger does not hold as verified, as ``TakePusher/pending(in:verifyRemote:)`` picks
/// them. `/metrics` and `/api/health` show it; `push --watch` raises `upload-stale` from it.
/// A plain value.
public struct UploadBacklog: Sendable, Hashable {
    /// A take that has waited longer than this since it finished is stale (an hour).
    public static let staleSeconds = 3_600.0

    public var takes = 0
    /// The audio files' sizes together.
    public var bytes: Int64 = 0
    /// How long the take that finished first has waited, in seconds; `nil` when none waits.
    public var oldestSeconds: Double?
    /// The name (`SESSION/TAKE`) of the take that has waited longest.
    public var oldest: String?

    public init() {}

    /// Whether a take has waited longer than ``staleSeconds``.
    public var isStale: Bool { (oldestSeconds ?? 0) > Self.staleSeconds }

    /// The backlog of `sessions` given the ledger's `records` (by take id), at `now`; the sizes
    /// from `audioURL` (stat, nothing read). - Thread: any; blocks briefly on a stat per take.
    public static func measure(_ sessions: [Session], records: [String: UploadLedger.Record], now: Date = Date(),
                               audioURL: (Take) -> URL?) -> UploadBacklog {
        var backlog = UploadBacklog()
        var oldestEnd: Date?
        for session in sessions {
            for take in session.takes where take.state != .recording && records[take.id]?.state != .verified {
                backlog.takes += 1
                var st = stat()
                if let url = audioURL(take), stat(url.path, &st) == 0 { backlog.bytes += Int64(st.st_size) }
                let end = (take.began ?? take.createdAt).addingTimeInterval(Double(take.frames) / Double(max(1, take.format.sampleRate)))
                if oldestEnd.map({ end < $0 }) ?? true {
                    oldestEnd = end
                    backlog.oldest = "\(session.name)/\(take.name)"
                }
            }
        }
        backlog.oldestSeconds = oldestEnd.map { max(0, now.timeIntervalSince($0)) }
        return backlog
    }

    /// The backlog of the sessions `store` holds, given `ledger`; `nil` when the ledger cannot
    /// be read. - Thread: main actor; blocks briefly reading the ledger and on a stat per take.
    @MainActor
    public static func measure(_ store: SessionStore, ledger: UploadLedger) -> UploadBacklog? {
        guard let records = try? ledger.records() else { return nil }
        let storage = store.storage
        return measure(store.sessions, records: records) { try? storage.audioURL(for: $0) }
    }
}
