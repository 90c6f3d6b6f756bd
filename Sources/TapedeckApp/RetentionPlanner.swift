public import Foundation
public import TapedeckCore

/// What retention may delete: takes older than `keep`, and the oldest while the disk is below the
/// floor; never a take that records, one with markers, notes or tags (`keepMarked`), or, with a
/// remote, one whose upload is not verified. A plain value; any thread.
public struct RetentionPolicy: Sendable, Hashable {
    /// A free-space floor: a share of the disk (`10%`) or a size.
    public enum Floor: Sendable, Hashable {
        case percent(Double)
        case bytes(Int64)

        /// The floor in bytes on a disk of `total` bytes.
        public func bytes(ofDisk total: Int64) -> Int64 {
            switch self {
            case .percent(let p): Int64(Double(total) * p / 100)
            case .bytes(let b): b
            }
        }
    }

    public var keepSeconds: Double?
    public var floor: Floor?
    public var keepMarked: Bool
    /// A remote is configured: only takes whose upload is verified may go.
    public var requireVerified: Bool

    public init(keepSeconds: Double?, floor: Floor?, keepMarked: Bool = true, requireVerified: Bool = false) {
        self.keepSeconds = keepSeconds
        self.floor = floor
        self.keepMarked = keepMarked
        self.requireVerified = requireVerified
    }
}

/// One take as retention sees it. A plain value.
public struct RetentionItem: Sendable, Hashable {
    public var take: Take
    public var session: String
    public var sessionName: String
    /// The bytes deleting it frees (its audio file).
    public var bytes: Int64
    /// Its upload is verified on the configured remote.
    public var verified: Bool

    public init(take: Take, session: String, sessionName: String, bytes: Int64, verified: Bool) {
        self.take = take
        self.session = session
        self.sessionName = sessionName
        self.bytes = bytes
        self.verified = verified
    }
}

/// What retention would delete, why, and what it keeps. A plain value.
public struct RetentionPlan: Sendable, Hashable {
    public enum Reason: Sendable, Hashable {
        /// Older than `keep` by this many seconds, counted from when it was recorded.
        case age(Double)
        /// The disk was below the floor; the oldest went first.
        case freeSpace
    }

    public struct Deletion: Sendable, Hashable {
        public var item: RetentionItem
        public var reason: Reason
    }

    public var deletions: [Deletion] = []
    /// Takes kept that the rules would otherwise let go, by why: `recording`, `marked`, `unverified`.
    public var protected: [String: Int] = [:]
    /// Free bytes before and after the deletions, and the floor in bytes (when there is one).
    public var freeBefore: Int64?
    public var freeAfter: Int64?
    public var floorBytes: Int64?
    /// Why ages were not trusted (a clock that stepped), when they were not.
    public var clockProblem: String?
}

/// Decides what retention deletes: a pure function of the takes, the policy, the time and the
/// disk, so a year of takes and a stepping clock are tested in milliseconds. Any thread.
public enum RetentionPlanner {
    /// - Parameters:
    ///   - items: the library's takes.
    ///   - policy: the rules (`retention:`).
    ///   - now: the time ages are counted to (``RetentionClock``'s trusted time).
    ///   - agesTrusted: `false` when the clock cannot be believed: no take goes for its age.
    ///   - clockProblem: what was wrong with the clock, carried into the plan.
    ///   - disk: free and total bytes of the library's disk (`nil`: not known; no floor applies).
    public static func plan(_ items: [RetentionItem], policy: RetentionPolicy, now: Date, agesTrusted: Bool = true,
                            clockProblem: String? = nil, disk: (free: Int64, total: Int64)?) -> RetentionPlan {
        var plan = RetentionPlan()
        plan.clockProblem = clockProblem
        var eligible: [RetentionItem] = []
        for item in items {
            if let why = protection(item, policy: policy) {
                plan.protected[why, default: 0] += 1
            } else {
                eligible.append(item)
            }
        }
        // Oldest first: ages, then the floor, take the oldest.
        eligible.sort { ($0.take.createdAt, $0.take.id) < ($1.take.createdAt, $1.take.id) }
        var chosen = Set<String>()
        if let keep = policy.keepSeconds, agesTrusted {
            for item in eligible {
                let age = now.timeIntervalSince(item.take.createdAt)
                guard age > keep else { break }
                plan.deletions.append(.init(item: item, reason: .age(age)))
                chosen.insert(item.take.id)
            }
        }
        if let disk {
            plan.freeBefore = disk.free
            var free = disk.free + plan.deletions.reduce(0) { $0 + $1.item.bytes }
            if let floor = policy.floor {
                let floorBytes = floor.bytes(ofDisk: disk.total)
                plan.floorBytes = floorBytes
                for item in eligible where free < floorBytes && !chosen.contains(item.take.id) {
                    plan.deletions.append(.init(item: item, reason: .freeSpace))
                    chosen.insert(item.take.id)
                    free += item.bytes
                }
            }
            plan.freeAfter = free
        }
        return plan
    }

    /// Why `item` is never deleted, or `nil` when it may be.
    static func protection(_ item: RetentionItem, policy: RetentionPolicy) -> String? {
        let take = item.take
        if take.state == .recording { return "recording" }
        if policy.keepMarked && (!take.markers.isEmpty || !take.notes.isEmpty || !take.tags.isEmpty) { return "marked" }
        if policy.requireVerified && !item.verified { return "unverified" }
        return nil
    }
}
