public import Foundation

/// Where a take is in its life.
public enum TakeState: String, Sendable, Hashable, Codable, CaseIterable {
    /// Being recorded now, or the recording process died (recovered on next open).
    case recording
    /// Recorded and finalized normally.
    case complete
    /// The recording process died; the audio was recovered from the file on the next open.
    case recovered
    /// The device or server was lost mid-take; everything captured before that was kept.
    case interrupted
    /// Writing failed (for example the disk filled); everything written before that was kept.
    case truncated
}

/// A gap in the captured timeline, filled with silence so the take's length stays true.
public struct OverrunEvent: Sendable, Hashable, Codable {
    /// Frame position in the take where the gap starts.
    public var frame: Int64
    /// Frames of silence inserted.
    public var frames: Int64
    /// Wall-clock time the gap was noticed.
    public var date: Date
    /// What caused it: `buffer` (the writer fell behind) or `device` (the device reported an xrun).
    public var cause: String

    public init(frame: Int64, frames: Int64, date: Date, cause: String) {
        self.frame = frame
        self.frames = frames
        self.date = date
        self.cause = cause
    }
}

/// One recording inside a session.
public struct Take: Sendable, Hashable, Codable, Identifiable {
    /// Stable identifier, a UUID string.
    public var id: String
    /// The session this take belongs to.
    public var sessionID: String
    /// The display name: any Unicode. Never used as a path.
    public var name: String
    /// Position within the session, starting at 1 (becomes TRACKNUMBER on export).
    public var number: Int
    /// When recording started.
    public var createdAt: Date
    /// Where the take is in its life.
    public var state: TakeState
    /// The audio format of the stored file.
    public var format: AudioFormat
    /// Name of the encoder plugin that wrote the file, e.g. `wav`.
    public var encoding: String
    /// Path of the audio file relative to the library root.
    public var file: String
    /// Frames of audio in the file (per channel).
    public var frames: Int64
    /// Gaps filled with silence during recording.
    public var overruns: [OverrunEvent]
    /// Free-form notes (`tapedeck note`; DESCRIPTION on export).
    public var notes: String
    /// The user's tags (`tapedeck tag`), carried into exports as tags of the same names.
    public var tags: [String: String]
    /// Samples recorded at full scale (clipped), over all channels; 0 for imported takes.
    public var clippedSamples: Int64
    /// The run the take belongs to, when one `record` split its audio into several takes
    /// (`--split`, `--split-size`); `nil` for a take recorded on its own or imported.
    public var run: TakeRun?
    /// Markers, in frame order (``TakeMarker``).
    public var markers: [TakeMarker]
    /// EBU R128 loudness, measured while recording, at import or by `tapedeck loudness`; `nil`
    /// when never measured.
    public var loudness: Loudness?
    /// The wall-clock time of the take's first frame, as its file's TimeReference says it; `nil`
    /// when not known (a take recorded before this was kept, a recovered or imported take):
    /// ``createdAt`` is then the best there is.
    public var began: Date?

    public init(
        id: String, sessionID: String, name: String, number: Int, createdAt: Date, state: TakeState,
        format: AudioFormat, encoding: String, file: String, frames: Int64,
        overruns: [OverrunEvent] = [], notes: String = "", tags: [String: String] = [:], clippedSamples: Int64 = 0,
        run: TakeRun? = nil, markers: [TakeMarker] = [], loudness: Loudness? = nil, began: Date? = nil
    ) {
        self.loudness = loudness
        self.began = began
        self.run = run
        self.markers = markers
        self.tags = tags
        self.clippedSamples = clippedSamples
        self.id = id
        self.sessionID = sessionID
        self.name = name
        self.number = number
        self.createdAt = createdAt
        self.state = state
        self.format = format
        self.encoding = encoding
        self.file = file
        self.frames = frames
        self.overruns = overruns
        self.notes = notes
    }

    /// The notes, tags, clip count and run, as ``TakeStorage/annotateTake(_:_:)`` sets them.
    public var annotations: TakeAnnotations {
        get { TakeAnnotations(notes: notes, tags: tags, clippedSamples: clippedSamples, run: run, markers: markers, loudness: loudness, began: began) }
        set {
            (notes, tags, clippedSamples, run, markers) = (newValue.notes, newValue.tags, newValue.clippedSamples, newValue.run, newValue.markers)
            (loudness, began) = (newValue.loudness, newValue.began)
        }
    }

    private enum CodingKeys: String, CodingKey {
        case id, sessionID, name, number, createdAt, state, format, encoding, file, frames, overruns, notes, tags, clippedSamples, run, markers, loudness, began
    }

