import Foundation
import TapedeckCore
import TapedeckApp

/// The stable JSON shapes printed with `--json`, documented field by field in docs/JSON.md.
/// Every object a command prints at the top level (or as an element of a top-level array)
/// carries `kind` (what it is) and `schema` (``JSONSchema/version``); names are lowerCamelCase.
enum JSONSchema {
    /// Raised when a field changes meaning or goes away; new fields keep it.
    static let version = 1
}

struct FormatJSON: Encodable {
    var sampleRate: Int
    var channels: Int
    var sampleFormat: String
    var channelMask: UInt32
    var channelLayout: String
    init(_ f: AudioFormat) {
        sampleRate = f.sampleRate
        channels = f.channels
        sampleFormat = f.sampleFormat.rawValue
        channelMask = f.layout.mask
        channelLayout = f.layout.name ?? f.layout.description
    }
}

struct TakeJSON: Encodable {
    var kind = "take"
    var schema = JSONSchema.version
    var id: String
    var shortID: String
    var session: String
    var sessionID: String
    var name: String
    var number: Int
    var state: String
    var frames: Int64
    var seconds: Double
    var format: FormatJSON
    var encoding: String
    var path: String
    var bytes: Int64?
    var createdAt: Date
    var overruns: Int
    var overrunFrames: Int64
    var overrunEvents: [OverrunEvent]
    var clippedSamples: Int64
    var notes: String
    var tags: [String: String]
    /// The run the take belongs to; absent for a take recorded on its own.
    var run: RunJSON?
    var markers: [MarkerJSON]
    /// EBU R128 loudness; absent until measured.
    var loudness: LoudnessJSON?
    /// The first frame's wall-clock time, to the microsecond; absent when not known.
    var firstFrameAt: String?
    /// What the file itself says (BWF `bext` and iXML); only `show` reads it.
    var broadcast: BroadcastJSON?

    init(_ take: Take, session: Session, url: URL?) {
        var info = stat()
        self.init(take, session: session, file: AudioFileInfo(path: url?.path, bytes: url.flatMap { stat($0.path, &info) == 0 ? Int64(info.st_size) : nil }))
    }

    /// With the file's path and size already known (``TakeStorage/audioFiles(of:)``).
    init(_ take: Take, session: Session, file: AudioFileInfo?) {
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
struct BroadcastJSON: Encodable {
    var description: String
    var originator: String
    var originatorReference: String
    var originationDate: String
    var originationTime: String
    var timeReference: UInt64
    var version: Int
    var codingHistory: String
    var ixml: [String: String]
    init(_ f: BroadcastFacts) {
        (description, originator, originatorReference) = (f.description, f.originator, f.originatorReference)
        (originationDate, originationTime, timeReference, version) = (f.originationDate, f.originationTime, f.timeReference, f.version)
        (codingHistory, ixml) = (f.codingHistory, f.ixml)
    }
}

/// A take's EBU R128 loudness (docs/JSON.md): every key present, `null` where silence makes the
/// value infinite.
struct LoudnessJSON: Encodable {
    var value: Loudness
    init(_ value: Loudness) { self.value = value }

    private enum Keys: String, CodingKey { case integrated, range, truePeak, maxMomentary, maxShortTerm, replayGain }

    func encode(to encoder: any Encoder) throws {
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
struct MarkerJSON: Encodable {
    var frame: Int64
    var seconds: Double
    var label: String
    var date: Date
}

/// A take's place in a split run (docs/JSON.md).
struct RunJSON: Encodable {
    var id: String
    var index: Int
    /// The run's frame the take starts at, and the same in seconds; absent while not known.
    var offsetFrames: Int64?
    var offsetSeconds: Double?
    /// Why the take began and ended (``TakeBoundary`` raw values); absent while not known.
    var began: String?
    var ended: String?

    init(_ run: TakeRun, format: AudioFormat) {
        id = run.id
        index = run.index
        offsetFrames = run.offset
        offsetSeconds = run.offset.map { format.seconds(forFrames: $0) }
        began = run.began?.rawValue
        ended = run.ended?.rawValue
    }
}

struct SessionJSON: Encodable {
    var kind = "session"
    var schema = JSONSchema.version
    var id: String
    var shortID: String
    var name: String
    var createdAt: Date
    var takes: [TakeJSON]
}

struct RecordReportJSON: Encodable {
    var kind = "recording"
    var schema = JSONSchema.version
    /// The take recorded: the last of a split run; `null` when a run that waited (VOX, armed)
    /// made none.
    var take: TakeJSON?
    /// A split run: its id and every take of it in order (``take`` last); absent without splitting.
    var run: String? = nil
    var takes: [TakeJSON]? = nil
    var end: String
    var message: String
    var wallSeconds: Double
    var exitStatus: Int32
    /// Where the silence alarm went off (`--silence-alarm`); empty without it.
    var silences: [SilenceJSON] = []
    /// What happened between takes (`--resume`: the device's absences); empty when nothing did.
    var events: [RunEventJSON] = []
}

/// A run's event (docs/JSON.md).
struct RunEventJSON: Encodable {
    var kind: String
    var offsetSeconds: Double
    var seconds: Double
    var date: Date

    init(_ event: RunEvent, format: AudioFormat) {
        kind = event.kind
        offsetSeconds = format.seconds(forFrames: event.offset)
        seconds = event.seconds
        date = event.date
    }
}

/// A stretch of silent input (`--silence-alarm`), at a place in the run.
struct SilenceJSON: Encodable {
    var offsetSeconds: Double
    var seconds: Double
    var date: Date

    init(_ event: SilenceEvent, format: AudioFormat) {
        offsetSeconds = format.seconds(forFrames: event.offset)
        seconds = format.seconds(forFrames: event.frames)
        date = event.date
    }
}

/// `record -o FILE --json`: a recording outside the library.
struct FileRecordingJSON: Encodable {
    var kind = "file-recording"
    var schema = JSONSchema.version
    var path: String
    var seconds: Double
    var frames: Int64
    var format: FormatJSON
    var encoding: String
    var state: String
    var end: String
    var overruns: Int
    var clippedSamples: Int64
    var message: String
    var wallSeconds: Double
    var exitStatus: Int32
}
