public import Foundation
import TapedeckCore

/// JSON as the commands print it with `--json` (Foundation's `JSONEncoder` with pretty
/// printing, keys sorted by their UTF-8 bytes, slashes unescaped, dates as ISO 8601 UTC to the
/// second), written straight into bytes for the shapes printed by the thousand: `list --json`
/// writes a library of 100,000 takes with it, where the generic encoder spent two thirds of the
/// time. Each shape writes its keys in sorted order itself; `PrettyJSONTests` checks every one
/// against `JSONEncoder`, byte for byte. A plain value; any thread; never blocks.
public struct PrettyJSON {
    /// The text so far (UTF-8).
    public private(set) var bytes: [UInt8] = []
    private var depth = 0
    /// Per open container: whether it has an element yet.
    private var filled: [Bool] = []

    public init(capacity: Int = 4096) { bytes.reserveCapacity(capacity) }

    /// The text `write` makes, as `Terminal.json` would print the same value (the outermost level).
    public static func text(_ write: (inout PrettyJSON) -> Void) -> String {
        var json = PrettyJSON()
        write(&json)
        return String(decoding: json.bytes, as: UTF8.self)
    }

    // MARK: containers

    /// An object whose fields `body` writes (in sorted order) with ``field(_:_:)`` and friends.
    public mutating func object(_ body: (inout PrettyJSON) -> Void) {
        open(0x7B)
        body(&self)
        close(0x7D)
    }

    /// An array whose elements `body` writes with ``element(_:)``.
    public mutating func array(_ body: (inout PrettyJSON) -> Void) {
        open(0x5B)
        body(&self)
        close(0x5D)
    }

    /// The next element of the open array.
    public mutating func element(_ body: (inout PrettyJSON) -> Void) {
        separate()
        body(&self)
    }

    /// The next field of the open object: its key, then `body` writes its value.
    public mutating func field(_ key: String, _ body: (inout PrettyJSON) -> Void) {
        separate()
        string(key)
        bytes.append(0x20)  // " : "
        bytes.append(0x3A)
        bytes.append(0x20)
        body(&self)
    }

    private mutating func open(_ bracket: UInt8) {
        bytes.append(bracket)
        bytes.append(0x0A)
        depth += 1
        filled.append(false)
    }

    private mutating func close(_ bracket: UInt8) {
        filled.removeLast()
        depth -= 1
        bytes.append(0x0A)
        indent()
        bytes.append(bracket)
    }

    private mutating func separate() {
        if filled[filled.count - 1] {
            bytes.append(0x2C)
            bytes.append(0x0A)
        } else {
            filled[filled.count - 1] = true
        }
        indent()
    }

    private mutating func indent() {
        bytes.append(contentsOf: repeatElement(0x20, count: depth * 2))
    }

    // MARK: values

    public mutating func string(_ value: String) {
        bytes.append(0x22)
        // Most strings need no escape: copied whole, from their contiguous UTF-8.
        var text = value
        let plain = text.withUTF8 { utf8 in
            guard !utf8.contains(where: { $0 < 0x20 || $0 == 0x22 || $0 == 0x5C }) else { return false }
            bytes.append(contentsOf: utf8)
            return true
        }
        if plain {
            bytes.append(0x22)
            return
        }
        for b in value.utf8 {
            switch b {
            case 0x22: bytes.append(contentsOf: [0x5C, 0x22])
            case 0x5C: bytes.append(contentsOf: [0x5C, 0x5C])
            case 0x08: bytes.append(contentsOf: [0x5C, 0x62])
            case 0x0C: bytes.append(contentsOf: [0x5C, 0x66])
            case 0x0A: bytes.append(contentsOf: [0x5C, 0x6E])
            case 0x0D: bytes.append(contentsOf: [0x5C, 0x72])
            case 0x09: bytes.append(contentsOf: [0x5C, 0x74])
            case 0x00..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                bytes.append(contentsOf: [0x5C, 0x75, 0x30, 0x30, hex[Int(b >> 4)], hex[Int(b & 15)]])
            default: bytes.append(b)
            }
        }
        bytes.append(0x22)
    }

    public mutating func integer(_ value: some BinaryInteger) {
        guard let small = Int64(exactly: value) else { return bytes.append(contentsOf: String(value).utf8) }
        // The digits, written backwards into a small buffer, without making a String.
        var magnitude = small.magnitude
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes: enough for 20 digits
        var count = 0
        withUnsafeMutableBytes(of: &digits) { buffer in
            repeat {
                buffer[23 - count] = UInt8(truncatingIfNeeded: magnitude % 10) + 0x30
                magnitude /= 10
                count += 1
            } while magnitude > 0
            if small < 0 { bytes.append(0x2D) }
            bytes.append(contentsOf: buffer[(24 - count)...])
        }
    }

    /// A finite number as `JSONEncoder` writes it: Swift's shortest form, without a trailing `.0`.
    public mutating func number(_ value: Double) {
        var text = value.description
        if text.hasSuffix(".0") { text.removeLast(2) }
        bytes.append(contentsOf: text.utf8)
    }

    public mutating func bool(_ value: Bool) { bytes.append(contentsOf: (value ? "true" : "false").utf8) }

    /// JSON's null (its four letters as bytes: a backend is called that too, and only the
    /// composition root names backends).
    public mutating func null() { bytes.append(contentsOf: [0x6E, 0x75, 0x6C, 0x6C]) }

