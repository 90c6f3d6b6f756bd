import Foundation
import TapedeckCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A direct reader of `manifest.json` into ``ManifestCodec/Wire``: one pass over the bytes, no
/// intermediate tree, no `Decoder` machinery (Foundation's `JSONDecoder` took most of a large
/// library's listing).
///
/// It reads only what it is sure of: plain JSON as the manifest's shape has it. Anything else
/// (a missing or mistyped value, a duplicate key, a number written with a fraction where a
/// whole one belongs, an unpaired surrogate, a schema this build does not read) makes it answer
/// `nil`, and ``ManifestCodec/decode(_:)`` asks `JSONDecoder` instead, whose answer (and error
/// message) stands. So what it accepts, `JSONDecoder` accepts as the same `Wire` (the fuzz target
/// `manifest` and `ManifestReaderTests` compare the two). A plain value; any thread.
struct ManifestReader {
    private let bytes: UnsafeRawBufferPointer
    private var at = 0
    /// How deep unknown values may nest before the reader leaves them to `JSONDecoder`.
    private static let maxDepth = 64

    private init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    /// The manifest's wire form, or `nil` when `JSONDecoder` must decide.
    static func read(_ data: Data) -> ManifestCodec.Wire? {
        data.withUnsafeBytes { raw in
            var reader = ManifestReader(raw)
            guard let wire = reader.manifest() else { return nil }
            reader.skipSpace()
            return reader.at == raw.count ? wire : nil
        }
    }

    // MARK: the manifest's shape

    private mutating func manifest() -> ManifestCodec.Wire? {
        var schema: Int?, id: String?, name: String?, createdAt: String?, takes: [ManifestCodec.TakeWire]?
        let ok = members { key, reader in
            switch key {
            case "schema": schema = reader.int()
                // A schema this build does not read, or too many takes: JSONDecoder's message.
                return schema.map(Manifest.supportedSchemas.contains) ?? false
            case "id": id = reader.string(); return id != nil
            case "name": name = reader.string(); return name != nil
            case "createdAt": createdAt = reader.string(); return createdAt != nil
            case "takes":
                takes = reader.list { reader in reader.take() }
                return takes.map { $0.count <= Manifest.maxTakes } ?? false
            default: return reader.skip(depth: 1)
            }
        }
        guard ok, let schema, let id, let name, let createdAt, let takes else { return nil }
        return ManifestCodec.Wire(schema: schema, id: id, name: name, createdAt: createdAt, takes: takes)
    }

    private mutating func take() -> ManifestCodec.TakeWire? {
        var id: String?, name: String?, number: Int?, file: String?, format: ManifestCodec.FormatWire?, encoding: String?
        var frames: Int64?, startDate: String?, state: String?, overruns: [ManifestCodec.OverrunWire]?, notes: String?
        var tags: [String: String]?, clippedSamples: Int64?, run: ManifestCodec.RunWire?, markers: [ManifestCodec.MarkerWire]?
        var loudness: Loudness?, began: String?, pendingFile: String?
        let ok = members { key, reader in
            switch key {
            case "id": id = reader.string(); return id != nil
            case "name": name = reader.string(); return name != nil
            case "number": number = reader.int(); return number != nil
            case "file": file = reader.string(); return file != nil
            case "format": format = reader.format(); return format != nil
            case "encoding": encoding = reader.string(); return encoding != nil
            case "frames": frames = reader.int().map(Int64.init); return frames != nil
            case "startDate": startDate = reader.string(); return startDate != nil
            case "state": state = reader.string(); return state != nil
            case "overruns": overruns = reader.list { $0.overrun() }; return overruns != nil
            case "notes": notes = reader.string(); return notes != nil
            case "tags": return reader.optional { tags = $0.tags(); return tags != nil }
            case "clippedSamples": return reader.optional { clippedSamples = $0.int().map(Int64.init); return clippedSamples != nil }
            case "run": return reader.optional { run = $0.run(); return run != nil }
            case "markers": return reader.optional { markers = $0.list { $0.marker() }; return markers != nil }
            case "loudness": return reader.optional { loudness = $0.loudness(); return loudness != nil }
            case "began": return reader.optional { began = $0.string(); return began != nil }
            case "pendingFile": return reader.optional { pendingFile = $0.string(); return pendingFile != nil }
            default: return reader.skip(depth: 2)
            }
        }
        guard ok, let id, let name, let number, let file, let format, let encoding, let frames, let startDate, let state,
              let overruns, let notes else { return nil }
        return ManifestCodec.TakeWire(id: id, name: name, number: number, file: file, format: format, encoding: encoding, frames: frames,
                                      startDate: startDate, state: state, overruns: overruns, notes: notes, tags: tags,
                                      clippedSamples: clippedSamples, run: run, markers: markers, loudness: loudness, began: began,
                                      pendingFile: pendingFile)
    }

