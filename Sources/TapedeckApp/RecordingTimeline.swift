public import Foundation
public import TapedeckCore

/// One session's takes as a timeline of wall-clock time, for `tapedeck timeline` and
/// `export --from … --to …`: what was recorded when, in stretches of contiguous audio, and the
/// gaps between them.
///
/// Time is the recording's own: a take's first frame's time of day (`Take.began`, the time
/// its file's TimeReference holds) plus its frames at its rate. Takes one `record` split from one
/// run (`TakeRun`) are one stretch when each begins at the frame of the run where the one
/// before it ended: their times come from the run's frames, not from the clock, so a clock
/// stepped during the run (NTP) moves nothing inside it. A take whose time is not known
/// (recorded before takes kept it, or recovered without it) is placed by its run's frames when
/// another take of the run has one, else by when it was created (``Piece/timeSource``).
/// A take that begins before the one before it ended (the clock was set back between two runs)
/// cuts that one short at its start; ``overlaps`` says so. A programme take (tagged
/// `ProgramRule.tag`) is a copy of its run's frames and stands only where no other take does.
///
/// A plain value; any thread; never blocks.
public struct RecordingTimeline: Sendable {
    /// Where a piece's time of day comes from.
    public enum TimeSource: String, Sendable, Hashable, Codable {
        /// The take's own first-frame time (TimeReference).
        case take
        /// Another take of the same run, plus the frames between them.
        case run
        /// When the take was created: approximate (seconds).
        case created
    }

    /// One take on the timeline.
    public struct Piece: Sendable, Hashable {
        public var take: Take
        /// The time of day of its first frame.
        public var start: Date
        public var timeSource: TimeSource
        /// Frames of it on the timeline (fewer than the take's when a later take overlaps it).
        public var frames: Int64
        public var rate: Int { take.format.sampleRate }
        public var end: Date { start.addingTimeInterval(Double(frames) / Double(rate)) }
    }

    /// Contiguous audio: takes that follow each other frame for frame.
    public struct Stretch: Sendable, Hashable {
        public var pieces: [Piece]
        public var format: AudioFormat { pieces[0].take.format }
        public var start: Date { pieces[0].start }
        public var frames: Int64 { pieces.reduce(0) { $0 + $1.frames } }
        public var end: Date { start.addingTimeInterval(Double(frames) / Double(format.sampleRate)) }
    }

    /// Time with no audio between two stretches (or before or after them, within a range asked for).
    public struct Gap: Sendable, Hashable, Codable {
        public var start: Date
        public var end: Date
        public var seconds: Double { end.timeIntervalSince(start) }
        public init(start: Date, end: Date) {
            self.start = start
            self.end = end
        }
    }

    /// A marker at its time of day.
    public struct Mark: Sendable, Hashable {
        public var date: Date
        public var label: String
        public var take: Take
    }

    public let session: Session
    /// The stretches, by start.
    public let stretches: [Stretch]
    /// A take that begins before the one before it ended: the clock was set back between two runs.
    public struct Overlap: Sendable, Hashable {
        /// The take that begins early, and the one it cuts short.
        public var take: Take
        public var cut: Take
        public var seconds: Double
    }

    /// Takes that begin before the one before them ended.
    public let overlaps: [Overlap]

    /// The timeline of `session`'s takes that hold audio (not one still being recorded).
    public init(session: Session) {
        self.session = session
        let held = session.takes.filter { $0.state != .recording && $0.frames > 0 }
        let log = Self.place(held.filter { $0.tags[ProgramRule.tag] == nil })
        // A programme take holds what the run's takes hold over its window: it stands on the
        // timeline only where no other take does (the log's takes were deleted, say).
        let programmes = Self.place(held.filter { $0.tags[ProgramRule.tag] != nil }).filter { p in
            !log.contains { $0.start < p.end && p.start < $0.end }
        }
        let placed = (log + programmes).sorted { ($0.start, $0.take.number) < ($1.start, $1.take.number) }
        var stretches: [Stretch] = []
        var overlaps: [Overlap] = []
        for piece in placed {
            guard var last = stretches.last else {
                stretches.append(Stretch(pieces: [piece]))
                continue
            }
            if Self.follows(piece.take, last.pieces[last.pieces.count - 1].take) {
                last.pieces.append(piece)
                stretches[stretches.count - 1] = last
                continue
            }
            // A later run that begins before this one ended: this one ends where it begins.
            let over = last.end.timeIntervalSince(piece.start)
            if over * Double(last.format.sampleRate) >= 1 {
                overlaps.append(Overlap(take: piece.take, cut: last.pieces[last.pieces.count - 1].take, seconds: over))
                Self.cut(&stretches, at: piece.start)
            }
            stretches.append(Stretch(pieces: [piece]))
        }
        self.stretches = stretches.filter { !$0.pieces.isEmpty }
        self.overlaps = overlaps
    }

