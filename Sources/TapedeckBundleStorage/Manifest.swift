package import Foundation
import TapedeckCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A session bundle's `manifest.json`, validated: every value is in range and every file name is
/// a plain name inside the bundle. Only ``ManifestCodec/decode(_:)`` makes one from bytes.
/// (`package`: the fuzz targets in `TapedeckFuzzTargets` feed the codec untrusted bytes.)
package struct Manifest: Sendable, Hashable {
    /// The schema this version writes.
    static let schema = 1
    /// The schemas this version reads.
    static let supportedSchemas = [1]
    /// The largest manifest read: a bundle is untrusted input.
    static let maxBytes = 16 << 20
    /// The most takes one session may hold.
    static let maxTakes = 100_000
    /// The most frames a take may claim (2^40: over 200 days at 48 kHz).
    static let maxFrames: Int64 = 1 << 40
    /// The largest take number.
    static let maxNumber = Int(Int32.max)
    /// The longest encoding name and overrun cause, in UTF-8 bytes.
    static let maxLabelBytes = 256

    struct Entry: Sendable, Hashable {
        var id: String
        var name: String
        var number: Int
        /// The audio file's name inside the bundle.
        var file: String
        var format: AudioFormat
        var encoding: String
        var frames: Int64
        var startDate: Date
        var state: TakeState
        var overruns: [OverrunEvent]
        var notes: String
        var tags: [String: String] = [:]
        var clippedSamples: Int64 = 0
        var run: TakeRun?
        var markers: [TakeMarker] = []
        var loudness: Loudness?
        var began: Date?
        /// The hidden file the audio is written to while recording.
        var pendingFile: String?
    }

    var id: String
    var name: String
    var createdAt: Date
    var takes: [Entry]
}

/// Why a manifest is refused: where in the JSON, and what is wrong there.
package struct ManifestProblem: Error, Sendable, Hashable {
    /// A JSON path such as `takes[3].file`; empty for the document as a whole.
    var path: String
    var problem: String
}