    /// Decodes a take; catalogs written before tags and clip counts existed read as none.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        id = try c.decode(String.self, forKey: .id)
        sessionID = try c.decode(String.self, forKey: .sessionID)
        name = try c.decode(String.self, forKey: .name)
        number = try c.decode(Int.self, forKey: .number)
        createdAt = try c.decode(Date.self, forKey: .createdAt)
        state = try c.decode(TakeState.self, forKey: .state)
        format = try c.decode(AudioFormat.self, forKey: .format)
        encoding = try c.decode(String.self, forKey: .encoding)
        file = try c.decode(String.self, forKey: .file)
        frames = try c.decode(Int64.self, forKey: .frames)
        overruns = try c.decodeIfPresent([OverrunEvent].self, forKey: .overruns) ?? []
        notes = try c.decodeIfPresent(String.self, forKey: .notes) ?? ""
        tags = try c.decodeIfPresent([String: String].self, forKey: .tags) ?? [:]
        clippedSamples = try c.decodeIfPresent(Int64.self, forKey: .clippedSamples) ?? 0
        run = try c.decodeIfPresent(TakeRun.self, forKey: .run)
        markers = try c.decodeIfPresent([TakeMarker].self, forKey: .markers) ?? []
        loudness = try c.decodeIfPresent(Loudness.self, forKey: .loudness)
        began = try c.decodeIfPresent(Date.self, forKey: .began)
    }

    /// Length in seconds.
    public var seconds: Double { format.seconds(forFrames: frames) }

    /// The first eight characters of the id, as printed by `tapedeck list`.
    public var shortID: String { NameRules.shortID(of: id) }
}

/// What a person (or the recorder's report) adds to a take after it is made: notes, tags, the
/// clip count, and the run the recorder made it in. A plain value.
public struct TakeAnnotations: Sendable, Hashable, Codable {
    /// Free-form notes; any Unicode up to 64 KiB.
    public var notes: String
    /// Tag names (see ``TakeAnnotations/validateTag(_:_:)``) and their values.
    public var tags: [String: String]
    /// Samples recorded at full scale.
    public var clippedSamples: Int64
    /// The run the take belongs to (set by the recorder; `tapedeck note` and `tag` keep it).
    public var run: TakeRun?
    /// Markers set while recording, in frame order.
    public var markers: [TakeMarker]
    /// The take's measured loudness (set by the recorder, import and `tapedeck loudness`).
    public var loudness: Loudness?
    /// The wall-clock time of the take's first frame (set by the recorder).
    public var began: Date?

    public init(notes: String = "", tags: [String: String] = [:], clippedSamples: Int64 = 0, run: TakeRun? = nil,
                markers: [TakeMarker] = [], loudness: Loudness? = nil, began: Date? = nil) {
        self.loudness = loudness
        self.began = began
        self.notes = notes
        self.tags = tags
        self.clippedSamples = clippedSamples
        self.run = run
        self.markers = markers
    }

    /// The most notes and tag text a take keeps, in bytes of UTF-8.
    public static let maxTextBytes = 65_536
    /// The most tags a take keeps.
    public static let maxTags = 64

    /// Checks a tag as Vorbis comments require its name (printable ASCII 0x20–0x7D but `=`,
    /// 1–64 characters), stored upper-case; returns the name to store.
    /// - Throws: `.invalidArgument` saying what is wrong. - Thread: any; never blocks.
    public static func validateTag(_ name: String, _ value: String) throws -> String {
        guard (1...64).contains(name.utf8.count), name.utf8.allSatisfy({ (0x20...0x7D).contains($0) && $0 != UInt8(ascii: "=") && $0 != UInt8(ascii: " ") }) else {
            throw TapedeckError(.invalidArgument,
                "The tag name \"\(name)\" is not allowed: use 1 to 64 letters, digits or punctuation, without spaces or \"=\" (e.g. ARTIST, MIC, room).")
        }
        guard value.utf8.count <= maxTextBytes, !value.unicodeScalars.contains(where: { $0.value < 0x20 && $0 != "\t" }) else {
            throw TapedeckError(.invalidArgument, "The value of tag \(name) is too long (over 64 KiB) or holds control characters.")
        }
        return name.uppercased()
    }

    /// Checks notes: at most ``maxTextBytes`` of UTF-8, and no NUL (U+0000), which no catalog
    /// keeps (a library's catalog would cut the notes short there, silently).
    /// - Throws: `.invalidArgument` saying what is wrong. - Thread: any; never blocks.
    public static func validateNotes(_ notes: String) throws {
        guard notes.utf8.count <= maxTextBytes else {
            throw TapedeckError(.invalidArgument, "The notes are longer than 64 KiB. Shorten them.")
        }
        guard !notes.utf8.contains(0) else {
            throw TapedeckError(.invalidArgument, "The notes contain a NUL character (U+0000), which notes cannot hold. Remove it and set the notes again.")
        }
    }