    /// The stretches that reach into `day` (all without one).
    public func stretches(reaching day: DateInterval?) -> [Stretch] {
        stretches.filter { s in day.map { s.end > $0.start && s.start < $0.end } ?? true }
    }

    /// The gaps within `from..<to`: time no stretch covers, one frame or longer.
    public func gaps(from: Date, to: Date) -> [Gap] {
        let rate = Double(stretches.first?.format.sampleRate ?? 48_000)
        var gaps: [Gap] = []
        var at = from
        for s in stretches where s.end > from && s.start < to {
            if s.start.timeIntervalSince(at) * rate >= 1 { gaps.append(Gap(start: at, end: s.start)) }
            at = max(at, s.end)
        }
        if to.timeIntervalSince(at) * rate >= 1 { gaps.append(Gap(start: at, end: to)) }
        return gaps
    }

    /// Every marker of the session's takes at its time of day, in time order.
    public var marks: [Mark] {
        stretches.flatMap(\.pieces).flatMap { p in
            p.take.markers.filter { $0.frame <= p.frames }.map {
                Mark(date: p.start.addingTimeInterval(Double($0.frame) / Double(p.rate)), label: $0.label, take: p.take)
            }
        }.sorted { $0.date < $1.date }
    }

    // MARK: building

    /// Whether `take` begins at the frame of its run where `before` ended, with nothing between
    /// (not after the device came back: the run's frames then hide an outage).
    static func follows(_ take: Take, _ before: Take) -> Bool {
        guard let run = take.run, let prior = before.run, run.id == prior.id, let offset = run.offset, let priorOffset = prior.offset,
              take.format == before.format else { return false }
        return offset == priorOffset + before.frames && run.began != .deviceResumed
    }

    /// Each take with its first frame's time, in time order.
    static func place(_ takes: [Take]) -> [Piece] {
        // A run's time from any of its takes that knows its own: the run's frame 0 in time.
        var runZero: [String: (date: Date, rate: Int)] = [:]
        for t in takes {
            guard let run = t.run, let offset = run.offset, let began = t.began, runZero[run.id] == nil else { continue }
            runZero[run.id] = (began.addingTimeInterval(-Double(offset) / Double(t.format.sampleRate)), t.format.sampleRate)
        }
        return takes.map { t -> Piece in
            if let began = t.began { return Piece(take: t, start: began, timeSource: .take, frames: t.frames) }
            if let run = t.run, let offset = run.offset, let zero = runZero[run.id], zero.rate == t.format.sampleRate {
                return Piece(take: t, start: zero.date.addingTimeInterval(Double(offset) / Double(zero.rate)), timeSource: .run, frames: t.frames)
            }
            return Piece(take: t, start: t.createdAt, timeSource: .created, frames: t.frames)
        }.sorted { ($0.start, $0.take.number) < ($1.start, $1.take.number) }
    }

    /// Cuts the stretches short at `date` (a later run begins there).
    private static func cut(_ stretches: inout [Stretch], at date: Date) {
        guard var last = stretches.popLast() else { return }
        var kept: [Piece] = []
        for var p in last.pieces where p.start < date {
            p.frames = min(p.frames, Int64((date.timeIntervalSince(p.start) * Double(p.rate)).rounded()))
            if p.frames > 0 { kept.append(p) }
        }
        last.pieces = kept
        if !kept.isEmpty { stretches.append(last) }
    }
}
