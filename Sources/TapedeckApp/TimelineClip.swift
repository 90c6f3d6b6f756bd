public import Foundation
public import TapedeckCore

extension TapedeckError.Code {
    /// Audio asked for by time has gaps (`export --from … --to …` without `--gaps`): exit 65.
    public static let timelineGap = TapedeckError.Code(rawValue: "timeline-gap", exitStatus: 65)
}

/// What to do where nothing was recorded inside a range of time (`export --gaps`).
public enum GapPolicy: String, Sendable, Hashable, CaseIterable {
    /// Refuse the clip, listing the gaps (the default).
    case refuse
    /// Fill each gap with silence of its length, and say so.
    case silence
    /// One clip per stretch of contiguous audio.
    case split
}

/// A stretch of wall-clock time cut from one session's takes, to be exported as one file:
/// each part is some frames of a take, or silence for a gap. A plain value; any thread.
public struct ClipPlan: Sendable, Hashable {
    public enum Part: Sendable, Hashable {
        /// `frames` frames of `take`, from its frame `from`.
        case audio(Take, from: Int64, frames: Int64)
        /// Silence where nothing was recorded (`--gaps silence`).
        case silence(Int64)

        public var frames: Int64 {
            switch self {
            case .audio(_, _, let n), .silence(let n): n
            }
        }
    }

    public var sessionName: String
    public var parts: [Part]
    /// The time of day of the clip's first frame.
    public var start: Date
    public var format: AudioFormat
    /// The gaps filled with silence.
    public var filledGaps: [RecordingTimeline.Gap]

    public var frames: Int64 { parts.reduce(0) { $0 + $1.frames } }
    public var end: Date { start.addingTimeInterval(Double(frames) / Double(format.sampleRate)) }
    /// The takes it is cut from, in order.
    public var takes: [Take] {
        var seen = Set<String>()
        return parts.compactMap { if case .audio(let t, _, _) = $0, seen.insert(t.id).inserted { t } else { nil } }
    }
}

extension ClipPlan {
    /// The take an export of the clip stands for: named by its times, its first frame's time
    /// of day, the markers of the takes within it, the tags they all share, and a description
    /// naming the takes it is cut from and the gaps filled.
    public func take(in session: Session) -> Take {
        let sources = takes
        var markers: [TakeMarker] = []
        var notes: [String] = []
        var position: Int64 = 0
        for part in parts {
            if case .audio(let take, let from, let frames) = part {
                markers += take.markers.filter { $0.frame >= from && $0.frame < from + frames }
                    .map { TakeMarker(frame: position + $0.frame - from, label: $0.label, date: $0.date) }
                let cut = [from > 0 ? "from \(Self.clock(Double(from) / Double(format.sampleRate)))" : nil,
                           from + frames < take.frames ? "to \(Self.clock(Double(from + frames) / Double(format.sampleRate)))" : nil]
                notes.append(([take.name] + cut.compactMap { $0 }).joined(separator: " "))
            }
            position += part.frames
        }
        // The gaps first: a format that keeps only the start of a long description keeps them.
        var description = ""
        if !filledGaps.isEmpty {
            description = "Silence where nothing was recorded: " + filledGaps.map {
                "\(RecordingTimeline.shown($0.start)) to \(RecordingTimeline.shown($0.end)) (\(RecordingTimeline.length($0.seconds)))"
            }.joined(separator: "; ") + ". "
        }
        description += "Cut from \(sessionName), \(RecordingTimeline.shown(start)) to \(RecordingTimeline.shown(end)): \(notes.joined(separator: ", "))."
        let shared = sources.dropFirst().reduce(sources.first?.tags ?? [:]) { common, take in common.filter { take.tags[$0.key] == $0.value } }
        let first = sources.first
        return Take(id: "clip-\(first?.shortID ?? "none")-\(Int64((start.timeIntervalSince1970 * 1000).rounded()))", sessionID: session.id,
                    name: name, number: first?.number ?? 1, createdAt: start, state: .complete, format: format,
                    encoding: first?.encoding ?? "", file: "", frames: frames, notes: description, tags: shared,
                    markers: markers, began: start)
    }

    /// `2026-12-01 14.05.00 to 14.20.00` (this machine's time zone; the day again when it changes).
    public var name: String {
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.dateFormat = "yyyy-MM-dd HH.mm.ss"
        let from = f.string(from: start)
        var to = f.string(from: end)
        if to.prefix(10) == from.prefix(10) { to = String(to.dropFirst(11)) }
        return "\(from) to \(to)"
    }

