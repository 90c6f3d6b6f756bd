import Foundation
@testable import TapedeckBundleStorage
import TapedeckCore
import TapedeckTesting
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The library's summaries (`.tapedeck-index/`): lookups read only the manifests they need, and
/// the summaries are a cache that whatever happens to them can make slower, never wrong.
@Suite("Bundle index")
struct BundleIndexTests {
    let helper = BundleStorageTests()

    /// A library of `sessions` sessions with `takes` takes each.
    func library(sessions: Int, takes: Int) throws -> (root: URL, takes: [Take]) {
        let root = try helper.tempDir("index")
        let store = try BundleStorage(rootURL: root)
        var made: [Take] = []
        for s in 0..<sessions {
            let session = try store.createSession(named: "Session \(s)")
            for t in 0..<takes { made.append(try helper.record(store, session, "Take \(t)")) }
        }
        return (root, made)
    }

    func reads(_ store: BundleStorage) -> Int { store.manifestReads.load(ordering: .relaxed) }

    @Test("opening the library, naming a take and starting a recording read one manifest, not every one")
    func lookupsReadOneManifest() throws {
        let (root, takes) = try library(sessions: 6, takes: 3)
        let store = try BundleStorage(rootURL: root)
        #expect(reads(store) == 0, "opening reads summaries, not manifests")
        #expect(try store.interruptedTakes().isEmpty)
        #expect(try store.findSessionForRecording(named: "Session 4")?.name == "Session 4")
        #expect(try store.findSessionForRecording(named: nil)?.name == "Session 5")
        #expect(reads(store) == 0, "the session a recording goes into comes from the summaries")
        let target = takes[10]
        let found = try store.sessions(matching: String(target.id.prefix(8)))
        #expect(found.flatMap(\.takes).contains(target))
        #expect(reads(store) == 1, "a short id reads the one bundle that holds it")
        _ = try store.sessions(matching: "Session 2/Take 1")
        #expect(reads(store) == 2)
        _ = try store.annotateTake(target.id, TakeAnnotations(notes: "found by id"))
        #expect(reads(store) == 3, "a take's bundle is found from the summaries")
        let recording = try store.beginTake(in: target.sessionID, named: nil, format: .cdStereo, encoding: "raw", fileExtension: "raw", startDate: Date())
        try Data(repeating: 1, count: 64).write(to: recording.fileURL)
        _ = try store.finishTake(recording, frames: 16, state: .complete, overruns: [])
        #expect(reads(store) == 6, "a recording reads its own session's manifest, once to begin and twice to finish (\(reads(store)) reads)")
        // And another process sees every change through the summaries this one wrote.
        let other = try BundleStorage(rootURL: root)
        try StorageConformance.checkKeyedReads(other, context: "after changes")
    }

    @Test("a manifest changed behind the store's back (edited in place, replaced, copied in) is read again")
    func changedManifestsAreReadAgain() throws {
        let (root, takes) = try library(sessions: 3, takes: 2)
        let store = try BundleStorage(rootURL: root)
        #expect(try store.findSessionForRecording(named: "Session 1") != nil)
        let bundle = try helper.bundleURL(store, takes[2])
        try helper.editManifest(bundle) { $0["name"] = "Edited by hand" }
        #expect(try store.findSessionForRecording(named: "Session 1") == nil)
        #expect(try store.findSessionForRecording(named: "Edited by hand")?.id == takes[2].sessionID)
        #expect(try store.sessions(matching: "Edited by hand").first?.takes.count == 2)
        // Removed by hand: its takes are no longer found; copied in under another folder name: found there.
        let moved = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-moved-\(UUID().uuidString).tapedeck")
        try FileManager.default.moveItem(at: bundle, to: moved)
        #expect(try store.sessions(matching: String(takes[2].id.prefix(8))).isEmpty)
        #expect(throws: TapedeckError.self) { try store.renameTake(takes[2].id, to: "Gone") }
        try FileManager.default.copyItem(at: moved, to: root.appendingPathComponent("came-back.tapedeck"))
        let back = try store.sessions(matching: String(takes[2].id.prefix(8)))
        #expect(back.first?.takes.map(\.id) == [takes[2].id, takes[3].id])
        #expect(try store.renameTake(takes[2].id, to: "Back again").name == "Back again")
        try StorageConformance.checkKeyedReads(try BundleStorage(rootURL: root), context: "after the copy")
    }

