import Foundation
@testable import TapedeckBundleStorage
import TapedeckCore
import Testing

/// The direct manifest reader against `JSONDecoder`: whatever the reader accepts, `JSONDecoder`
/// accepts as the same wire form; and it does accept what Tapedeck and common tools write, or
/// the fast path would silently never run.
@Suite("Manifest reader")
struct ManifestReaderTests {
    /// A small deterministic generator (SplitMix64), so a failure names its seed.
    struct Generator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        mutating func below(_ n: Int) -> Int { Int(next() % UInt64(n)) }
        mutating func chance(_ percent: Int) -> Bool { below(100) < percent }
        mutating func pick<T>(_ items: [T]) -> T { items[below(items.count)] }
    }

    /// A JSON string literal for `text`, escaped one of several legal ways.
    static func quote(_ text: String, _ g: inout Generator) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += g.chance(50) ? "\\n" : "\\u000a"
            case "\t": out += "\\t"
            case "/": out += g.chance(50) ? "/" : "\\/"
            default:
                if scalar.value < 0x20 {
                    out += String(format: "\\u%04x", scalar.value)
                } else if scalar.value >= 0x80 && g.chance(30) {
                    for unit in String(scalar).utf16 { out += String(format: "\\u%04X", unit) }
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out + "\""
    }

    static let words = ["Take", "Bird", "Élan", "日本語", "🎙️ mic", "a\"b", "back\\slash", "tab\there", "line\nbreak", "x/y", "  ", "", "nul\u{0}"]

    static func number(_ value: Int64, _ g: inout Generator) -> String {
        // Mostly plain; sometimes a form only JSONDecoder may judge.
        switch g.below(80) {
        case 0: return "\(value).0"
        case 1: return "\(value)e0"
        case 2: return value == 0 ? "-0" : "\(value)"
        case 3: return "0\(value)"
        default: return "\(value)"
        }
    }

    static func double(_ g: inout Generator) -> String {
        g.pick(["-23.456789012345677", "0", "-0.5", "1e2", "-1.5E-3", "12", "1e400", "-70.0", "3.0000000000000004", "5e-324", "-0"])
    }

    static func optional(_ key: String, _ value: String, _ g: inout Generator) -> String? {
        switch g.below(4) {
        case 0: return nil
        case 1: return "\"\(key)\": null"
        default: return "\"\(key)\": \(value)"
        }
    }

    static func object(_ members: [String?], _ g: inout Generator) -> String {
        var list = members.compactMap { $0 }
        if g.chance(10) { list.append("\"futureKey\": {\"nested\": [1, 2.5, true, false, null, \"x\"]}") }
        if g.chance(5), let first = list.first { list.append(first) }  // a duplicate key
        if g.chance(50) { list.shuffle(using: &g) }
        let space = g.pick(["", " ", "\n  ", "\t"])
        return "{" + space + list.joined(separator: "," + space) + space + "}"
    }

    static func take(_ n: Int, _ g: inout Generator) -> String {
        let id = g.chance(95) ? String(format: "%016llx-%04x", g.next(), n) : g.pick(["ABC-def", "", "x y"])
        let name = g.pick(words) + " \(n)"
        return object([
            "\"id\": \(quote(id, &g))",
            "\"name\": \(quote(name, &g))",
            "\"number\": \(number(Int64(n), &g))",
            "\"file\": \(quote(g.chance(95) ? "\(n)-take.wav" : g.pick(["../x.wav", ".hidden", "a/b"]), &g))",
            "\"format\": " + object([
                "\"sampleRate\": \(number(48_000, &g))", "\"channels\": \(number(2, &g))",
                "\"sampleFormat\": \(quote(g.pick(["s16", "s24", "f32", "nope"]), &g))",
                optional("channelMask", g.pick(["3", "4294967295", "-1", "4294967296"]), &g),
            ], &g),
            "\"encoding\": \(quote(g.pick(["wav", "flac", "opus"]), &g))",
            "\"frames\": \(number(Int64(g.below(1_000_000)), &g))",
            "\"startDate\": \(quote(g.pick(["2024-05-01T18:30:00.123456Z", "2024-05-01T18:30:00Z", "not a date"]), &g))",
            "\"state\": \(quote(g.pick(["complete", "recording", "recovered"]), &g))",
            "\"overruns\": " + (g.chance(80) ? "[]" : "[" + object([
                "\"frame\": \(number(10, &g))", "\"frames\": \(number(5, &g))",
                "\"date\": \(quote("2024-05-01T18:30:01.000000Z", &g))", "\"cause\": \(quote("xrun", &g))",
            ], &g) + "]"),
            "\"notes\": \(quote(g.pick(words), &g))",
            optional("tags", object(["\"ARTIST\": \(quote(g.pick(words), &g))", "\"SIGNED\": \"AB12\""], &g), &g),
            optional("clippedSamples", number(Int64(g.below(100)), &g), &g),
            optional("run", object(["\"id\": \"r1\"", "\"index\": \(number(Int64(g.below(5)), &g))",
                                    optional("offset", number(480, &g), &g), optional("began", "\"start\"", &g),
                                    optional("ended", "\"split\"", &g)], &g), &g),
            optional("markers", "[" + object(["\"frame\": 5", "\"label\": \(quote(g.pick(words), &g))",
                                              "\"date\": \"2024-05-01T18:30:00.000000Z\""], &g) + "]", &g),
            optional("loudness", object([optional("integrated", double(&g), &g), "\"range\": \(double(&g))",
                                         optional("truePeak", double(&g), &g), optional("maxMomentary", double(&g), &g),
                                         optional("maxShortTerm", double(&g), &g)], &g), &g),
            optional("began", quote("2024-05-01T18:30:00.001Z", &g), &g),
            optional("pendingFile", quote(".\(id).pending.wav", &g), &g),
        ], &g)
    }

    static func manifest(_ g: inout Generator) -> String {
        let takes = (0..<g.below(6)).map { take($0 + 1, &g) }
        return object([
            "\"schema\": \(g.chance(95) ? "1" : g.pick(["2", "1.0", "\"1\""]))",
            "\"id\": \(quote("0b6a4c0e-1111-4222-8333-444455556666", &g))",
            "\"name\": \(quote(g.pick(words), &g))",
            "\"createdAt\": \(quote("2024-05-01T18:00:00.000000Z", &g))",
            "\"takes\": [" + takes.joined(separator: ", ") + "]",
        ], &g)
    }

    /// The reader's promise on one input.
    static func check(_ bytes: Data, _ context: String) {
        guard let direct = ManifestCodec.directWire(bytes) else { return }
        do {
            let foundation = try ManifestCodec.foundationWire(bytes)
            #expect(foundation == direct, "\(context): the two readers read different values")
        } catch {
            Issue.record("\(context): the direct reader accepts what JSONDecoder refuses (\(error))")
        }
    }

    @Test("whatever the direct reader reads, JSONDecoder reads the same (generated manifests, then each cut and scribbled)")
    func differential() {
        var g = Generator(state: 0x7A9E_DEC0)
        var accepted = 0
        for i in 0..<400 {
            let text = Self.manifest(&g)
            let bytes = Data(text.utf8)
            Self.check(bytes, "manifest \(i)")
            if ManifestCodec.directWire(bytes) != nil { accepted += 1 }
            for _ in 0..<4 {
                var damaged = bytes
                if g.chance(50), damaged.count > 1 {
                    damaged = damaged.prefix(g.below(damaged.count))
                } else if !damaged.isEmpty {
                    damaged[g.below(damaged.count)] = UInt8(truncatingIfNeeded: g.next())
                }
                Self.check(damaged, "manifest \(i), damaged")
            }
        }
        #expect(accepted > 100, "the direct reader read only \(accepted) of 400 generated manifests")
    }

    @Test("what Tapedeck writes, and what Python's json module writes, takes the direct path")
    func commonWritersTakeTheFastPath() throws {
        let manifest = Manifest(id: "0b6a4c0e-1111-4222-8333-444455556666", name: "Élan \"vital\" 日本", createdAt: Date(timeIntervalSince1970: 1_714_586_400),
                                takes: [Manifest.Entry(
                                    id: "7f1e2d3c-aaaa-4bbb-8ccc-dddd00000001", name: "Take/1 🎙️", number: 1, file: "001-take-1.flac",
                                    format: AudioFormat(sampleRate: 96_000, channels: 6, sampleFormat: .s24), encoding: "flac", frames: 123_456,
                                    startDate: Date(timeIntervalSince1970: 1_714_586_401.25), state: .complete,
                                    overruns: [OverrunEvent(frame: 10, frames: 5, date: Date(timeIntervalSince1970: 1_714_586_402), cause: "xrun")],
                                    notes: "line\nbreak\ttab", tags: ["ARTIST": "Ünïcode"], clippedSamples: 3,
                                    run: TakeRun(id: "run-1", index: 2, offset: 480, began: .start, ended: .splitTime),
                                    markers: [TakeMarker(frame: 5, label: "here", date: Date(timeIntervalSince1970: 1_714_586_403))],
                                    loudness: Loudness(integrated: -23.456789012345677, range: 4.5, truePeak: -1.25, maxMomentary: nil, maxShortTerm: -20),
                                    began: Date(timeIntervalSince1970: 1_714_586_401.001), pendingFile: nil)])
        let written = try ManifestCodec.encode(manifest)
        let direct = try #require(ManifestCodec.directWire(written), "Tapedeck's own manifest must take the direct path")
        #expect(direct == (try ManifestCodec.foundationWire(written)))
        #expect(try ManifestCodec.decode(written) == manifest)

        // json.dump(manifest, indent=2, sort_keys=True): every non-ASCII character as \uXXXX.
        let object = try JSONSerialization.jsonObject(with: written)
        let python = try pythonJSON(object)
        let fromPython = try #require(ManifestCodec.directWire(Data(python.utf8)), "Python's output must take the direct path")
        #expect(fromPython == (try ManifestCodec.foundationWire(Data(python.utf8))))
        #expect(try ManifestCodec.decode(Data(python.utf8)).takes[0].name == manifest.takes[0].name)
    }

    /// JSON as Python's `json.dumps(indent=2, sort_keys=True)` writes it (ASCII only).
    func pythonJSON(_ value: Any, indent: String = "") throws -> String {
        let inner = indent + "  "
        switch value {
        case let dict as [String: Any]:
            if dict.isEmpty { return "{}" }
            let items = try dict.keys.sorted().map { "\(inner)\(asciiQuote($0)): \(try pythonJSON(dict[$0]!, indent: inner))" }
            return "{\n" + items.joined(separator: ",\n") + "\n\(indent)}"
        case let list as [Any]:
            if list.isEmpty { return "[]" }
            return "[\n" + (try list.map { inner + (try pythonJSON($0, indent: inner)) }).joined(separator: ",\n") + "\n\(indent)]"
        case let text as String:
            return asciiQuote(text)
        case let number as NSNumber:
            return String(cString: number.objCType) == "d" ? "\(number.doubleValue)" : "\(number.int64Value)"
        default:
            return "null"
        }
    }

    func asciiQuote(_ text: String) -> String {
        var out = "\""
        for unit in text.utf16 {
            switch unit {
            case 0x22: out += "\\\""
            case 0x5C: out += "\\\\"
            case 0x0A: out += "\\n"
            case 0x09: out += "\\t"
            case 0x20..<0x7F: out.unicodeScalars.append(Unicode.Scalar(unit)!)
            default: out += String(format: "\\u%04x", unit)
            }
        }
        return out + "\""
    }
}

extension ManifestReaderTests.Generator: RandomNumberGenerator {}