    /// `0:02:30.000` into a take.
    static func clock(_ seconds: Double) -> String {
        let ms = Int64((seconds * 1000).rounded())
        let (h, m, s, f) = (ms / 3_600_000, ms / 60_000 % 60, ms / 1000 % 60, ms % 1000)
        return "\(h):\(m < 10 ? "0" : "")\(m):\(s < 10 ? "0" : "")\(s).\(String(format: "%03d", f))"
    }
}

extension RecordingTimeline {
    /// The clips that hold `from..<to`: one, or with ``GapPolicy/split`` one per stretch of
    /// contiguous audio. Sample-exact: a stretch's frames are cut at the frame nearest each time.
    /// - Throws: `.notFound` when nothing of the session was recorded in the range; `.timelineGap`
    ///   listing the gaps when the policy is ``GapPolicy/refuse`` and the range has any;
    ///   `.unsupportedFormat` when one clip would join takes of different formats.
    public func clips(from: Date, to: Date, gaps policy: GapPolicy) throws -> [ClipPlan] {
        let segments = stretches.compactMap { s -> (Stretch, Int64, Int64)? in
            let rate = Double(s.format.sampleRate)
            let a = max(0, min(s.frames, Int64((from.timeIntervalSince(s.start) * rate).rounded())))
            let b = max(0, min(s.frames, Int64((to.timeIntervalSince(s.start) * rate).rounded())))
            return b > a ? (s, a, b) : nil
        }
        guard !segments.isEmpty else {
            throw TapedeckError(.notFound, "Nothing of session \"\(session.name)\" was recorded between \(Self.shown(from)) and \(Self.shown(to)). \(recordedSummary) `tapedeck timeline --session \"\(session.name)\"` shows when it was.")
        }
        let gaps = self.gaps(from: from, to: to)
        if policy == .refuse, !gaps.isEmpty {
            let list = gaps.prefix(10).map { "\(Self.shown($0.start)) to \(Self.shown($0.end)) (\(Self.length($0.seconds)))" }
            throw TapedeckError(.timelineGap, "Nothing was recorded for \(gaps.count == 1 ? "part" : "parts") of that time in \"\(session.name)\": \(list.joined(separator: "; "))\(gaps.count > 10 ? " and \(gaps.count - 10) more" : ""). Export it with --gaps silence (the gaps as silence, said in the file's tags), --gaps split (a file per stretch), or choose another --from/--to.")
        }
        var clips: [ClipPlan] = []
        for (s, a, b) in segments {
            let first = s.start.addingTimeInterval(Double(a) / Double(s.format.sampleRate))
            // A new clip after a gap (split) or at the first segment; else this one goes on.
            let gapBefore = gaps.contains { $0.end <= first && $0.end > (clips.last?.end ?? .distantPast) }
            if clips.isEmpty || (policy == .split && gapBefore) {
                clips.append(ClipPlan(sessionName: session.name, parts: [], start: policy == .silence && clips.isEmpty ? from : first,
                                      format: s.format, filledGaps: []))
            }
            var clip = clips.removeLast()
            guard clip.format == s.format else {
                throw TapedeckError(.unsupportedFormat, "That time in \"\(session.name)\" was recorded as \(clip.format) and then as \(s.format) (from \(Self.shown(s.start))): one file cannot hold both. Export it with --gaps split, or as two ranges.")
            }
            let rate = Double(s.format.sampleRate)
            let position = Int64((first.timeIntervalSince(clip.start) * rate).rounded())
            var skip: Int64 = 0
            if position > clip.frames, policy == .silence {
                clip.filledGaps += gaps.filter { $0.end <= first && $0.start >= clip.end.addingTimeInterval(-0.5 / rate) }
                clip.parts.append(.silence(position - clip.frames))
            } else if position < clip.frames {
                skip = min(b - a, clip.frames - position)  // overlaps what the clip holds (rounding): not twice
            }
            clip.parts += Self.parts(of: s, from: a + skip, to: b)
            clips.append(clip)
        }
        if policy == .silence, var clip = clips.popLast() {
            let total = Int64((to.timeIntervalSince(clip.start) * Double(clip.format.sampleRate)).rounded())
            if total > clip.frames {
                clip.filledGaps += gaps.filter { $0.end >= to }
                clip.parts.append(.silence(total - clip.frames))
            }
            clips.append(clip)
        }
        return clips
    }

    /// Frames `from..<to` of stretch `s` as parts of its takes.
    static func parts(of s: Stretch, from: Int64, to: Int64) -> [ClipPlan.Part] {
        var parts: [ClipPlan.Part] = []
        var offset: Int64 = 0
        for piece in s.pieces {
            let lo = max(from, offset), hi = min(to, offset + piece.frames)
            if hi > lo { parts.append(.audio(piece.take, from: lo - offset, frames: hi - lo)) }
            offset += piece.frames
        }
        return parts
    }

