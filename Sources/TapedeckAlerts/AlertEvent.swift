public import Foundation

/// What an alert is about: the `when:` words of an `alerts:` rule.
public enum AlertKind: String, Sendable, Hashable, Codable, CaseIterable {
    /// The input stayed below the silence alarm's level for its time (`--silence-alarm`); resolved
    /// when sound comes back.
    case silence
    /// The capture device went away; resolved (`device-back`) when it delivers again.
    case deviceLost = "device-lost"
    /// Only the resolved half of `device-lost`: the device is back.
    case deviceBack = "device-back"
    /// A take ended before it was meant to: the device was lost without `--resume`, or writing failed.
    case takeInterrupted = "take-interrupted"
    /// The library's disk has less room than `storage.warn-free-minutes` of audio; resolved when
    /// it has room again.
    case diskLow = "disk-low"
    /// An upload of `push --watch` failed.
    case uploadFailed = "upload-failed"
    /// A finished take has waited longer than an hour for its upload.
    case uploadStale = "upload-stale"
    /// Capture lost audio (overruns, filled with silence).
    case overruns
    /// A run that should record has had no frame for 10 s (its device or writer hangs);
    /// resolved when frames flow again.
    case notRecording = "not-recording"
    /// `tapedeck alerts test`: sent to every route, whatever its `when:`.
    case test

    /// The words a rule's `when:` accepts.
    public static var selectable: [AlertKind] { allCases.filter { $0 != .test } }
}

/// One alert: an event that began, was resolved, or happened once, with where and when. The
/// outbox keeps it as JSON until every route it is for has taken it; `id` is its idempotency key
/// (the `Idempotency-Key` header, the mail's `Message-ID`). A plain value.
public struct AlertEvent: Sendable, Hashable, Codable {
    public enum Phase: String, Sendable, Hashable, Codable {
        case began, resolved, once
    }

    public var id: String
    public var kind: AlertKind
    public var phase: Phase
    /// When it happened (the wall clock of the machine).
    public var time: Date
    /// The machine's host name.
    public var machine: String
    /// A short line: "Silence began", "Device back".
    public var title: String
    /// The whole sentence: what happened, where, and what to do.
    public var message: String
    public var session: String?
    /// The take, as `SESSION/TAKE`.
    public var take: String?
    /// The split run's id, when there is one.
    public var run: String?
    /// The run's frame it happened at, and the rate frames count at.
    public var frame: Int64?
    public var sampleRate: Int?
    /// For a resolved event: how long it lasted, in seconds, and the id of the event it resolves.
    public var durationSeconds: Double?
    public var resolves: String?
    /// A summary of alerts a rule held back (its `limit:`): how many of each title.
    public var heldBack: [String: Int]?

    public init(kind: AlertKind, phase: Phase, machine: String, title: String, message: String,
                time: Date = Date(), id: String = UUID().uuidString.lowercased()) {
        self.id = id
        self.kind = kind
        self.phase = phase
        self.time = time
        self.machine = machine
        self.title = title
        self.message = message
    }

    /// The run's frame as seconds, when both are known.
    public var offsetSeconds: Double? {
        guard let frame, let sampleRate, sampleRate > 0 else { return nil }
        return Double(frame) / Double(sampleRate)
    }

    /// Whether a rule whose `when:` holds `kinds` takes this event (`device-back` takes only the
    /// resolved half of `device-lost`; a test and a summary go to every rule).
    public func matches(_ kinds: Set<AlertKind>) -> Bool {
        if kind == .test || heldBack != nil { return true }
        if kinds.contains(kind) { return true }
        return kind == .deviceLost && phase == .resolved && kinds.contains(.deviceBack)
    }

    /// The time as the alert's text gives it: local time with the offset, ISO 8601.
    public var timeText: String {
        let f = ISO8601DateFormatter()
        f.timeZone = TimeZone.current
        f.formatOptions = [.withInternetDateTime]
        return f.string(from: time)
    }
}