    @Test("damaged, swapped, forged-away or missing summaries, and an index folder that is a link, cost only time")
    func hostileIndex() throws {
        let (root, takes) = try library(sessions: 4, takes: 2)
        let index = root.appendingPathComponent(".tapedeck-index")
        var names = try FileManager.default.contentsOfDirectory(atPath: index.path).sorted()
        #expect(names.count == 4, "one summary per bundle: \(names)")
        // Garbage, a cut summary, two summaries swapped, a link in place of one.
        try Data("not a summary".utf8).write(to: index.appendingPathComponent(names[0]))
        let second = try Data(contentsOf: index.appendingPathComponent(names[1]))
        try second.prefix(second.count / 2).write(to: index.appendingPathComponent(names[1]))
        let third = try Data(contentsOf: index.appendingPathComponent(names[2]))
        try FileManager.default.removeItem(at: index.appendingPathComponent(names[2]))
        try FileManager.default.moveItem(at: index.appendingPathComponent(names[3]), to: index.appendingPathComponent(names[2]))
        try third.write(to: index.appendingPathComponent(names[3]))
        let outside = try helper.tempDir("outside")
        let planted = outside.appendingPathComponent("planted")
        try Data("outside".utf8).write(to: planted)
        try FileManager.default.removeItem(at: index.appendingPathComponent(names[3]))
        try FileManager.default.createSymbolicLink(at: index.appendingPathComponent(names[3]), withDestinationURL: planted)
        var store = try BundleStorage(rootURL: root)
        try StorageConformance.checkKeyedReads(store, context: "damaged summaries")
        #expect(try store.sessions().flatMap(\.takes).map(\.id).sorted() == takes.map(\.id).sorted())
        #expect(try Data(contentsOf: planted) == Data("outside".utf8), "a link is replaced, never written through")

        // The index folder itself a link to a folder outside the library, holding files named as
        // the bundles' summaries would be: never read, written, replaced or removed through.
        try FileManager.default.removeItem(at: index)
        try FileManager.default.createSymbolicLink(at: index, withDestinationURL: outside)
        for name in names { try Data("not Tapedeck's".utf8).write(to: outside.appendingPathComponent(name)) }
        let before = try BundleStorageTests.contents(of: outside)
        store = try BundleStorage(rootURL: root)
        try StorageConformance.checkKeyedReads(store, context: "index folder is a link")
        _ = try helper.record(store, try #require(try store.findSessionForRecording(named: "Session 0")), "More")
        try store.deleteSession(try #require(try store.findSessionForRecording(named: "Session 3")).id)
        #expect(try BundleStorageTests.contents(of: outside) == before, "nothing outside the library changed")
        // Doctor says so (nothing else would: commands only get slower), and its repair moves the link aside.
        let part = try #require(try store.damagedParts().first { $0.path == ".tapedeck-index" })
        #expect(part.canQuarantine && part.problem.contains("Moving it aside"))
        _ = try store.quarantine(part.path)
        #expect(try BundleStorageTests.contents(of: outside) == before, "the link moved, not its target")
        #expect(try store.damagedParts().isEmpty)

        // No index at all (moved aside as above, removed, or a library from before it existed):
        // made again from the manifests.
        #expect(!FileManager.default.fileExists(atPath: index.path))
        store = try BundleStorage(rootURL: root)
        try StorageConformance.checkKeyedReads(store, context: "no index")
        names = try FileManager.default.contentsOfDirectory(atPath: index.path).sorted()
        #expect(names.count == 3, "one summary per bundle left: \(names)")
    }

    @Test("a summary names what its manifest held: read back, refused when cut or changed anywhere")
    func summaryFile() throws {
        let (root, _) = try library(sessions: 1, takes: 3)
        let index = root.appendingPathComponent(".tapedeck-index")
        let name = try #require(try FileManager.default.contentsOfDirectory(atPath: index.path).first)
        let bytes = [UInt8](try Data(contentsOf: index.appendingPathComponent(name)))
        let summary = try #require(BundleSummary.decode(bytes))
        #expect(summary.name == "Session 0")
        #expect(summary.takeIDs.count { $0 == 0x0A } == 3)
        #expect(summary.recordingTakes == 0)
        #expect(summary.encoded() == bytes)
        for i in stride(from: 0, to: bytes.count, by: 7) {
            var changed = bytes
            changed[i] ^= 0x20
            #expect(BundleSummary.decode(changed) == nil, "a change at byte \(i) is noticed")
            #expect(BundleSummary.decode(Array(bytes.prefix(i))) == nil, "a summary cut at \(i) is refused")
        }
    }
}
