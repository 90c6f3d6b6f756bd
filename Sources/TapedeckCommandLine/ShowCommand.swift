import ArgumentParser
import Foundation
import TapedeckApp
import TapedeckCore
import TapedeckProvenance

struct ShowCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "show",
        abstract: "Show one take (SESSION/TAKE or id) or session in detail.",
        usage: "tapedeck show [<options>] <reference>")

    @Argument(help: "SESSION/TAKE, SESSION, a short id from `tapedeck list`, or `last`.", completion: TakeCompletion.kind(.both))
    var reference: String

    @Flag(help: "Print JSON.")
    var json = false

    @OptionGroup var global: GlobalOptions

    @MainActor
    mutating func run() async throws {
        try await reportingErrors {
            let studio = try await global.makeStudio()
            let storage = studio.store.storage
            switch try studio.store.resolve(reference) {
            case .take(let take, let session):
                var t = TakeJSON(take, session: session, url: try? storage.audioURL(for: take))
                let facts = (try? storage.audioURL(for: take)).flatMap { url in
                    studio.decoders.first { $0.encodings.contains(take.encoding) }?.broadcastFacts(at: url)
                }
                t.broadcast = facts.map(BroadcastJSON.init)
                if json { return try Terminal.printJSON(t) }
                print("""
                    Take:      \(t.name)  [\(t.shortID)]  (number \(t.number))
                    Session:   \(t.session)
                    State:     \(t.state)
                    Duration:  \(Terminal.clock(t.seconds))  (\(t.frames) frames)
                    Format:    \(t.format.sampleRate) Hz, \(t.format.channels) ch, \(t.format.sampleFormat), \(t.encoding)
                    Channels:  \(take.format.layout)
                    File:      \(t.path)  (\(t.bytes.map(Terminal.bytes) ?? "missing"))
                    Recorded:  \(Terminal.date(t.createdAt)) \(LocalTimeOfDay(t.createdAt).utcOffset)
                    Overruns:  \(t.overruns)\(t.overruns > 0 ? " (\(t.overrunFrames) frames of silence)" : "")
                    Clipped:   \(t.clippedSamples == 0 ? "no" : Terminal.counted(Int(t.clippedSamples), "sample") + " at full scale")
                    """)
                if let run = take.run {
                    // "Run:  2 of run a69d20c3, from 0:05.076 (split-size) to the end (duration)"
                    let from = run.offset.map { " from \(Terminal.clock(take.format.seconds(forFrames: $0)))" } ?? ""
                    let why = [run.began.map { "began: \($0.rawValue)" }, run.ended.map { "ended: \($0.rawValue)" }].compactMap { $0 }
                    print("Run:       take \(run.index) of run \(NameRules.shortID(of: run.id))\(from)\(why.isEmpty ? "" : " (" + why.joined(separator: ", ") + ")")")
                }
                if let began = take.began {
                    // Here in this machine's time zone; the file's TimeReference is in the
                    // recording machine's (the Broadcast line).
                    print("Began:     \(Terminal.preciseDate(began)) (the first frame)")
                }
                if let l = take.loudness {
                    print("Loudness:  \(Terminal.loudness(l, seconds: take.seconds))")
                } else if take.state != .recording {
                    print("Loudness:  not measured (run `tapedeck loudness \(t.shortID)`)")
                }
                if let url = try? storage.audioURL(for: take), let chain = ProvenanceChain.header(beside: url) {
                    print("Signed:    by \(chain.fingerprint) (tapedeck verify \(t.shortID))")
                } else if let signer = take.tags[TakeCompanions.signedTag], take.frames > 0 {
                    print("Signed:    by \(signer), but its chain is missing (tapedeck verify \(t.shortID))")
                }
                if let f = facts {
                    // What the file says of itself (an imported file's own, or Tapedeck's).
                    // To the millisecond, rounded as a whole (samples 14:59:59.9998 read 15:00:00.000).
                    let ms = Int((Double(f.timeReference) * 1000 / Double(max(1, take.format.sampleRate))).rounded())
                    let clock = "\(zeroPadded(ms / 3_600_000, width: 2)):\(zeroPadded(ms / 60_000 % 60, width: 2)):\(zeroPadded(ms / 1000 % 60, width: 2)).\(zeroPadded(ms % 1000, width: 3))"
                    print("Broadcast: \(Terminal.safe(f.originator.isEmpty ? "(no originator)" : f.originator)), \(Terminal.safe(f.originationDate)) \(Terminal.safe(f.originationTime)), TimeReference \(f.timeReference) (\(clock))")
                    let description = f.description.split(whereSeparator: \.isNewline).map { Terminal.safe(String($0)) }.joined(separator: "; ")
                    if !description.isEmpty { print("           \(description)") }
                    let keys = ["PROJECT", "SCENE", "TAKE", "TAPE", "NOTE"].filter { f.ixml[$0] != nil }
                    if !keys.isEmpty { print("iXML:      " + keys.map { "\($0)=\(Terminal.safe(f.ixml[$0] ?? ""))" }.joined(separator: ", ")) }
                }
                if !t.tags.isEmpty {
                    print("Tags:      " + t.tags.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ", "))
                }
                if !t.notes.isEmpty {
                    print("Notes:     " + t.notes.split(separator: "\n", omittingEmptySubsequences: false).joined(separator: "\n           "))
                }
                for (i, m) in take.markers.enumerated() {
                    print("\(i == 0 ? "Markers:   " : "           ")\(Terminal.clock(take.format.seconds(forFrames: m.frame)))\(m.label.isEmpty ? "" : "  " + Terminal.safe(m.label))")
                }
                for e in take.overruns {
                    print("  at \(Terminal.clock(take.format.seconds(forFrames: e.frame))): \(e.frames) frames (\(e.cause))")
                }
            case .session(let s):
                let model = SessionJSON(id: s.id, shortID: s.shortID, name: s.name, createdAt: s.createdAt,
                                        takes: s.takes.map { TakeJSON($0, session: s, url: try? storage.audioURL(for: $0)) })
                if json { return try Terminal.printJSON(model) }
                let total = s.takes.reduce(0.0) { $0 + $1.seconds }
                print("Session:   \(s.name)  [\(s.shortID)]\nCreated:   \(Terminal.date(s.createdAt))\nTakes:     \(s.takes.count), \(Terminal.clock(total)) in all")
                for t in model.takes { print("  \(t.shortID)  \(t.name)  \(Terminal.clock(t.seconds))  \(t.state)") }
            }
        }
    }
}
