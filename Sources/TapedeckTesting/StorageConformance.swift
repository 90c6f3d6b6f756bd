public import TapedeckCore
public import Foundation
import Testing

/// The contract every ``TakeStorage`` keeps, as one suite every store's tests run.
public enum StorageConformance {
    /// Runs every check against fresh stores made by `make`.
    ///
    /// - Parameters:
    ///   - make: a new, empty store.
    ///   - reopen: a new instance over the same library as the given (dropped) store, for the
    ///     crash-recovery checks; `nil` for stores that do not outlive their process.
    /// - Thread: any; blocks on disk I/O.
    public static func run(make: () throws -> any TakeStorage, reopen: ((URL) throws -> any TakeStorage)?) throws {
        try defaultNamesAndOrder(try make())
        try finishAndDelete(try make())
        try hostileNames(try make())
        try renames(try make())
        if let reopen {
            try recovery(make: make, reopen: reopen)
        }
    }

    /// Writes `bytes` to a pending take's file, as an encoder would.
    static func writeAudio(_ pending: PendingTake, bytes: Int = 4096) throws {
        try Data(repeating: 7, count: bytes).write(to: pending.fileURL)
    }

    static func begin(_ store: any TakeStorage, _ session: Session, _ name: String? = nil) throws -> PendingTake {
        try store.beginTake(in: session.id, named: name, format: .cdStereo, encoding: "raw", fileExtension: "raw", startDate: Date())
    }

    static func defaultNamesAndOrder(_ store: any TakeStorage) throws {
        #expect(try store.sessions().isEmpty)
        let s1 = try store.createSession(named: nil)
        let s2 = try store.createSession(named: nil)
        #expect(s1.name == "Session 1")
        #expect(s2.name == "Session 2")
        #expect(throws: TapedeckError.self) { try store.createSession(named: "Session 1") }
        let a = try begin(store, s1)
        #expect(a.take.state == .recording)
        #expect(a.take.name == "Take 1" && a.take.number == 1)
        #expect(a.fileURL.path.hasPrefix(store.rootURL.path))
        // The row is committed before any audio exists.
        #expect(try store.sessions()[0].takes.map(\.state) == [.recording])
        try writeAudio(a)
        _ = try store.finishTake(a, frames: 1024, state: .complete, overruns: [])
        let b = try begin(store, s1)
        #expect(b.take.name == "Take 2" && b.take.number == 2)
        try writeAudio(b)
        _ = try store.finishTake(b, frames: 1024, state: .complete, overruns: [])
        let listed = try store.sessions()
        #expect(listed.map(\.name) == ["Session 1", "Session 2"])
        #expect(listed[0].takes.map(\.name) == ["Take 1", "Take 2"])
        #expect(throws: TapedeckError.self) { try begin(store, s1, "Take 1") }
    }

    static func finishAndDelete(_ store: any TakeStorage) throws {
        let s = try store.createSession(named: "Rehearsal")
        let p = try begin(store, s, "Intro")
        try writeAudio(p, bytes: 8192)
        let overrun = OverrunEvent(frame: 10, frames: 5, date: Date(timeIntervalSince1970: 1_700_000_000), cause: "buffer")
        let done = try store.finishTake(p, frames: 2048, state: .complete, overruns: [overrun])
        #expect(done.state == .complete && done.frames == 2048)
        let url = try store.audioURL(for: done)
        #expect(FileManager.default.fileExists(atPath: url.path))
        #expect(!FileManager.default.fileExists(atPath: p.fileURL.path), "the pending file must be moved into place")
        let listed = try #require(try store.sessions().first?.takes.first)
        #expect(listed.overruns == [overrun])
        #expect(listed.frames == 2048)
        try store.deleteTake(done.id)
        #expect(try store.sessions()[0].takes.isEmpty)
        #expect(!FileManager.default.fileExists(atPath: url.path))
        #expect(throws: TapedeckError.self) { try store.deleteTake(done.id) }

        let q = try begin(store, s)
        try writeAudio(q)
        let t = try store.finishTake(q, frames: 1, state: .complete, overruns: [])
        let tURL = try store.audioURL(for: t)
        try store.deleteSession(s.id)
        #expect(try store.sessions().isEmpty)
        #expect(!FileManager.default.fileExists(atPath: tURL.path))
    }

