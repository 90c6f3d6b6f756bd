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
    /// Free-form notes.
    public var notes: String

    public init(
        id: String, sessionID: String, name: String, number: Int, createdAt: Date, state: TakeState,
        format: AudioFormat, encoding: String, file: String, frames: Int64,
        overruns: [OverrunEvent] = [], notes: String = ""
    ) {
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

    /// Length in seconds.
    public var seconds: Double { format.seconds(forFrames: frames) }

    /// The first eight characters of the id, as printed by `tapedeck list`.
    public var shortID: String { NameRules.shortID(of: id) }
}
