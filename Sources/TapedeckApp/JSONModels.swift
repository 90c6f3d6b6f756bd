public import Foundation
public import TapedeckCore
#if canImport(Glibc)
import Glibc
#endif

/// The stable JSON shapes printed with `--json`, documented field by field in docs/JSON.md.
/// Every object a command prints at the top level (or as an element of a top-level array)
/// carries `kind` (what it is) and `schema` (``JSONSchema/version``); names are lowerCamelCase.
public enum JSONSchema {
    /// Raised when a field changes meaning or goes away; new fields keep it.
    public static let version = 1
    /// `export` objects: 2 since `format` became the object a take's is (it was the encoder's
    /// name, now `encoding`), with `sampleRate` and `sampleFormat` in it, and the settings typed.
    public static let export = 2
    /// `config-check` objects: 2 since each of `problems` is an object (the sentence and where it
    /// is), not the sentence alone.
    public static let configCheck = 2
}

public struct FormatJSON: Codable, Sendable, Hashable {
    public var sampleRate: Int
    public var channels: Int
    public var sampleFormat: String
    public var channelMask: UInt32
    public var channelLayout: String
    public init(_ f: AudioFormat) {
        sampleRate = f.sampleRate
        channels = f.channels
        sampleFormat = f.sampleFormat.rawValue
        channelMask = f.layout.mask
        channelLayout = f.layout.name ?? f.layout.description
    }
}

public struct TakeJSON: Encodable {
    public var kind = "take"
    public var schema = JSONSchema.version
    public var id: String
    public var shortID: String
    public var session: String
    public var sessionID: String
    public var name: String
    public var number: Int
    public var state: String
    public var frames: Int64
    public var seconds: Double
    public var format: FormatJSON
    public var encoding: String
    public var path: String
    public var bytes: Int64?
    public var createdAt: Date
    public var overruns: Int
    public var overrunFrames: Int64
    public var overrunEvents: [OverrunEvent]
    public var clippedSamples: Int64
    public var notes: String
    public var tags: [String: String]
    /// The run the take belongs to; absent for a take recorded on its own.
    public var run: RunJSON?
    public var markers: [MarkerJSON]
    /// EBU R128 loudness; absent until measured.
    public var loudness: LoudnessJSON?
    /// The first frame's wall-clock time, to the microsecond; absent when not known.
    public var firstFrameAt: String?
    /// What the file itself says (BWF `bext` and iXML); only `show` reads it.
    public var broadcast: BroadcastJSON?

    public init(_ take: Take, session: Session, url: URL?) {
        var info = stat()
        self.init(take, session: session, file: AudioFileInfo(path: url?.path, bytes: url.flatMap { stat($0.path, &info) == 0 ? Int64(info.st_size) : nil }))
    }

    /// With the file's path and size already known (`TakeStorage.audioFiles(of:)`).
    public init(_ take: Take, session: Session, file: AudioFileInfo?) {
        id = take.id
        shortID = take.shortID
        self.session = session.name
        sessionID = session.id
        name = take.name
        number = take.number
        state = take.state.rawValue
        frames = take.frames
        seconds = take.seconds
        format = FormatJSON(take.format)
        encoding = take.encoding
        path = file?.path ?? ""
        bytes = file?.bytes
        createdAt = take.createdAt
        overruns = take.overruns.count
        overrunFrames = take.overruns.reduce(0) { $0 + $1.frames }
        overrunEvents = take.overruns
        clippedSamples = take.clippedSamples
        notes = take.notes
        tags = take.tags
        run = take.run.map { RunJSON($0, format: take.format) }
        markers = take.markers.map { MarkerJSON(frame: $0.frame, seconds: take.format.seconds(forFrames: $0.frame), label: $0.label, date: $0.date) }
        loudness = take.loudness.map(LoudnessJSON.init)
        firstFrameAt = take.began.map(UTCTimestamp.format)
    }
}

/// A file's `bext` and iXML (docs/JSON.md).
public struct BroadcastJSON: Encodable {
    public var description: String
    public var originator: String
    public var originatorReference: String
    public var originationDate: String
    public var originationTime: String
    public var timeReference: UInt64
    public var version: Int
    public var codingHistory: String
    public var ixml: [String: String]
    public init(_ f: BroadcastFacts) {
        (description, originator, originatorReference) = (f.description, f.originator, f.originatorReference)
        (originationDate, originationTime, timeReference, version) = (f.originationDate, f.originationTime, f.timeReference, f.version)
        (codingHistory, ixml) = (f.codingHistory, f.ixml)
    }
}

/// A take's EBU R128 loudness (docs/JSON.md): every key present, `null` where silence makes the
/// value infinite.
public struct LoudnessJSON: Encodable {
    public var value: Loudness
    public init(_ value: Loudness) { self.value = value }

    private enum Keys: String, CodingKey { case integrated, range, truePeak, maxMomentary, maxShortTerm, replayGain }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Keys.self)
        func put(_ v: Double?, _ key: Keys) throws {
            // Two decimals: the meter is exact to far less than that, and 0.1 LU is what is read.
            if let v { try c.encode((v * 100).rounded() / 100, forKey: key) } else { try c.encodeNil(forKey: key) }
        }
        try put(value.integrated, .integrated)
        try put(value.range, .range)
        try put(value.truePeak, .truePeak)
        try put(value.maxMomentary, .maxMomentary)
        try put(value.maxShortTerm, .maxShortTerm)
        try put(value.replayGain, .replayGain)
    }
}

/// A marker in a take (docs/JSON.md).
public struct MarkerJSON: Encodable {
    public var frame: Int64
    public var seconds: Double
    public var label: String
    public var date: Date
    public init(frame: Int64, seconds: Double, label: String, date: Date) {
        (self.frame, self.seconds, self.label, self.date) = (frame, seconds, label, date)
    }
}

/// A take's place in a split run (docs/JSON.md).
public struct RunJSON: Encodable {
    public var id: String
    public var index: Int
    /// The run's frame the take starts at, and the same in seconds; absent while not known.
    public var offsetFrames: Int64?
    public var offsetSeconds: Double?
    /// Why the take began and ended (`TakeBoundary` raw values); absent while not known.
    public var began: String?
    public var ended: String?

    public init(_ run: TakeRun, format: AudioFormat) {
        id = run.id
        index = run.index
        offsetFrames = run.offset
        offsetSeconds = run.offset.map { format.seconds(forFrames: $0) }
        began = run.began?.rawValue
        ended = run.ended?.rawValue
    }
}

public struct SessionJSON: Encodable {
    public var kind = "session"
    public var schema = JSONSchema.version
    public var id: String
    public var shortID: String
    public var name: String
    public var createdAt: Date
    public var takes: [TakeJSON]
    public init(id: String, shortID: String, name: String, createdAt: Date, takes: [TakeJSON]) {
        (self.id, self.shortID, self.name, self.createdAt, self.takes) = (id, shortID, name, createdAt, takes)
    }
}