    private mutating func format() -> ManifestCodec.FormatWire? {
        var sampleRate: Int?, channels: Int?, sampleFormat: String?, channelMask: UInt32?
        let ok = members { key, reader in
            switch key {
            case "sampleRate": sampleRate = reader.int(); return sampleRate != nil
            case "channels": channels = reader.int(); return channels != nil
            case "sampleFormat": sampleFormat = reader.string(); return sampleFormat != nil
            case "channelMask": return reader.optional { channelMask = $0.int().flatMap(UInt32.init(exactly:)); return channelMask != nil }
            default: return reader.skip(depth: 3)
            }
        }
        guard ok, let sampleRate, let channels, let sampleFormat else { return nil }
        return ManifestCodec.FormatWire(sampleRate: sampleRate, channels: channels, sampleFormat: sampleFormat, channelMask: channelMask)
    }

    private mutating func overrun() -> ManifestCodec.OverrunWire? {
        var frame: Int?, frames: Int?, date: String?, cause: String?
        let ok = members { key, reader in
            switch key {
            case "frame": frame = reader.int(); return frame != nil
            case "frames": frames = reader.int(); return frames != nil
            case "date": date = reader.string(); return date != nil
            case "cause": cause = reader.string(); return cause != nil
            default: return reader.skip(depth: 4)
            }
        }
        guard ok, let frame, let frames, let date, let cause else { return nil }
        return ManifestCodec.OverrunWire(frame: Int64(frame), frames: Int64(frames), date: date, cause: cause)
    }

    private mutating func marker() -> ManifestCodec.MarkerWire? {
        var frame: Int?, label: String?, date: String?
        let ok = members { key, reader in
            switch key {
            case "frame": frame = reader.int(); return frame != nil
            case "label": label = reader.string(); return label != nil
            case "date": date = reader.string(); return date != nil
            default: return reader.skip(depth: 4)
            }
        }
        guard ok, let frame, let label, let date else { return nil }
        return ManifestCodec.MarkerWire(frame: Int64(frame), label: label, date: date)
    }

    private mutating func run() -> ManifestCodec.RunWire? {
        var id: String?, index: Int?, offset: Int64?, began: String?, ended: String?
        let ok = members { key, reader in
            switch key {
            case "id": id = reader.string(); return id != nil
            case "index": index = reader.int(); return index != nil
            case "offset": return reader.optional { offset = $0.int().map(Int64.init); return offset != nil }
            case "began": return reader.optional { began = $0.string(); return began != nil }
            case "ended": return reader.optional { ended = $0.string(); return ended != nil }
            default: return reader.skip(depth: 3)
            }
        }
        guard ok, let id, let index else { return nil }
        return ManifestCodec.RunWire(id: id, index: index, offset: offset, began: began, ended: ended)
    }

    private mutating func loudness() -> Loudness? {
        var integrated: Double?, range: Double?, truePeak: Double?, maxMomentary: Double?, maxShortTerm: Double?
        let ok = members { key, reader in
            switch key {
            case "integrated": return reader.optional { integrated = $0.double(); return integrated != nil }
            case "range": range = reader.double(); return range != nil
            case "truePeak": return reader.optional { truePeak = $0.double(); return truePeak != nil }
            case "maxMomentary": return reader.optional { maxMomentary = $0.double(); return maxMomentary != nil }
            case "maxShortTerm": return reader.optional { maxShortTerm = $0.double(); return maxShortTerm != nil }
            default: return reader.skip(depth: 3)
            }
        }
        guard ok, let range else { return nil }
        // As the synthesized decoder does: the stored values as written, not through the clamping initializer.
        var value = Loudness(integrated: nil, range: 0, truePeak: nil, maxMomentary: nil, maxShortTerm: nil)
        value.integrated = integrated
        value.range = range
        value.truePeak = truePeak
        value.maxMomentary = maxMomentary
        value.maxShortTerm = maxShortTerm
        return value
    }

    private mutating func tags() -> [String: String]? {
        var out: [String: String] = [:]
        let ok = members { key, reader in
            guard let value = reader.string() else { return false }
            out[key] = value
            return true
        }
        return ok ? out : nil
    }