    /// Checks everything against the limits. - Throws: `.invalidArgument`. - Thread: any; never blocks.
    public func validate() throws {
        try Self.validateNotes(notes)
        guard tags.count <= Self.maxTags else {
            throw TapedeckError(.invalidArgument, "A take keeps at most \(Self.maxTags) tags. Remove some with `tapedeck tag TAKE --remove NAME`.")
        }
        for (k, v) in tags where try Self.validateTag(k, v) != k {
            throw TapedeckError(.invalidArgument, "The tag name \"\(k)\" must be upper-case.")
        }
        guard clippedSamples >= 0 else { throw TapedeckError(.invalidArgument, "A clip count cannot be negative.") }
        try run?.validate()
        try loudness?.validate()
        if let began, !Self.isValidBeginning(began) {
            throw TapedeckError(.invalidArgument, "A take cannot begin at \(began.timeIntervalSince1970) s since 1970.")
        }
        guard markers.count <= TakeMarker.maxCount else {
            throw TapedeckError(.invalidArgument, "A take keeps at most \(TakeMarker.maxCount) markers.")
        }
        guard markers.allSatisfy(\.isValid) else {
            throw TapedeckError(.invalidArgument, "A marker stands at a frame of the take (not before it) and its label is at most 256 bytes without control characters.")
        }
    }

    /// Whether `date` can be a take's first frame's time.
    static func isValidBeginning(_ date: Date) -> Bool {
        date.timeIntervalSince1970.isFinite && abs(date.timeIntervalSince1970) <= 1e11
    }

    /// These annotations with each part that breaks its limit left out, and a phrase for each
    /// part left out (e.g. "201 markers past the 999 a take keeps"): the parts are checked one by
    /// one, so one bad fact never costs the others. Markers keep the first ``TakeMarker/maxCount``
    /// valid ones in order; tags keep the valid ones (the first ``maxTags`` by name); notes too
    /// long, a negative clip count, a run, loudness or first frame's time out of range are
    /// left out (empty, 0 or `nil`). ``validate()`` accepts what it returns.
    /// - Thread: any; never blocks.
    public func keepingValid() -> (kept: TakeAnnotations, leftOut: [String]) {
        var kept = self
        var leftOut: [String] = []
        if notes.utf8.count > Self.maxTextBytes {
            kept.notes = ""
            leftOut.append("the notes (longer than 64 KiB)")
        }
        var goodTags: [String: String] = [:]
        for (name, value) in tags.sorted(by: { $0.key < $1.key }) where goodTags.count < Self.maxTags {
            if (try? Self.validateTag(name, value)) == name { goodTags[name] = value }
        }
        if goodTags.count < tags.count {
            kept.tags = goodTags
            let n = tags.count - goodTags.count
            leftOut.append(n == 1 ? "a tag (a bad name or value, or past the \(Self.maxTags) a take keeps)"
                                  : "\(n) tags (bad names or values, or past the \(Self.maxTags) a take keeps)")
        }
        if clippedSamples < 0 {
            kept.clippedSamples = 0
            leftOut.append("a negative clip count")
        }
        if let run, (try? run.validate()) == nil {
            kept.run = nil
            leftOut.append("the link to its run (out of range)")
        }
        if let loudness, (try? loudness.validate()) == nil {
            kept.loudness = nil
            leftOut.append("the loudness (out of range)")
        }
        if let began, !Self.isValidBeginning(began) {
            kept.began = nil
            leftOut.append("the time of its first frame (out of range)")
        }
        let valid = markers.filter(\.isValid)
        if valid.count < markers.count {
            let n = markers.count - valid.count
            leftOut.append(n == 1 ? "a marker before the take or with a bad label" : "\(n) markers before the take or with bad labels")
        }
        if valid.count > TakeMarker.maxCount {
            let n = valid.count - TakeMarker.maxCount
            leftOut.append("\(n == 1 ? "a marker" : "\(n) markers") past the \(TakeMarker.maxCount) a take keeps")
        }
        if valid.count < markers.count || valid.count > TakeMarker.maxCount {
            kept.markers = Array(valid.prefix(TakeMarker.maxCount))
        }
        return (kept, leftOut)
    }
}

extension TakeMarker {
    /// Whether a take can keep it: at a frame of the take (not before it), its label at most
    /// ``maxLabelBytes`` without control characters. - Thread: any; never blocks.
    public var isValid: Bool {
        frame >= 0 && Self.labelProblem(label) == nil
    }

    /// Why a take cannot keep `label` (too long, or more than one line), said so that whoever
    /// typed it can mend it; `nil` when it can. The one rule for every place a label comes in:
    /// `tapedeck mark`, the page, a recorder's control socket. - Thread: any; never blocks.
    public static func labelProblem(_ label: String) -> String? {
        label.utf8.count <= maxLabelBytes && !label.unicodeScalars.contains(where: { $0.value < 0x20 }) ? nil
            : "A marker's label is one line of at most \(maxLabelBytes) bytes, without control characters. Shorten it."
    }
}
