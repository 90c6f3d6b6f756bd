public import Foundation

/// The fleet's index: every take the remote holds (its manifest, ``RemoteManifest``), searchable
/// by machine, session, time, text, tags, markers, loudness, state and length, and each
/// recorder's last heartbeat (``RecorderHeartbeat``). Derived data: the remote's manifests stay
/// the source of truth and `fleet reindex` rebuilds it from them. The `sync.catalog` role; the
/// PostgreSQL plugin is one, ``InMemoryFleetIndex`` another.
///
/// Implementations are safe on any thread; every method suspends while the engine answers and
/// none blocks a thread. Never stores audio or credentials.
public protocol FleetIndex: Sendable {
    /// Where it is, for messages (without credentials), e.g. `postgres://db.example/tapedeck`.
    var location: String { get }

    /// Brings the schema up to date (creates it in an empty database); idempotent.
    /// - Throws: `.remoteUnavailable` when the engine cannot be reached, `.configuration` when it
    ///   refuses the credentials or holds a newer schema than this version knows.
    func prepare() async throws

    /// Adds or replaces each take's entry, keyed by take id. An entry for the same take id whose
    /// audio differs (another SHA-256) is a conflict: it is returned and never overwritten.
    func upsert(_ manifests: [RemoteManifest]) async throws -> [FleetConflict]

    /// The entries matching `query`, in recorded order (then take id), one page.
    func search(_ query: FleetQuery) async throws -> FleetPage

    /// Every take id it holds with its machine: for `fleet doctor` and `fleet reindex`.
    func takeIDs() async throws -> [String: String]

    /// Removes these takes' entries (their objects are gone from the remote).
    func remove(takeIDs: [String]) async throws

    /// Stores a recorder's heartbeat, replacing its previous one (one row per machine and role).
    func beat(_ heartbeat: RecorderHeartbeat) async throws

    /// Every recorder's last heartbeat, by machine.
    func heartbeats() async throws -> [RecorderHeartbeat]

    /// Closes its connections.
    func shutdown() async
}

/// A search of the fleet index. Every field given must match; `nil` matches all.
public struct FleetQuery: Sendable, Hashable {
    public var machine: String?
    /// The session's name (exactly) or id.
    public var session: String?
    /// Recorded at or after `from` and before `to` (the take's first frame, else its creation).
    public var from: Date?
    public var to: Date?
    /// Words each of which must be a word of the take's name, its session's name, its notes,
    /// its markers' labels or its tags' values (case-insensitive).
    public var text: String?
    /// Tags the take must have, with these values.
    public var tags: [String: String] = [:]
    /// Whether the take must have markers (`true`) or none (`false`).
    public var hasMarkers: Bool?
    /// Integrated loudness (LUFS) within this range; takes without a measurement never match.
    public var loudness: ClosedRange<Double>?
    public var states: Set<TakeState> = []
    /// Length in seconds within this range.
    public var seconds: ClosedRange<Double>?
    /// A page: at most `limit` entries after skipping `offset`.
    public var limit = 100
    public var offset = 0

    public init(machine: String? = nil, session: String? = nil, from: Date? = nil, to: Date? = nil, text: String? = nil,
                limit: Int = 100, offset: Int = 0) {
        self.machine = machine
        self.session = session
        self.from = from
        self.to = to
        self.text = text
        self.limit = limit
        self.offset = offset
    }

    /// The words of ``text`` as both engines split them: runs of letters and digits, lower-cased.
    public static func words(_ text: String) -> [String] {
        text.lowercased().split { !($0.isLetter || $0.isNumber) }.map(String.init)
    }
}

/// One page of a search: the entries, and how many match in all.
public struct FleetPage: Sendable, Hashable {
    public var manifests: [RemoteManifest]
    public var total: Int

    public init(manifests: [RemoteManifest], total: Int) {
        self.manifests = manifests
        self.total = total
    }
}

/// A take id the index holds with other audio than a manifest offered for it.
public struct FleetConflict: Sendable, Hashable {
    public var takeID: String
    /// The machine of the entry held, and the SHA-256 of its audio and of the one offered.
    public var machine: String
    public var held: String
    public var offered: String