    // MARK: JSON

    /// An object's members in order: `body` reads each value and answers whether it could.
    /// A key seen twice (`JSONDecoder` keeps the first), more than 32 keys, or any body that
    /// could not, makes the object unreadable here. Keys are told apart by a 64-bit hash kept on
    /// the stack: two different keys with one hash only send the object to `JSONDecoder`.
    private mutating func members(_ body: (String, inout ManifestReader) -> Bool) -> Bool {
        skipSpace()
        guard take(0x7B) else { return false }
        skipSpace()
        if take(0x7D) { return true }
        return withUnsafeTemporaryAllocation(of: UInt64.self, capacity: 32) { seen -> Bool in
            var count = 0
            while true {
                skipSpace()
                guard let key = string(), count < seen.count else { return false }
                var hash: UInt64 = 0xcbf2_9ce4_8422_2325
                for byte in key.utf8 { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3 }
                for i in 0..<count where seen[i] == hash { return false }
                seen[count] = hash
                count += 1
                skipSpace()
                guard take(0x3A), body(key, &self) else { return false }
                skipSpace()
                if take(0x2C) { continue }
                return take(0x7D)
            }
        }
    }

    /// An array's elements, each read by `element`.
    private mutating func list<T>(_ element: (inout ManifestReader) -> T?) -> [T]? {
        skipSpace()
        guard take(0x5B) else { return nil }
        var out: [T] = []
        skipSpace()
        if take(0x5D) { return out }
        while true {
            guard let value = element(&self) else { return nil }
            out.append(value)
            skipSpace()
            if take(0x2C) { continue }
            return take(0x5D) ? out : nil
        }
    }

    /// An optional value: `null` leaves it absent, anything else is read by `body`.
    private mutating func optional(_ body: (inout ManifestReader) -> Bool) -> Bool {
        skipSpace()
        if literal(Self.nullWord) { return true }
        return body(&self)
    }

    /// A whole number as JSON writes one: `-?(0|[1-9][0-9]*)`, no fraction, no exponent, no `-0`,
    /// within `Int`.
    private mutating func int() -> Int? {
        skipSpace()
        let negative = take(0x2D)
        guard at < bytes.count, isDigit(bytes[at]) else { return nil }
        if bytes[at] == 0x30 {
            at += 1
            guard !negative, at >= bytes.count || !isNumberByte(bytes[at]) else { return nil }
            return 0
        }
        var value = 0
        while at < bytes.count, isDigit(bytes[at]) {
            let digit = Int(bytes[at] &- 0x30)
            let (times, o1) = value.multipliedReportingOverflow(by: 10)
            let (sum, o2) = negative ? times.subtractingReportingOverflow(digit) : times.addingReportingOverflow(digit)
            guard !o1, !o2 else { return nil }
            value = sum
            at += 1
        }
        guard at >= bytes.count || !isNumberByte(bytes[at]) else { return nil }
        return value
    }

