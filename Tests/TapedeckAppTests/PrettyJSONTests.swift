import Foundation
import TapedeckApp
import TapedeckCore
import Testing

/// ``PrettyJSON`` against Foundation's `JSONEncoder` set up as `Terminal.json` is (pretty,
/// sorted keys, slashes unescaped, dates as ISO 8601 UTC): random takes and sessions, with
/// strings that need escaping, numbers of every size, every optional present or not.
@Suite("PrettyJSON")
struct PrettyJSONTests {
    static func encoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(date.iso8601UTC)
        }
        return encoder
    }

    static func text(_ rng: inout some RandomNumberGenerator) -> String {
        let pieces = ["a", "Z", "é", "\"", "\\", "/", "\n", "\t", "\u{1}", "\u{1F}", "\u{7F}", "日本", "🎙", " ", "\r", "\u{8}", "\u{C}", "0"]
        return (0..<Int.random(in: 0...8, using: &rng)).map { _ in pieces.randomElement(using: &rng)! }.joined()
    }

    static func number(_ rng: inout some RandomNumberGenerator) -> Double {
        switch Int.random(in: 0...5, using: &rng) {
        case 0: Double(Int.random(in: -1000...1000, using: &rng))
        case 1: Double.random(in: -1...1, using: &rng)
        case 2: Double.random(in: -1e-6...1e-6, using: &rng)
        case 3: Double.random(in: 1e15...1e20, using: &rng)
        case 4: (Double.random(in: -80...10, using: &rng) * 100).rounded() / 100
        default: [0, -0.0, 0.1, 1e-5, 123456789.125, Double.leastNonzeroMagnitude, 1.7976931348623157e308][Int.random(in: 0...6, using: &rng)]
        }
    }

    static func take(_ rng: inout some RandomNumberGenerator, session: Session) -> TakeJSON {
        let format = AudioFormat(sampleRate: [44100, 48000, 96000][Int.random(in: 0...2, using: &rng)], channels: Int.random(in: 1...6, using: &rng),
                                 sampleFormat: [.s16, .s24, .s32, .f32][Int.random(in: 0...3, using: &rng)])
        let date = Date(timeIntervalSince1970: Double.random(in: 0...2e9, using: &rng))
        var tags: [String: String] = [:]
        for _ in 0..<Int.random(in: 0...4, using: &rng) { tags[text(&rng) + ["A", "a", "b", "B", "é"][Int.random(in: 0...4, using: &rng)]] = text(&rng) }
        let overruns = (0..<Int.random(in: 0...2, using: &rng)).map { _ in OverrunEvent(frame: Int64.random(in: 0...1 << 40, using: &rng), frames: 7, date: date, cause: text(&rng)) }
        let markers = (0..<Int.random(in: 0...2, using: &rng)).map { _ in TakeMarker(frame: Int64.random(in: 0...1 << 30, using: &rng), label: text(&rng), date: date) }
        let loudness = Bool.random(using: &rng) ? nil : Loudness(integrated: Bool.random(using: &rng) ? nil : number(&rng), range: number(&rng), truePeak: Bool.random(using: &rng) ? nil : number(&rng),
                                                                  maxMomentary: number(&rng), maxShortTerm: Bool.random(using: &rng) ? nil : number(&rng))
        let run = Bool.random(using: &rng) ? nil : TakeRun(id: text(&rng), index: Int.random(in: 1...9, using: &rng), offset: Bool.random(using: &rng) ? nil : Int64.random(in: 0...1 << 33, using: &rng),
                                                          began: Bool.random(using: &rng) ? nil : .start, ended: Bool.random(using: &rng) ? nil : .splitTime)
        let t = Take(id: UUID().uuidString.lowercased(), sessionID: session.id, name: text(&rng), number: Int.random(in: 1...100000, using: &rng), createdAt: date,
                     state: [.complete, .recovered, .recording][Int.random(in: 0...2, using: &rng)], format: format, encoding: text(&rng), file: text(&rng),
                     frames: Int64.random(in: 0...1 << 36, using: &rng), overruns: overruns, notes: text(&rng), tags: tags, clippedSamples: Int64.random(in: 0...99, using: &rng),
                     run: run, markers: markers, loudness: loudness, began: Bool.random(using: &rng) ? nil : date)
        var json = TakeJSON(t, session: session, file: Bool.random(using: &rng) ? nil : AudioFileInfo(path: "/a/b " + text(&rng), bytes: Bool.random(using: &rng) ? nil : Int64.random(in: 0...1 << 40, using: &rng)))
        if Bool.random(using: &rng) {
            json.broadcast = BroadcastJSON(BroadcastFacts(description: text(&rng), originator: text(&rng), originatorReference: text(&rng), originationDate: "2026-11-30", originationTime: "10:00:00",
                                                          timeReference: UInt64.random(in: 0...UInt64.max, using: &rng), version: 2, codingHistory: text(&rng), ixml: ["B": text(&rng), "a": text(&rng), "é": "x"]))
        }
        return json
    }

    @Test("takes and sessions are written byte for byte as JSONEncoder writes them")
    func sameAsJSONEncoder() throws {
        var rng = SystemRandomNumberGenerator()
        let encoder = Self.encoder()
        for round in 0..<300 {
            let session = Session(id: UUID().uuidString.lowercased(), name: Self.text(&rng), createdAt: Date(timeIntervalSince1970: Double.random(in: 0...2e9, using: &rng)))
            let takes = (0..<Int.random(in: 0...3, using: &rng)).map { _ in Self.take(&rng, session: session) }
            let model = SessionJSON(id: session.id, shortID: session.shortID, name: session.name, createdAt: session.createdAt, takes: takes)
            let expected = String(decoding: try encoder.encode(model), as: UTF8.self)
            let written = PrettyJSON.text { model.write(to: &$0) }
            #expect(written == expected, "round \(round)")
            if written != expected { return }
            for take in takes {
                #expect(PrettyJSON.text { take.write(to: &$0) } == String(decoding: try encoder.encode(take), as: UTF8.self))
            }
        }
    }

    @Test("integers of every size and sign are written as Swift prints them")
    func integers() {
        for v: Int64 in [0, 7, -1, -42, 10, 1_000_000, .max, .min, 123_456_789_012] {
            #expect(PrettyJSON.text { $0.integer(v) } == String(v))
        }
        #expect(PrettyJSON.text { $0.integer(UInt64.max) } == String(UInt64.max))
        #expect(PrettyJSON.text { $0.integer(UInt32.max) } == String(UInt32.max))
    }
}
