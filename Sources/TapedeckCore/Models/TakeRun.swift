public import Foundation

/// Why a take of a run began or ended: the boundary between two takes, or the run's own start
/// and end. Written in the catalog, the manifest and JSON as the raw value.
public enum TakeBoundary: String, Sendable, Hashable, Codable, CaseIterable {
    /// The run started (the first take).
    case start
    /// `--split DURATION`: the take reached its length (or the clock boundary with `--split-align`).
    case splitTime = "split-time"
    /// `--split-size SIZE`: the next audio would have taken the file past the size.
    case splitSize = "split-size"
    /// Sound-activated recording started or ended the take.
    case vox
    /// A marker split the run (`--split-on-marker`).
    case markerSplit = "marker-split"
    /// A split was asked for (the web page's Split, `POST /api/split`).
    case requested
    /// The device came back after it was lost (`--resume`).
    case deviceResumed = "device-resumed"
    /// A trigger started the take (`--armed`).
    case trigger
    /// The run was stopped (Ctrl-C, a signal, `tapedeck` stopped it).
    case stopped
    /// The run reached `--duration` or `--until`, or the end of its stretch of the schedule.
    case duration
    /// `record --schedule`: a stretch of the schedule began.
    case schedule
    /// `record --schedule` started (or its device came back) inside a stretch: it records at once.
    case scheduleCatchUp = "schedule-catch-up"
    /// The device was lost.
    case deviceLost = "device-lost"
    /// Writing failed (a full disk).
    case writeFailed = "write-failed"
}

/// Where a take stands in a run: the takes one `record` made one after another from one stream
/// of audio (split by time or size). Their frames, concatenated in ``index`` order, are exactly
/// what the device delivered. A plain value.
public struct TakeRun: Sendable, Hashable, Codable {
    /// The run's id (a UUID string), the same for each take of the run.
    public var id: String
    /// The take's place in the run, from 1.
    public var index: Int
    /// The frame of the run's audio the take starts at; `nil` until the take has begun (a take
    /// prepared ahead of its boundary, left by a process that was killed before it).
    public var offset: Int64?
    /// Why the take began; `nil` while not known yet.
    public var began: TakeBoundary?
    /// Why the take ended; `nil` while it is being recorded (or when the process was killed).
    public var ended: TakeBoundary?

    public init(id: String, index: Int, offset: Int64? = nil, began: TakeBoundary? = nil, ended: TakeBoundary? = nil) {
        self.id = id
        self.index = index
        self.offset = offset
        self.began = began
        self.ended = ended
    }

    /// Checks the values a store keeps. - Throws: `.invalidArgument`. - Thread: any; never blocks.
    public func validate() throws {
        guard !id.isEmpty, id.utf8.count <= 64, id.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) else {
            throw TapedeckError(.invalidArgument, "A run id is 1 to 64 printable ASCII characters.")
        }
        guard index >= 1 else { throw TapedeckError(.invalidArgument, "A take's place in its run starts at 1.") }
        guard (offset ?? 0) >= 0 else { throw TapedeckError(.invalidArgument, "A take's offset in its run cannot be negative.") }
    }
}

/// A marker in a take: a frame and an optional label (`m` on the terminal, SIGUSR1). A plain value.
public struct TakeMarker: Sendable, Hashable, Codable {
    /// The frame of the take the marker stands at.
    public var frame: Int64
    /// What the marker says; `""` when it has no label.
    public var label: String
    /// When it was set.
    public var date: Date

    public init(frame: Int64, label: String = "", date: Date) {
        self.frame = frame
        self.label = label
        self.date = date
    }

    /// The most markers a take keeps, and the longest label in bytes.
    public static let maxCount = 999
    public static let maxLabelBytes = 256
}