    public mutating func date(_ value: Date) { string(value.iso8601UTC) }

    // MARK: fields of the usual kinds

    public mutating func field(_ key: String, string value: String) { field(key) { $0.string(value) } }
    public mutating func field(_ key: String, integer value: some BinaryInteger) { field(key) { $0.integer(value) } }
    public mutating func field(_ key: String, number value: Double) { field(key) { $0.number(value) } }
    public mutating func field(_ key: String, date value: Date) { field(key) { $0.date(value) } }

    /// A `[String: String]` as an object, its keys sorted by their UTF-8 bytes.
    public mutating func field(_ key: String, strings value: [String: String]) {
        field(key) { json in
            json.object { o in
                for (k, v) in value.sorted(by: { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }) { o.field(k, string: v) }
            }
        }
    }
}

extension TakeJSON {
    /// Writes this take as `Terminal.json` would (``PrettyJSON``).
    public func write(to json: inout PrettyJSON) {
        json.object { o in
            if let broadcast { o.field("broadcast") { broadcast.write(to: &$0) } }
            if let bytes { o.field("bytes", integer: bytes) }
            o.field("clippedSamples", integer: clippedSamples)
            o.field("createdAt", date: createdAt)
            o.field("encoding", string: encoding)
            if let firstFrameAt { o.field("firstFrameAt", string: firstFrameAt) }
            o.field("format") { format.write(to: &$0) }
            o.field("frames", integer: frames)
            o.field("id", string: id)
            o.field("kind", string: kind)
            if let loudness { o.field("loudness") { loudness.write(to: &$0) } }
            o.field("markers") { j in j.array { a in for m in markers { a.element { m.write(to: &$0) } } } }
            o.field("name", string: name)
            o.field("notes", string: notes)
            o.field("number", integer: number)
            o.field("overrunEvents") { j in j.array { a in for e in overrunEvents { a.element { e.write(to: &$0) } } } }
            o.field("overrunFrames", integer: overrunFrames)
            o.field("overruns", integer: overruns)
            o.field("path", string: path)
            if let run { o.field("run") { run.write(to: &$0) } }
            o.field("schema", integer: schema)
            o.field("seconds", number: seconds)
            o.field("session", string: session)
            o.field("sessionID", string: sessionID)
            o.field("shortID", string: shortID)
            o.field("state", string: state)
            o.field("tags", strings: tags)
        }
    }
}

extension SessionJSON {
    /// Writes this session and its takes as `Terminal.json` would (``PrettyJSON``).
    public func write(to json: inout PrettyJSON) {
        json.object { o in
            o.field("createdAt", date: createdAt)
            o.field("id", string: id)
            o.field("kind", string: kind)
            o.field("name", string: name)
            o.field("schema", integer: schema)
            o.field("shortID", string: shortID)
            o.field("takes") { j in j.array { a in for t in takes { a.element { t.write(to: &$0) } } } }
        }
    }
}

extension FormatJSON {
    func write(to json: inout PrettyJSON) {
        json.object { o in
            o.field("channelLayout", string: channelLayout)
            o.field("channelMask", integer: channelMask)
            o.field("channels", integer: channels)
            o.field("sampleFormat", string: sampleFormat)
            o.field("sampleRate", integer: sampleRate)
        }
    }
}

extension MarkerJSON {
    func write(to json: inout PrettyJSON) {
        json.object { o in
            o.field("date", date: date)
            o.field("frame", integer: frame)
            o.field("label", string: label)
            o.field("seconds", number: seconds)
        }
    }
}

extension RunJSON {
    func write(to json: inout PrettyJSON) {
        json.object { o in
            if let began { o.field("began", string: began) }
            if let ended { o.field("ended", string: ended) }
            o.field("id", string: id)
            o.field("index", integer: index)
            if let offsetFrames { o.field("offsetFrames", integer: offsetFrames) }
            if let offsetSeconds { o.field("offsetSeconds", number: offsetSeconds) }
        }
    }
}

extension LoudnessJSON {
    func write(to json: inout PrettyJSON) {
        func put(_ v: Double?, _ key: String, _ o: inout PrettyJSON) {
            // As `encode(to:)`: two decimals, and null where there is no value.
            if let v { o.field(key, number: (v * 100).rounded() / 100) } else { o.field(key) { $0.null() } }
        }
        json.object { o in
            put(value.integrated, "integrated", &o)
            put(value.maxMomentary, "maxMomentary", &o)
            put(value.maxShortTerm, "maxShortTerm", &o)
            put(value.range, "range", &o)
            put(value.replayGain, "replayGain", &o)
            put(value.truePeak, "truePeak", &o)
        }
    }
}

extension BroadcastJSON {
    func write(to json: inout PrettyJSON) {
        json.object { o in
            o.field("codingHistory", string: codingHistory)
            o.field("description", string: description)
            o.field("ixml", strings: ixml)
            o.field("originationDate", string: originationDate)
            o.field("originationTime", string: originationTime)
            o.field("originator", string: originator)
            o.field("originatorReference", string: originatorReference)
            o.field("timeReference", integer: timeReference)
            o.field("version", integer: version)
        }
    }
}

extension OverrunEvent {
    func write(to json: inout PrettyJSON) {
        json.object { o in
            o.field("cause", string: cause)
            o.field("date", date: date)
            o.field("frame", integer: frame)
            o.field("frames", integer: frames)
        }
    }
}
