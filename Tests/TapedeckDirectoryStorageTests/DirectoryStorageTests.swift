import Foundation
import GRDB
@testable import TapedeckDirectoryStorage
import TapedeckCore
import TapedeckTesting
import Testing

@Suite("Directory storage")
struct DirectoryStorageTests {
    func tempRoot() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-dir-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    @Test("every catalog commit syncs the WAL (synchronous = FULL), so a power loss cannot undo it")
    func catalogSyncsEveryCommit() throws {
        // GRDB's WAL setup leaves NORMAL, which syncs only at checkpoints; found by
        // scripts/reliability-powerloss, which lost a finished take's entry that way.
        let store = try DirectoryStorage(rootURL: try tempRoot().appendingPathComponent("lib"))
        let level = try store.catalog.read { try Int.fetchOne($0, sql: "PRAGMA synchronous") }
        #expect(level == 2)
    }

    @Test("the storage conformance suite passes", arguments: StorageConformance.Area.allCases)
    func conformance(_ area: StorageConformance.Area) throws {
        try StorageConformance.check(area, make: { seam in try DirectoryStorage(rootURL: try tempRoot().appendingPathComponent("lib"), seam: seam) },
                                   reopen: { try DirectoryStorage(rootURL: $0.rootURL) })
    }

    @Test("the in-memory test store passes the same suite", arguments: StorageConformance.Area.allCases)
    func inMemoryConformance(_ area: StorageConformance.Area) throws {
        try StorageConformance.check(area, make: { seam in try InMemoryStorage(seam: seam) },
                                   reopen: { old in
                                       let store = try #require(old as? InMemoryStorage)
                                       return try InMemoryStorage(rootURL: store.rootURL, catalog: store.sharedCatalog)
                                   })
    }

    @Test("the catalog is SQLite in WAL mode and passes its integrity check")
    func catalogFile() throws {
        let root = try tempRoot()
        let store = try DirectoryStorage(rootURL: root)
        _ = try store.createSession(named: nil)
        let db = try DatabaseQueue(path: root.appendingPathComponent("catalog.sqlite").path)
        #expect(try db.read { try String.fetchOne($0, sql: "PRAGMA journal_mode") } == "wal")
        #expect(try db.read { try String.fetchOne($0, sql: "PRAGMA integrity_check") } == "ok")
    }

    @Test("a symbolic link inside the library is never followed out of it")
    func symlinkConfinement() throws {
        let root = try tempRoot()
        let outside = try tempRoot()
        let store = try DirectoryStorage(rootURL: root.appendingPathComponent("lib"))
        let session = try store.createSession(named: "S")
        let pending = try store.beginTake(in: session.id, named: nil, format: .cdStereo, encoding: "raw", fileExtension: "raw", startDate: Date())
        let folder = pending.fileURL.deletingLastPathComponent()
        // Replace the session folder with a link to a folder outside the library.
        try FileManager.default.removeItem(at: folder)
        try FileManager.default.createSymbolicLink(at: folder, withDestinationURL: outside)
        #expect(throws: TapedeckError.self) { _ = try store.finishTake(pending, frames: 0, state: .complete, overruns: []) }
        #expect(try FileManager.default.contentsOfDirectory(atPath: outside.path).isEmpty)
    }

    @Test("a catalog path that leaves the library is refused")
    func confinedPaths() throws {
        let store = try DirectoryStorage(rootURL: try tempRoot())
        for path in ["/etc/passwd", "../x", "sessions/../../x", "a/./b"] {
            #expect(throws: TapedeckError.self) { _ = try store.confined(path) }
        }
        #expect(try store.confined("sessions/a/b.wav").path.hasPrefix(store.rootURL.path))
    }

    @Test("a second process's live recording is not recovered; a dead one's is")
    func liveLocks() throws {
        let root = try tempRoot()
        let writer = try DirectoryStorage(rootURL: root)
        let s = try writer.createSession(named: nil)
        let p = try writer.beginTake(in: s.id, named: nil, format: .cdStereo, encoding: "raw", fileExtension: "raw", startDate: Date())
        try Data(count: 64).write(to: p.fileURL)
        // Another handle on the same library (as another process would have) sees the take as live.
        // flock locks belong to open file descriptions, so a second open in this process models that.
        let other = try DirectoryStorage(rootURL: root)
        #expect(try other.interruptedTakes().isEmpty)
        _ = try writer.finishTake(p, frames: 16, state: .complete, overruns: [])
        #expect(try other.sessions()[0].takes[0].state == .complete)
        #expect(try FileManager.default.contentsOfDirectory(atPath: p.fileURL.deletingLastPathComponent().path).filter { $0.hasSuffix(".lock") }.isEmpty)
    }

    @Test("doctor's check for unnamed files waits for a delete between its row and its audio, then finds nothing")
    func unnamedFilesDuringDelete() throws {
        let root = try tempRoot()
        let outcome = try ConcurrentMaintenanceCheck.unnamedFilesDuringDelete(
            make: { seam in try DirectoryStorage(rootURL: root, seam: seam) }, other: { try DirectoryStorage(rootURL: root) }, committedStep: "catalog committed")
        #expect(outcome.whileDeleting == nil, "reported while the delete ran: \(outcome.whileDeleting ?? [])")
        #expect(outcome.finally.isEmpty, "\(outcome.finally)")
    }