    /// When the session has audio at all, for a message: `It has audio from … to ….`
    var recordedSummary: String {
        guard let first = stretches.first, let last = stretches.last else { return "It has no audio." }
        return "It has audio from \(Self.shown(first.start)) to \(Self.shown(last.end))."
    }

    /// `5.20 s`, or `3 h 20 min` from a minute on.
    public static func length(_ seconds: Double) -> String {
        seconds < 60 ? String(format: "%.2f s", seconds) : RetentionClock.duration(seconds)
    }

    /// `2026-12-01 14:05:00.000` in this machine's time zone.
    public static func shown(_ date: Date) -> String {
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.dateFormat = "yyyy-MM-dd HH:mm:ss.SSS"
        return f.string(from: date)
    }

    /// The marker labelled `label` (any case): the latest one, or with `after` the first at or
    /// after it. - Throws: `.notFound` naming the labels there are.
    public func mark(_ label: String, after: Date? = nil) throws -> Mark {
        let all = marks
        let matching = all.filter { $0.label.caseInsensitiveCompare(label) == .orderedSame }
        if let found = after.map({ a in matching.first { $0.date >= a } }) ?? matching.last { return found }
        let labels = Array(Set(all.map(\.label).filter { !$0.isEmpty })).sorted()
        throw TapedeckError(.notFound, "No marker \"\(label)\"\(after.map { " at or after \(Self.shown($0))" } ?? "") in session \"\(session.name)\". "
            + (labels.isEmpty ? "It has no labelled markers." : "Its labels: \(labels.prefix(12).joined(separator: ", ")).") + " `tapedeck timeline` lists them.")
    }
}

/// The frames of a ``ClipPlan``, read take after take: each take's reader is opened when its
/// part begins, read past the frames before the part, and closed when the part ends; a gap is
/// silence. A take that gives fewer frames than the library lists is refused, as an export of
/// the take alone refuses it.
///
/// Thread: one thread at a time (the export's). Blocks on disk I/O.
final class ClipReader: TakeReader {
    let format: AudioFormat
    let frameCount: Int64
    private let parts: [ClipPlan.Part]
    private let open: (Take) throws -> any TakeReader
    private var index = 0
    private var current: (reader: any TakeReader, left: Int64)?
    private var silenceLeft: Int64?

    /// - Parameter open: opens a take's file from its beginning.
    init(_ plan: ClipPlan, open: @escaping (Take) throws -> any TakeReader) {
        format = plan.format
        frameCount = plan.frames
        parts = plan.parts
        self.open = open
    }

    func read(into buffer: UnsafeMutableRawPointer, maxFrames: Int) throws -> Int {
        while index < parts.count, maxFrames > 0 {
            switch parts[index] {
            case .silence(let frames):
                let left = silenceLeft ?? frames
                let n = Int(min(Int64(maxFrames), left))
                buffer.initializeMemory(as: UInt8.self, repeating: 0, count: n * format.bytesPerFrame)
                silenceLeft = left - Int64(n)
                if silenceLeft == 0 { next() }
                if n > 0 { return n }
            case .audio(let take, let from, let frames):
                let reader = try current?.reader ?? begin(take, skipping: from, using: buffer, capacity: maxFrames)
                let left = current?.left ?? frames
                current = (reader, left)
                let n = try reader.read(into: buffer, maxFrames: Int(min(Int64(maxFrames), left)))
                guard n > 0 else { throw Self.short(take) }
                current = (reader, left - Int64(n))
                if left - Int64(n) == 0 { next() }
                return n
            }
        }
        return 0
    }

    /// Opens `take` and reads past its first `skip` frames.
    private func begin(_ take: Take, skipping skip: Int64, using buffer: UnsafeMutableRawPointer, capacity: Int) throws -> any TakeReader {
        let reader = try open(take)
        guard reader.format == format else {
            reader.close()
            throw TapedeckError(.corruptFile, "The audio file of take \"\(take.name)\" holds \(reader.format), not the \(format) the library lists. Run `tapedeck doctor` to check the library.")
        }
        var left = skip
        while left > 0 {
            let n = try reader.read(into: buffer, maxFrames: Int(min(Int64(capacity), left)))
            guard n > 0 else {
                reader.close()
                throw Self.short(take)
            }
            left -= Int64(n)
        }
        return reader
    }

    private func next() {
        current?.reader.close()
        current = nil
        silenceLeft = nil
        index += 1
    }

    static func short(_ take: Take) -> TapedeckError {
        TapedeckError(.corruptFile, "The audio file of take \"\(take.name)\" holds fewer frames than the library lists (\(take.frames)): it was cut short. Run `tapedeck doctor` to see what happened, and `tapedeck doctor --repair` to make the library agree with it.")
    }

    func close() {
        current?.reader.close()
        current = nil
    }
}