    /// A JSON number as a finite `Double` (read by `strtod`, as Foundation does).
    private mutating func double() -> Double? {
        skipSpace()
        let start = at
        _ = take(0x2D)
        guard at < bytes.count, isDigit(bytes[at]) else { return nil }
        if bytes[at] == 0x30 {
            at += 1
        } else {
            while at < bytes.count, isDigit(bytes[at]) { at += 1 }
        }
        if take(0x2E) {
            guard at < bytes.count, isDigit(bytes[at]) else { return nil }
            while at < bytes.count, isDigit(bytes[at]) { at += 1 }
        }
        if at < bytes.count, bytes[at] == 0x65 || bytes[at] == 0x45 {
            at += 1
            if at < bytes.count, bytes[at] == 0x2B || bytes[at] == 0x2D { at += 1 }
            guard at < bytes.count, isDigit(bytes[at]) else { return nil }
            while at < bytes.count, isDigit(bytes[at]) { at += 1 }
        }
        guard at >= bytes.count || !isNumberByte(bytes[at]), at - start < 64 else { return nil }
        // Swift's own parsing: correctly rounded, as Foundation's, and in no locale.
        let text = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<at]), as: UTF8.self)
        guard let value = Double(text), value.isFinite else { return nil }
        return value
    }

    /// A string: bytes without escapes are taken whole; escapes are decoded; a raw control
    /// character, bad UTF-8 or an unpaired surrogate is left to `JSONDecoder`.
    private mutating func string() -> String? {
        skipSpace()
        guard take(0x22) else { return nil }
        let start = at
        var high: UInt8 = 0
        while at < bytes.count {
            let b = bytes[at]
            if b == 0x22 {
                let raw = UnsafeRawBufferPointer(rebasing: bytes[start..<at])
                // ASCII needs no check; anything else must be valid UTF-8.
                let text = high < 0x80 ? String(decoding: raw, as: UTF8.self) : String(validating: raw, as: UTF8.self)
                at += 1
                return text
            }
            high |= b
            if b == 0x5C { return escapedString(from: start) }
            if b < 0x20 { return nil }
            at += 1
        }
        return nil
    }

    private mutating func escapedString(from start: Int) -> String? {
        var out = Array(bytes[start..<at])
        while at < bytes.count {
            let b = bytes[at]
            at += 1
            if b == 0x22 { return String(validating: out, as: UTF8.self) }
            if b < 0x20 { return nil }
            guard b == 0x5C else {
                out.append(b)
                continue
            }
            guard at < bytes.count else { return nil }
            let e = bytes[at]
            at += 1
            switch e {
            case 0x22, 0x5C, 0x2F: out.append(e)
            case 0x62: out.append(0x08)
            case 0x66: out.append(0x0C)
            case 0x6E: out.append(0x0A)
            case 0x72: out.append(0x0D)
            case 0x74: out.append(0x09)
            case 0x75:
                guard var unit = hex4() else { return nil }
                if (0xD800...0xDBFF).contains(unit) {
                    guard take(0x5C), take(0x75), let low = hex4(), (0xDC00...0xDFFF).contains(low) else { return nil }
                    unit = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
                } else if (0xDC00...0xDFFF).contains(unit) {
                    return nil
                }
                guard let scalar = Unicode.Scalar(unit) else { return nil }
                out.append(contentsOf: Array(String(Character(scalar)).utf8))
            default:
                return nil
            }
        }
        return nil
    }

    private mutating func hex4() -> UInt32? {
        guard at + 4 <= bytes.count else { return nil }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let b = bytes[at]
            let digit: UInt32
            switch b {
            case 0x30...0x39: digit = UInt32(b - 0x30)
            case 0x41...0x46: digit = UInt32(b - 0x41 + 10)
            case 0x61...0x66: digit = UInt32(b - 0x61 + 10)
            default: return nil
            }
            value = value << 4 | digit
            at += 1
        }
        return value
    }

    /// Passes over a value of a key this build does not know (as `JSONDecoder` ignores it).
    private mutating func skip(depth: Int) -> Bool {
        guard depth < Self.maxDepth else { return false }
        skipSpace()
        guard at < bytes.count else { return false }
        switch bytes[at] {
        case 0x22: return string() != nil
        case 0x7B: return members { _, reader in reader.skip(depth: depth + 1) }
        case 0x5B: return list { reader -> Bool? in reader.skip(depth: depth + 1) ? true : nil } != nil
        case 0x74: return literal(Self.trueWord)
        case 0x66: return literal(Self.falseWord)
        case 0x6E: return literal(Self.nullWord)
        default: return double() != nil
        }
    }

    /// JSON's three words, as bytes (only the composition root spells out backend names, and
    /// one backend is called null).
    private static let nullWord: [UInt8] = [0x6E, 0x75, 0x6C, 0x6C]
    private static let trueWord: [UInt8] = Array("true".utf8)
    private static let falseWord: [UInt8] = Array("false".utf8)

    private mutating func literal(_ word: [UInt8]) -> Bool {
        let n = word.count
        guard at + n <= bytes.count else { return false }
        for i in 0..<n where bytes[at + i] != word[i] { return false }
        guard at + n >= bytes.count || !isLetter(bytes[at + n]) else { return false }
        at += n
        return true
    }

    private mutating func skipSpace() {
        while at < bytes.count {
            switch bytes[at] {
            case 0x20, 0x0A, 0x0D, 0x09: at += 1
            default: return
            }
        }
    }

    private mutating func take(_ byte: UInt8) -> Bool {
        guard at < bytes.count, bytes[at] == byte else { return false }
        at += 1
        return true
    }

    private func isDigit(_ b: UInt8) -> Bool { b >= 0x30 && b <= 0x39 }
    private func isLetter(_ b: UInt8) -> Bool { (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) }
    private func isNumberByte(_ b: UInt8) -> Bool { isDigit(b) || b == 0x2E || b == 0x65 || b == 0x45 || b == 0x2B || b == 0x2D }
}