    @Test("names are validated: control characters and empty names are refused, long names are kept")
    func names() throws {
        #expect(throws: TapedeckError.self) { try NameRules.validate("a\u{0}b", what: "take") }
        #expect(throws: TapedeckError.self) { try NameRules.validate(String(repeating: "x", count: 1025), what: "take") }
        #expect(try NameRules.validate(String(repeating: "ü", count: 150), what: "take").utf8.count == 300)
        #expect(NameRules.slug("../../etc/passwd", fallback: "t") == "etc-passwd")
        #expect(NameRules.slug("🎙️", fallback: "take") == "take")
        #expect(NameRules.slug("-rf", fallback: "t") == "rf")
    }
}

@Suite("Directory storage review regressions")
struct DirectoryStorageRegressionTests {
    func tempRoot() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-reg-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    @Test("finishing a take whose audio is missing commits nothing")
    func finishWithoutAudio() throws {
        let store = try DirectoryStorage(rootURL: try tempRoot())
        let s = try store.createSession(named: nil)
        let p = try store.beginTake(in: s.id, named: nil, format: .cdStereo, encoding: "raw", fileExtension: "raw", startDate: Date())
        #expect(throws: TapedeckError.self) { _ = try store.finishTake(p, frames: 10, state: .complete, overruns: []) }
        #expect(try store.sessions()[0].takes[0].state == .recording)
    }

    @Test("a recording whose process died can be deleted; a live one cannot")
    func deleteDeadRecording() throws {
        let root = try tempRoot()
        var writer: DirectoryStorage? = try DirectoryStorage(rootURL: root)
        let s = try writer!.createSession(named: nil)
        let p = try writer!.beginTake(in: s.id, named: nil, format: .cdStereo, encoding: "raw", fileExtension: "raw", startDate: Date())
        try Data(count: 64).write(to: p.fileURL)
        let other = try DirectoryStorage(rootURL: root)
        #expect(throws: TapedeckError.self) { try other.deleteTake(p.take.id) }
        writer = nil
        try other.deleteTake(p.take.id)
        #expect(try other.sessions()[0].takes.isEmpty)
        let left = try FileManager.default.contentsOfDirectory(atPath: p.fileURL.deletingLastPathComponent().path)
        #expect(left.isEmpty, "pending audio and lock removed: \(left)")
    }

    @Test("recovery never touches a take that finished meanwhile, and only the claiming process may complete it")
    func recoveryClaims() throws {
        let root = try tempRoot()
        let a = try DirectoryStorage(rootURL: root)
        let s = try a.createSession(named: nil)
        let p = try a.beginTake(in: s.id, named: nil, format: .cdStereo, encoding: "raw", fileExtension: "raw", startDate: Date())
        try Data(count: 64).write(to: p.fileURL)
        _ = try a.finishTake(p, frames: 16, state: .complete, overruns: [])
        let b = try DirectoryStorage(rootURL: root)
        #expect(try b.interruptedTakes().isEmpty)
        #expect(throws: TapedeckError.self) {
            _ = try b.completeRecovery(of: p.take, repaired: RepairResult(frames: 1, format: .cdStereo, headerRepaired: true))
        }
        #expect(try b.sessions()[0].takes[0].state == .complete)
    }
}

@Suite("Directory storage keyed reads")
struct DirectoryStorageKeyedReadTests {
    /// A library of `sessions` sessions of `takes` takes each, written straight into the catalog.
    static func library(sessions: Int, takes: Int) throws -> DirectoryStorage {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-keyed-\(UUID().uuidString)")
        let store = try DirectoryStorage(rootURL: root)
        try store.catalog.write { db in
            for s in 1...sessions {
                let sid = UUID().uuidString.lowercased()
                try db.execute(sql: "INSERT INTO session (id, name, createdAt, folder) VALUES (?, ?, ?, ?)",
                               arguments: [sid, "Session \(s)", Double(s), "sessions/session-\(s)"])
                for t in 1...takes {
                    try db.execute(sql: """
                        INSERT INTO take (id, sessionId, name, number, createdAt, state, sampleRate, channels, sampleFormat,
                                          encoding, file, frames)
                        VALUES (?, ?, ?, ?, ?, 'complete', 48000, 2, 's16', 'wav', ?, 48000)
                        """, arguments: [UUID().uuidString.lowercased(), sid, "Take \(t)", t, Double(s * 1000 + t), "sessions/session-\(s)/\(t).wav"])
                }
            }
        }
        return store
    }

    @Test("finding what a reference names runs the same few statements in a library of 10 or 4 000 takes")
    func boundedStatements() throws {
        var counts: [[Int]] = []
        for size in [5, 200] {
            let store = try Self.library(sessions: size, takes: 20)
            let middle = try #require(try store.sessions(matching: "Session 3").first?.takes[7])
            var these: [Int] = []
            for reference in ["Session 3/Take 8", middle.shortID, middle.id, "last", "Session 4"] {
                let before = store.catalogStatements
                let found = try store.sessions(matching: reference)
                these.append(store.catalogStatements - before)
                #expect(found.count == 1, "\(reference) in \(size) sessions: \(found.map(\.name))")
                #expect(found.first?.takes.count == 20)
            }
            #expect(these.allSatisfy { $0 <= 12 }, "\(these)")  // the queries, and the read transaction's own
            counts.append(these)
            // Listing reads one session at a time: one statement for the sessions, one per session.
            let before = store.catalogStatements
            var seen = 0
            try store.forEachSession { _ in seen += 1 }
            #expect(seen == size)
            #expect(store.catalogStatements - before <= size + 6)
        }
        #expect(counts[0] == counts[1], "the same statements whatever the size: \(counts)")
    }
}