    /// Names are display names: anything printable is kept as typed, and files stay in the library.
    static func hostileNames(_ store: any TakeStorage) throws {
        let names = ["a/b", "../../../../tmp/escape", "..", ".hidden", "-rf", "名前 🎙️", String(repeating: "é", count: 150),
                     "Caf\u{E9}", "CASE", "case"]
        let s = try store.createSession(named: "../../outside")
        for name in names {
            let p = try begin(store, s, name)
            #expect(p.fileURL.standardizedFileURL.path.hasPrefix(store.rootURL.standardizedFileURL.path + "/"))
            try writeAudio(p)
            let t = try store.finishTake(p, frames: 1, state: .complete, overruns: [])
            let url = try store.audioURL(for: t).standardizedFileURL
            #expect(url.path.hasPrefix(store.rootURL.standardizedFileURL.path + "/"), "\(name) led to \(url.path)")
            #expect(!url.pathComponents.contains(".."))
        }
        #expect(try store.sessions()[0].takes.map(\.name) == names)
        // NFC and NFD spellings of one name are the same name (they look identical); case differs.
        #expect(throws: TapedeckError.self, "an NFD spelling of an existing NFC name is the same name") {
            try begin(store, s, "Cafe\u{301}")
        }
        let other = try store.sessions()[0].takes.first { $0.name == "CASE" }!
        #expect(throws: TapedeckError.self) { try store.renameTake(other.id, to: "Cafe\u{301}") }
        for bad in ["", "   ", "nul\u{0}byte", "new\nline"] {
            #expect(throws: TapedeckError.self, "\(bad.debugDescription) must be refused") { try begin(store, s, bad) }
        }
    }

    static func renames(_ store: any TakeStorage) throws {
        let s = try store.createSession(named: "One")
        _ = try store.createSession(named: "Two")
        let p = try begin(store, s)
        try writeAudio(p)
        let t = try store.finishTake(p, frames: 1, state: .complete, overruns: [])
        let url = try store.audioURL(for: t)
        #expect(try store.renameSession(s.id, to: "Uno / ..").name == "Uno / ..")
        #expect(throws: TapedeckError.self) { try store.renameSession(s.id, to: "Two") }
        #expect(try store.renameTake(t.id, to: "Best take").name == "Best take")
        let listed = try store.sessions()
        #expect(listed.first { $0.id == s.id }?.takes.first?.name == "Best take")
        #expect(try store.audioURL(for: listed.first { $0.id == s.id }!.takes[0]) == url, "renaming never moves audio")
        #expect(throws: TapedeckError.self) { try store.renameTake("no-such-id", to: "x") }
    }

    static func recovery(make: () throws -> any TakeStorage, reopen: (URL) throws -> any TakeStorage) throws {
        var store: (any TakeStorage)? = try make()
        let root = store!.rootURL
        let s = try store!.createSession(named: nil)
        let withAudio = try begin(store!, s)
        try writeAudio(withAudio, bytes: 1000)
        let withoutAudio = try begin(store!, s)
        // A live recording is never reported as interrupted.
        #expect(try store!.interruptedTakes().isEmpty)
        store = nil // the process "dies": its locks are released

        let reopened = try reopen(root)
        let interrupted = try reopened.interruptedTakes()
        #expect(Set(interrupted.map(\.take.id)) == [withAudio.take.id, withoutAudio.take.id])
        let a = try #require(interrupted.first { $0.take.id == withAudio.take.id })
        #expect(a.fileURL != nil)
        #expect(interrupted.first { $0.take.id == withoutAudio.take.id }?.fileURL == nil)
        let recovered = try reopened.completeRecovery(of: a.take, repaired: RepairResult(frames: 250, format: .cdStereo, headerRepaired: true))
        #expect(recovered?.state == .recovered && recovered?.frames == 250)
        #expect(try reopened.completeRecovery(of: withoutAudio.take, repaired: nil) == nil)
        let takes = try reopened.sessions()[0].takes
        #expect(takes.map(\.id) == [withAudio.take.id])
        #expect(FileManager.default.fileExists(atPath: try reopened.audioURL(for: takes[0]).path))
        #expect(try reopened.interruptedTakes().isEmpty)
    }
}