/// Reads and writes `manifest.json`.
package enum ManifestCodec {
    // MARK: wire format

    package struct Wire: Codable, Equatable {
        var schema: Int
        var id: String
        var name: String
        var createdAt: String
        var takes: [TakeWire]
    }

    struct TakeWire: Codable, Equatable {
        var id: String
        var name: String
        var number: Int
        var file: String
        var format: FormatWire
        var encoding: String
        var frames: Int64
        var startDate: String
        var state: String
        var overruns: [OverrunWire]
        var notes: String
        /// Absent in manifests written before tags and clip counts existed.
        var tags: [String: String]?
        var clippedSamples: Int64?
        /// Absent for a take recorded on its own (and in manifests written before runs existed).
        var run: RunWire?
        /// Absent without markers.
        var markers: [MarkerWire]?
        /// Absent until the take's loudness is measured; its values are absent where silence
        /// makes them infinite.
        var loudness: Loudness?
        /// The first frame's wall-clock time (UTC, with milliseconds); absent when not known.
        var began: String?
        var pendingFile: String?
    }

    struct MarkerWire: Codable, Equatable {
        var frame: Int64
        var label: String
        var date: String
    }

    struct RunWire: Codable, Equatable {
        var id: String
        var index: Int
        var offset: Int64?
        /// Boundaries as ``TakeBoundary`` raw values; one this build does not know reads as absent.
        var began: String?
        var ended: String?
    }

    struct FormatWire: Codable, Equatable {
        var sampleRate: Int
        var channels: Int
        var sampleFormat: String
        /// The WAVE channel mask; absent for the conventional layout of the channel count (and in
        /// manifests written before layouts were kept).
        var channelMask: UInt32?
    }

    struct OverrunWire: Codable, Equatable {
        var frame: Int64
        var frames: Int64
        var date: String
        var cause: String
    }

    /// Just the schema and the number of takes, read before anything else so that a future
    /// schema or an oversized take list is refused without decoding the rest.
    struct Head: Decodable {
        var schema: Int
        var takeCount: Int?

        enum CodingKeys: String, CodingKey { case schema, takes }

        init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            schema = try c.decode(Int.self, forKey: .schema)
            if c.contains(.takes), try !c.decodeNil(forKey: .takes) {
                let list = try c.nestedUnkeyedContainer(forKey: .takes)
                takeCount = list.count
            }
        }
    }

    // MARK: encoding

    /// The manifest as pretty-printed JSON with sorted keys.
    package static func encode(_ manifest: Manifest) throws -> Data {
        let wire = Wire(
            schema: Manifest.schema, id: manifest.id, name: manifest.name, createdAt: UTCTimestamp.format(manifest.createdAt),
            takes: manifest.takes.map { e in
                TakeWire(id: e.id, name: e.name, number: e.number, file: e.file,
                         format: FormatWire(sampleRate: e.format.sampleRate, channels: e.format.channels,
                                            sampleFormat: e.format.sampleFormat.rawValue,
                                            channelMask: e.format.layout == .conventional(channels: e.format.channels) ? nil : e.format.layout.mask),
                         encoding: e.encoding, frames: e.frames, startDate: UTCTimestamp.format(e.startDate), state: e.state.rawValue,
                         overruns: e.overruns.map { OverrunWire(frame: $0.frame, frames: $0.frames, date: UTCTimestamp.format($0.date), cause: $0.cause) },
                         notes: e.notes, tags: e.tags.isEmpty ? nil : e.tags, clippedSamples: e.clippedSamples == 0 ? nil : e.clippedSamples,
                         run: e.run.map { RunWire(id: $0.id, index: $0.index, offset: $0.offset, began: $0.began?.rawValue, ended: $0.ended?.rawValue) },
                         markers: e.markers.isEmpty ? nil : e.markers.map { MarkerWire(frame: $0.frame, label: $0.label, date: UTCTimestamp.format($0.date)) },
                         loudness: e.loudness, began: e.began.map(UTCTimestamp.format), pendingFile: e.pendingFile)
            })
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(wire)
    }

    // MARK: decoding

    /// Parses and validates untrusted manifest bytes.
    /// - Throws: ``ManifestProblem`` naming the JSON path and what is wrong.
    package static func decode(_ data: Data) throws -> Manifest {
        if let wire = ManifestReader.read(data) { return try validate(wire) }
        return try validate(try foundationWire(data))
    }

    /// What the direct reader makes of `data`; `nil` when it leaves the bytes to `JSONDecoder`.
    /// (For the tests and the fuzz target that compare the two.)
    package static func directWire(_ data: Data) -> Wire? {
        ManifestReader.read(data)
    }

    /// The bytes through `JSONDecoder`: the schema and the number of takes first, then the rest.
    /// - Throws: ``ManifestProblem`` naming the JSON path and what is wrong.
    package static func foundationWire(_ data: Data) throws -> Wire {
        let decoder = JSONDecoder()
        let head: Head
        do { head = try decoder.decode(Head.self, from: data) } catch let error as DecodingError { throw problem(error) }
        guard Manifest.supportedSchemas.contains(head.schema) else {
            throw ManifestProblem(path: "schema", problem:
                "schema \(head.schema) is not supported; this version of Tapedeck reads schema \(Manifest.supportedSchemas.map(String.init).joined(separator: ", ")). Open the bundle with a newer Tapedeck")
        }
        if let count = head.takeCount, count > Manifest.maxTakes {
            throw ManifestProblem(path: "takes", problem: "it lists \(count) takes; a session holds at most \(Manifest.maxTakes)")
        }
        do { return try decoder.decode(Wire.self, from: data) } catch let error as DecodingError { throw problem(error) }
    }

    static func validate(_ wire: Wire) throws -> Manifest {
        try check(validID(wire.id), "id", "the session id \(quoted(wire.id)) is not an identifier (letters, digits and dashes, at most 64)")
        try checkName(wire.name, what: "session", path: "name")
        let createdAt = try date(wire.createdAt, path: "createdAt")
        var ids = Set<String>()
        var fileNames = Set<String>()
        var takes: [Manifest.Entry] = []
        takes.reserveCapacity(wire.takes.count)
        for (i, t) in wire.takes.enumerated() {
            let at = "takes[\(i)]"
            try check(validID(t.id), "\(at).id", "the take id \(quoted(t.id)) is not an identifier (letters, digits and dashes, at most 64)")
            try check(ids.insert(t.id).inserted, "\(at).id", "the take id \(t.id) appears more than once")
            try checkName(t.name, what: "take", path: "\(at).name")
            try check((1...Manifest.maxNumber).contains(t.number), "\(at).number", "the take number \(t.number) is out of range (1 to \(Manifest.maxNumber))")
            if let reason = fileNameProblem(t.file, pending: false) { throw ManifestProblem(path: "\(at).file", problem: reason) }
            try check(fileNames.insert(t.file).inserted, "\(at).file", "the file \(quoted(t.file)) belongs to another take as well")
            if let pending = t.pendingFile {
                if let reason = fileNameProblem(pending, pending: true) { throw ManifestProblem(path: "\(at).pendingFile", problem: reason) }
                try check(fileNames.insert(pending).inserted, "\(at).pendingFile", "the file \(quoted(pending)) belongs to another take as well")
            }
            try check(AudioFormat.sampleRateRange.contains(t.format.sampleRate), "\(at).format.sampleRate",
                      "the sample rate \(t.format.sampleRate) Hz is out of range (\(AudioFormat.sampleRateRange.lowerBound) to \(AudioFormat.sampleRateRange.upperBound))")
            try check(AudioFormat.channelRange.contains(t.format.channels), "\(at).format.channels",
                      "the channel count \(t.format.channels) is out of range (\(AudioFormat.channelRange.lowerBound) to \(AudioFormat.channelRange.upperBound))")
            guard let sampleFormat = SampleFormat(rawValue: t.format.sampleFormat) else {
                throw ManifestProblem(path: "\(at).format.sampleFormat", problem:
                    "the sample format \(quoted(t.format.sampleFormat)) is unknown (known: \(SampleFormat.allCases.map(\.rawValue).joined(separator: ", ")))")
            }
            var layout: ChannelLayout?
            if let mask = t.format.channelMask {
                layout = ChannelLayout(mask: mask, channels: t.format.channels)
                try check(layout != nil, "\(at).format.channelMask",
                          "the channel mask \(mask) does not name one speaker for each of the \(t.format.channels) channels")
            }
            try check(labelProblem(t.encoding) == nil, "\(at).encoding", "the encoding \(quoted(t.encoding)) \(labelProblem(t.encoding) ?? "")")
            try check((0...Manifest.maxFrames).contains(t.frames), "\(at).frames", "the frame count \(t.frames) is out of range (0 to 2^40)")
            let startDate = try date(t.startDate, path: "\(at).startDate")
            guard let state = TakeState(rawValue: t.state) else {
                throw ManifestProblem(path: "\(at).state", problem:
                    "the state \(quoted(t.state)) is unknown (known: \(TakeState.allCases.map(\.rawValue).joined(separator: ", ")))")
            }
            do {
                try TakeAnnotations(notes: t.notes, tags: t.tags ?? [:], clippedSamples: t.clippedSamples ?? 0).validate()
            } catch let error as TapedeckError {
                throw ManifestProblem(path: "\(at).tags", problem: error.message)
            }
            let run = t.run.map { r in
                TakeRun(id: r.id, index: r.index, offset: r.offset,
                        began: r.began.flatMap(TakeBoundary.init(rawValue:)), ended: r.ended.flatMap(TakeBoundary.init(rawValue:)))
            }
            do {
                try run?.validate()
            } catch let error as TapedeckError {
                throw ManifestProblem(path: "\(at).run", problem: error.message)
            }
            var markers: [TakeMarker] = []
            for (j, m) in (t.markers ?? []).enumerated() {
                markers.append(TakeMarker(frame: m.frame, label: m.label, date: try date(m.date, path: "\(at).markers[\(j)].date")))
            }
            do {
                try TakeAnnotations(markers: markers).validate()
            } catch let error as TapedeckError {
                throw ManifestProblem(path: "\(at).markers", problem: error.message)
            }
            do {
                try t.loudness?.validate()
            } catch let error as TapedeckError {
                throw ManifestProblem(path: "\(at).loudness", problem: error.message)
            }
            var overruns: [OverrunEvent] = []
            for (j, o) in t.overruns.enumerated() {
                let oat = "\(at).overruns[\(j)]"
                try check((0...Manifest.maxFrames).contains(o.frame), "\(oat).frame", "the position \(o.frame) is out of range (0 to 2^40)")
                try check((0...Manifest.maxFrames).contains(o.frames), "\(oat).frames", "the length \(o.frames) is out of range (0 to 2^40)")
                try check(labelProblem(o.cause) == nil, "\(oat).cause", "the cause \(quoted(o.cause)) \(labelProblem(o.cause) ?? "")")
                overruns.append(OverrunEvent(frame: o.frame, frames: o.frames, date: try date(o.date, path: "\(oat).date"), cause: o.cause))
            }
            takes.append(Manifest.Entry(
                id: t.id, name: t.name, number: t.number, file: t.file,
                format: AudioFormat(sampleRate: t.format.sampleRate, channels: t.format.channels, sampleFormat: sampleFormat, layout: layout),
                encoding: t.encoding, frames: t.frames, startDate: startDate, state: state, overruns: overruns,
                notes: t.notes, tags: t.tags ?? [:], clippedSamples: t.clippedSamples ?? 0, run: run, markers: markers,
                loudness: t.loudness, began: try t.began.map { try date($0, path: "\(at).began") }, pendingFile: t.pendingFile))
        }
        return Manifest(id: wire.id, name: wire.name, createdAt: createdAt, takes: takes)
    }

    // MARK: rules

    /// Whether `id` can be used in a file name: 1 to 64 ASCII letters, digits and dashes.
    static func validID(_ id: String) -> Bool {
        !id.isEmpty && id.utf8.count <= 64 && id.utf8.allSatisfy { c in
            (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x2D
        }
    }

    /// Why `name` is not a plain file name directly inside a bundle, or `nil` when it is.
    /// Audio files are visible names; pending files are hidden (`.ID.pending.EXT`).
    static func fileNameProblem(_ name: String, pending: Bool) -> String? {
        if isPlainASCIIName(name, pending: pending) { return nil }
        let shown = quoted(name)
        if name.isEmpty { return "the file name is empty" }
        if name.utf8.contains(0) { return "the file name \(shown) contains a NUL byte" }
        if name.hasPrefix("/") { return "the file name \(shown) is an absolute path; audio files must sit directly in the bundle" }
        if name.contains("/") {
            if name.split(separator: "/").contains("..") { return "the file name \(shown) leads out of the bundle" }
            return "the file name \(shown) contains a slash; audio files must sit directly in the bundle"
        }
        if name == "." || name == ".." { return "the file name \(shown) is not a file name; it leads out of the bundle" }
        if name.utf8.count > 255 { return "the file name is \(name.utf8.count) bytes long; at most 255 are allowed" }
        if name == "manifest.json" { return "the file name \(shown) is the manifest itself" }
        if hasControlCharacter(name) {
            return "the file name \(shown) contains a control character"
        }
        if pending {
            guard name.hasPrefix("."), name.contains(".pending."), !name.hasPrefix(".manifest.json.tmp-") else {
                return "the pending file name \(shown) is not of the form .ID.pending.EXT"
            }
        } else if name.hasPrefix(".") {
            return "the file name \(shown) starts with a dot; only pending files are hidden"
        }
        return nil
    }

    /// The common case of ``fileNameProblem(_:pending:)`` on bytes: printable ASCII without a
    /// slash, at most 255 bytes, not `.`, `..` or the manifest, hidden exactly when pending.
    static func isPlainASCIIName(_ name: String, pending: Bool) -> Bool {
        var count = 0
        for byte in name.utf8 {
            guard byte >= 0x20, byte < 0x7F, byte != 0x2F else { return false }
            count += 1
        }
        guard count > 0, count <= 255, name != ".", name != "..", name != "manifest.json" else { return false }
        let hidden = name.utf8.first == 0x2E
        if !pending { return !hidden }
        return hidden && name.utf8.count > 9 && name.firstRange(of: ".pending.") != nil && !name.hasPrefix(".manifest.json.tmp-")
    }

    /// Why a short label (an encoding name, an overrun cause) is refused, or `nil`.
    static func labelProblem(_ label: String) -> String? {
        if label.isEmpty { return "is empty" }
        if label.utf8.count > Manifest.maxLabelBytes { return "is longer than \(Manifest.maxLabelBytes) bytes" }
        if hasControlCharacter(label) { return "contains a control character" }
        return nil
    }

    /// Whether `text` holds a control character (Unicode's general category Cc), on bytes for ASCII.
    static func hasControlCharacter(_ text: String) -> Bool {
        var ascii = true
        for byte in text.utf8 {
            if byte < 0x20 || byte == 0x7F { return true }
            if byte >= 0x80 { ascii = false }
        }
        return !ascii && text.unicodeScalars.contains { $0.properties.generalCategory == .control }
    }

    static func checkName(_ name: String, what: String, path: String) throws {
        do { _ = try NameRules.validate(name, what: what) } catch let error as TapedeckError {
            throw ManifestProblem(path: path, problem: error.message)
        }
    }

    static func check(_ condition: Bool, _ path: String, _ problem: @autoclosure () -> String) throws {
        if !condition { throw ManifestProblem(path: path, problem: problem()) }
    }

    static func date(_ text: String, path: String) throws -> Date {
        guard let d = UTCTimestamp.parse(text) else {
            throw ManifestProblem(path: path, problem: "\(quoted(text)) is not an ISO-8601 date such as 2024-05-01T18:30:00.000000Z")
        }
        return d
    }

    /// A value for an error message: quoted, escaped, and cut to 80 characters.
    static func quoted(_ s: String) -> String {
        let cut = s.count > 80 ? String(s.prefix(80)) + "…" : s
        return cut.debugDescription
    }

    static func problem(_ error: DecodingError) -> ManifestProblem {
        switch error {
        case .dataCorrupted(let c):
            if c.codingPath.isEmpty {
                return ManifestProblem(path: "", problem: "it is not valid JSON")
            }
            return ManifestProblem(path: jsonPath(c.codingPath), problem: "the value is not usable (\(c.debugDescription))")
        case .keyNotFound(let key, let c):
            return ManifestProblem(path: jsonPath(c.codingPath + [key]), problem: "the value is missing")
        case .typeMismatch(let type, let c):
            return ManifestProblem(path: jsonPath(c.codingPath), problem: "the value has the wrong type; expected \(typeName(type))")
        case .valueNotFound(let type, let c):
            return ManifestProblem(path: jsonPath(c.codingPath), problem: "the value is null; expected \(typeName(type))")
        @unknown default:
            return ManifestProblem(path: "", problem: "it cannot be read (\(error))")
        }
    }

    static func typeName(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: "a string"
        case is Int.Type, is Int64.Type: "a whole number"
        case is Bool.Type: "true or false"
        default: String(describing: type).hasPrefix("Array") ? "a list" : "an object"
        }
    }

    /// `takes[3].format.sampleRate` from coding keys.
    static func jsonPath(_ keys: [any CodingKey]) -> String {
        var out = ""
        for key in keys {
            if let i = key.intValue {
                out += "[\(i)]"
            } else {
                out += out.isEmpty ? key.stringValue : "." + key.stringValue
            }
        }
        return out
    }
}