    public init(takeID: String, machine: String, held: String, offered: String) {
        self.takeID = takeID
        self.machine = machine
        self.held = held
        self.offered = offered
    }
}

/// What a running `record`, `serve` or `push --watch` says about itself every few seconds.
public struct RecorderHeartbeat: Sendable, Hashable, Codable {
    public enum State: String, Sendable, Hashable, Codable, CaseIterable {
        case idle, waiting, recording, uploading, error
    }

    public var machine: String
    /// `record`, `serve` or `push`.
    public var role: String
    public var version: String
    public var state: State
    public var session: String?
    public var take: String?
    /// The loudest channel's level (dBFS), the disk's seconds left at the format recorded.
    public var levelDBFS: Double?
    public var diskSecondsLeft: Double?
    /// Takes waiting for upload, and how long the first of them has waited.
    public var backlogTakes: Int?
    public var backlogOldestSeconds: Double?
    /// The sender's system clock's estimated error (seconds), as its kernel's NTP discipline
    /// says; `nil` when nothing disciplines the clock (`SystemClock.estimatedError()`).
    public var clockErrorSeconds: Double?
    public var lastError: String?
    /// When it was sent (the sender's clock).
    public var sentAt: Date
    /// How often the sender beats; a recorder not heard from in two intervals is stale.
    public var intervalSeconds: Double
    /// Filled by the index when it is read, by the catalog's own clock: how long ago the catalog
    /// received it, and how far the sender's clock is ahead of the catalog's (`sentAt` minus
    /// the time of receipt, within the network's delay). `nil` when unknown.
    public var heardSecondsAgo: Double?
    public var clockOffsetSeconds: Double?

    public init(machine: String, role: String, version: String, state: State, sentAt: Date, intervalSeconds: Double) {
        self.machine = machine
        self.role = role
        self.version = version
        self.state = state
        self.sentAt = sentAt
        self.intervalSeconds = intervalSeconds
    }

    /// How long ago it was heard at `now`: by the catalog's clock when the index says, else by
    /// `sentAt` (a sender whose clock is wrong then looks older or newer than it is).
    public func secondsAgo(at now: Date) -> Double { max(0, heardSecondsAgo ?? now.timeIntervalSince(sentAt)) }

    /// Whether it is older than two intervals at `now`.
    public func isStale(at now: Date) -> Bool { secondsAgo(at: now) > 2 * intervalSeconds }
}

extension RemoteManifest {
    /// When the take was recorded: its first frame, else its creation.
    public var recordedAt: Date { take.began ?? take.createdAt }

    /// The take's length in seconds.
    public var seconds: Double { Double(take.frames) / Double(max(1, take.format.sampleRate)) }

    /// The text a search's words are looked for in.
    public var searchableText: String {
        ([take.name, session.name, take.notes] + take.markers.map(\.label) + take.tags.values.sorted()).joined(separator: " ")
    }

    /// Whether it matches every field of `query` (the in-memory index's test, and the meaning
    /// the other engines follow).
    public func matches(_ query: FleetQuery) -> Bool {
        if let machine = query.machine, machine != self.machine { return false }
        if let s = query.session, s != session.name && s != session.id { return false }
        if let from = query.from, recordedAt < from { return false }
        if let to = query.to, recordedAt >= to { return false }
        if let text = query.text {
            let have = Set(FleetQuery.words(searchableText))
            guard FleetQuery.words(text).allSatisfy(have.contains) else { return false }
        }
        for (key, value) in query.tags where take.tags[key] != value { return false }
        if let marked = query.hasMarkers, marked == take.markers.isEmpty { return false }
        if let range = query.loudness {
            guard let lufs = take.loudness?.integrated, range.contains(lufs) else { return false }
        }
        if !query.states.isEmpty && !query.states.contains(take.state) { return false }
        if let range = query.seconds, !range.contains(seconds) { return false }
        return true
    }
}
