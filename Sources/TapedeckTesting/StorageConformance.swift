public import TapedeckCore
import Foundation
import Testing

/// The contract every `TakeStorage` keeps, as one suite every store's tests run, one test per
/// ``Area``: `@Test(arguments: StorageConformance.Area.allCases) func conformance(_ area:)`
/// calling ``check(_:make:reopen:)``. Every member runs on any thread and blocks on disk I/O.
public enum StorageConformance {
    /// One part of the contract, reported as its own test.
    public enum Area: String, CaseIterable, Sendable {
        /// "Session N"/"Take N" names, numbering and listing order.
        case defaultNames
        /// Which session a recording without `--session` goes into.
        case sessionForRecording
        /// Finishing a take commits it; deleting removes entry and audio.
        case finishAndDelete
        /// Any printable name is kept as typed; files stay in the library.
        case hostileNames
        case renames
        /// A take left recording by a dead process is found and recovered.
        case recovery
        /// A crash after any step leaves the before- or after-state.
        case crashPoints
        /// A failed write, sync, rename or unlink is reported and loses nothing.
        case ioErrors
        /// Annotations (notes, tags, clip count, the run a take belongs to) are kept, while the
        /// take records and after, across a reopen and through every read.
        case annotations
        /// Facts stored part by part (`TakeStorage.annotateTake(_:keepingValid:)`): a part
        /// that breaks its limit (1,200 markers, a loudness out of range) is left out and named;
        /// the loudness, first frame's time, run and the rest are kept.
        case annotationsKeepingValid
    }

    /// Checks one area against fresh stores made by `make`.
    ///
    /// - Parameters:
    ///   - area: the part of the contract to check.
    ///   - make: a new, empty store whose file-system mutations and durable steps go through the
    ///     given seam.
    ///   - reopen: a new instance (no faults) over the same library as the given store, which the
    ///     caller has dropped — as a process that died would have — for the recovery checks.
    public static func check(_ area: Area, make: (any StorageSeam) throws -> any TakeStorage,
                             reopen: (any TakeStorage) throws -> any TakeStorage) throws {
        switch area {
        case .defaultNames: try defaultNamesAndOrder(try make(.none))
        case .sessionForRecording: try sessionForRecording(try make(.none))
        case .finishAndDelete: try finishAndDelete(try make(.none))
        case .hostileNames: try hostileNames(try make(.none))
        case .renames: try renames(try make(.none))
        case .recovery: try recovery(make: { try make(.none) }, reopen: reopen)
        case .crashPoints: try crashPoints(make: make, reopen: reopen)
        case .ioErrors: try ioErrors(make: make, reopen: reopen)
        case .annotations: try annotations(make: { try make(.none) }, reopen: reopen)
        case .annotationsKeepingValid: try annotationsKeepingValid(make: { try make(.none) }, reopen: reopen)
        }
    }

    /// Checks every area in turn (one test for the whole contract).
    public static func run(make: (any StorageSeam) throws -> any TakeStorage,
                           reopen: (any TakeStorage) throws -> any TakeStorage) throws {
        for area in Area.allCases { try check(area, make: make, reopen: reopen) }
    }

    /// Writes `bytes` to a pending take's file, as an encoder would.
    static func writeAudio(_ pending: PendingTake, bytes: Int = 4096) throws {
        try Data(repeating: 7, count: bytes).write(to: pending.fileURL)
    }

    static func begin(_ store: any TakeStorage, _ session: Session, _ name: String? = nil) throws -> PendingTake {
        try store.beginTake(in: session.id, named: name, format: .cdStereo, encoding: "raw", fileExtension: "raw", startDate: Date())
    }

    static func annotations(make: () throws -> any TakeStorage, reopen: (any TakeStorage) throws -> any TakeStorage) throws {
        var store = try make()
        let s = try store.createSession(named: "Logger")
        let run = "0d9f5a52-8c4e-4b5e-9d0b-3f1c2a7e6b10"
        // A run's first take, linked while it records, then ended at a split.
        let first = try begin(store, s)
        let linked = try store.annotateTake(first.take.id, TakeAnnotations(run: TakeRun(id: run, index: 1, offset: 0, began: .start)))
        #expect(linked.run == TakeRun(id: run, index: 1, offset: 0, began: .start))
        try writeAudio(first)
        var done = try store.finishTake(first, frames: 1024, state: .complete, overruns: [])
        #expect(done.run == linked.run, "finishing keeps the run")
        var notes = done.annotations
        notes.run?.ended = .splitTime
        notes.notes = "hourly"
        notes.tags = ["MIC": "A"]
        notes.clippedSamples = 3
        notes.markers = [TakeMarker(frame: 0, label: "top", date: Date(timeIntervalSince1970: 1_764_000_000)),
                         TakeMarker(frame: 1000, label: "", date: Date(timeIntervalSince1970: 1_764_000_001))]
        // Loudness, with a value silence leaves unknown.
        notes.loudness = Loudness(integrated: -23.25, range: 4.5, truePeak: -1.125, maxMomentary: -18.5, maxShortTerm: nil)
        notes.began = Date(timeIntervalSince1970: 1_764_000_000.125)
        done = try store.annotateTake(done.id, notes)
        // The next take, prepared ahead of its boundary: its offset and start not known yet.
        let second = try begin(store, s)
        _ = try store.annotateTake(second.take.id, TakeAnnotations(run: TakeRun(id: run, index: 2)))
        try writeAudio(second)
        _ = try store.finishTake(second, frames: 512, state: .complete, overruns: [])
        // A third take on its own has no run.
        let alone = try begin(store, s)
        try writeAudio(alone)
        _ = try store.finishTake(alone, frames: 256, state: .complete, overruns: [])
        for pass in ["this instance", "after a reopen"] {
            let takes = try #require(try store.sessions().first { $0.id == s.id }).takes
            #expect(takes.count == 3, "\(pass)")
            #expect(takes.first { $0.id == first.take.id }?.annotations == notes, "\(pass)")
            #expect(takes.first { $0.id == second.take.id }?.run == TakeRun(id: run, index: 2), "\(pass)")
            #expect(takes.first { $0.id == alone.take.id }?.run == nil, "\(pass)")
            let matched = try store.sessions(matching: s.name).first?.takes.first { $0.id == first.take.id }
            #expect(matched?.run?.ended == .splitTime, "\(pass): keyed reads carry the run")
            // Notes changed later keep the run.
            var later = try #require(takes.first { $0.id == first.take.id }).annotations
            later.notes = "hourly, \(pass)"
            #expect(try store.annotateTake(first.take.id, later).run == notes.run, "\(pass)")
            notes = later
            store = try reopen(store)
        }
        #expect(throws: TapedeckError.self, "a run index starts at 1") {
            try store.annotateTake(first.take.id, TakeAnnotations(run: TakeRun(id: run, index: 0)))
        }
    }

    static func annotationsKeepingValid(make: () throws -> any TakeStorage, reopen: (any TakeStorage) throws -> any TakeStorage) throws {
        var store = try make()
        let s = try store.createSession(named: "Flood")
        let pending = try begin(store, s)
        try writeAudio(pending)
        let done = try store.finishTake(pending, frames: 1024, state: .complete, overruns: [])
        // What a recording learnt, with 1,200 markers: 201 past the limit.
        var facts = done.annotations
        facts.markers = (0..<1200).map { TakeMarker(frame: Int64($0 / 2), label: "m\($0)", date: Date(timeIntervalSince1970: 1_764_000_000)) }
        facts.loudness = Loudness(integrated: -20.5, range: 3.5, truePeak: -1.5, maxMomentary: -15.25, maxShortTerm: -17.75)
        facts.began = Date(timeIntervalSince1970: 1_764_000_000.125)
        facts.run = TakeRun(id: "0d9f5a52-8c4e-4b5e-9d0b-3f1c2a7e6b10", index: 1, offset: 0, began: .start, ended: .stopped)
        facts.clippedSamples = 7
        #expect(throws: TapedeckError.self, "annotateTake(_:_:) stays all or nothing") { try store.annotateTake(done.id, facts) }
        let (stored, leftOut) = try store.annotateTake(done.id, keepingValid: facts)
        #expect(leftOut == ["201 markers past the 999 a take keeps"])
        #expect(stored.markers.count == TakeMarker.maxCount)
        for pass in ["this instance", "after a reopen"] {
            let take = try #require(try store.sessions().first { $0.id == s.id }?.takes.first { $0.id == done.id }, "\(pass)")
            #expect(take.markers == Array(facts.markers.prefix(TakeMarker.maxCount)), "\(pass): the first 999 markers")
            #expect(take.loudness == facts.loudness, "\(pass)")
            #expect(take.began == facts.began, "\(pass)")
            #expect(take.run == facts.run, "\(pass)")
            #expect(take.clippedSamples == 7, "\(pass)")
            store = try reopen(store)
        }
        // Another part out of range is left out the same way; the markers come through.
        var later = facts
        later.markers = Array(facts.markers.prefix(3))
        // (Set past the initializer, which reads such values as nil: what a damaged caller could hand over.)
        var outOfRange = Loudness(integrated: -20, range: 3.5, truePeak: nil, maxMomentary: nil, maxShortTerm: nil)
        outOfRange.integrated = 900
        later.loudness = outOfRange
        let (again, leftOutAgain) = try store.annotateTake(done.id, keepingValid: later)
        #expect(leftOutAgain == ["the loudness (out of range)"])
        #expect(again.loudness == nil && again.markers.count == 3 && again.began == facts.began && again.run == facts.run)
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

    /// ``TakeStorage/findSessionForRecording(named:)`` picks what ``TakeStorage/sessions()`` says
    /// it should: the named session, or the one with the newest take (or creation), the oldest of
    /// equals; without takes; `nil` when there is none.
    static func sessionForRecording(_ store: any TakeStorage) throws {
        #expect(try store.findSessionForRecording(named: nil) == nil)
        #expect(try store.findSessionForRecording(named: "Session 1") == nil)
        let s1 = try store.createSession(named: nil)
        let s2 = try store.createSession(named: "Gig")
        let s3 = try store.createSession(named: nil)
        // Sessions created in the same instant: the oldest listed wins; otherwise the newest.
        let newest = try store.sessions().max { $0.createdAt < $1.createdAt }!
        let newestFirst = try store.sessions().first { $0.createdAt == newest.createdAt }!
        #expect(try store.findSessionForRecording(named: nil)?.id == newestFirst.id)
        let now = Date()
        func record(_ session: Session, at date: Date) throws {
            let pending = try store.beginTake(in: session.id, named: nil, format: .cdStereo, encoding: "raw",
                                              fileExtension: "raw", startDate: date)
            try writeAudio(pending)
            _ = try store.finishTake(pending, frames: 1024, state: .complete, overruns: [])
        }
        try record(s2, at: now.addingTimeInterval(60))
        try record(s1, at: now.addingTimeInterval(30))
        let found = try store.findSessionForRecording(named: nil)
        #expect(found?.id == s2.id, "the session with the newest take, not the newest session")
        #expect(found?.name == "Gig" && found?.takes.isEmpty == true)
        try record(s1, at: now.addingTimeInterval(90))
        #expect(try store.findSessionForRecording(named: nil)?.id == s1.id)
        #expect(try store.findSessionForRecording(named: "Gig")?.id == s2.id)
        #expect(try store.findSessionForRecording(named: s3.name)?.id == s3.id)
        #expect(try store.findSessionForRecording(named: "gig") == nil, "names match exactly")
        let cafe = try store.createSession(named: "Caf\u{E9}")
        #expect(try store.findSessionForRecording(named: "Cafe\u{301}")?.id == cafe.id, "NFC and NFD spellings are one name")
        _ = try store.renameSession(s2.id, to: "Gig, second night")
        #expect(try store.findSessionForRecording(named: "Gig") == nil)
        #expect(try store.findSessionForRecording(named: "Gig, second night")?.id == s2.id)
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
        let names = ["a/b", "../../../../tmp/escape", "..", ".hidden", "-rf", "--help", "名前 🎙️", String(repeating: "é", count: 150),
                     String(repeating: "x", count: 300), "Caf\u{E9}", "CASE", "case", "/etc/passwd", "x\\y"]
        for (i, name) in ["../../outside", "/", ".", ".tapedeck", "-n", String(repeating: "s", count: 300)].enumerated() {
            let session = try store.createSession(named: name)
            #expect(session.name == name, "session name \(i) kept as typed")
        }
        _ = try store.createSession(named: "Cafe\u{301}!")
        #expect(throws: TapedeckError.self, "an NFC spelling of an existing NFD session name is the same name") {
            try store.createSession(named: "Caf\u{E9}!")
        }
        let s = try #require(try store.sessions().first { $0.name == "../../outside" })
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

    static func recovery(make: () throws -> any TakeStorage, reopen: (any TakeStorage) throws -> any TakeStorage) throws {
        var store: (any TakeStorage)? = try make()
        let s = try store!.createSession(named: nil)
        let withAudio = try begin(store!, s)
        try writeAudio(withAudio, bytes: 1000)
        let withoutAudio = try begin(store!, s)
        // A live recording is never reported as interrupted.
        #expect(try store!.interruptedTakes().isEmpty)
        let reopened = try dropAndReopen(&store, reopen)
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

    /// Drops the only reference to `store` (its locks go, as a dead process's would) and opens
    /// the library again.
    static func dropAndReopen(_ store: inout (any TakeStorage)?, _ reopen: (any TakeStorage) throws -> any TakeStorage) throws -> any TakeStorage {
        // `reopen` needs the old instance to find the library (and the in-memory catalog); it must
        // not keep it. Locks are released when the old instance is deinitialized.
        let old = store!
        store = nil
        return try reopen(old)
    }

    // MARK: crash points and I/O errors

    /// What a library holds, by name: session name → take name → audio bytes (nil: no audio).
    typealias Snapshot = [String: [String: Data?]]

    static func snapshot(_ store: any TakeStorage) throws -> Snapshot {
        var out: Snapshot = [:]
        for session in try store.sessions() {
            var takes: [String: Data?] = [:]
            for take in session.takes {
                takes[take.name] = try? Data(contentsOf: try store.audioURL(for: take))
            }
            out[session.name] = takes
        }
        return out
    }

    /// Recovers every interrupted take the way the recorder does (a file with audio is kept as
    /// it is; no file means no take), then checks that no entry lacks its audio.
    static func recoverAll(_ store: any TakeStorage, context: String) throws {
        // No recorder is alive here, so every take in `recording` was interrupted. Its lock can
        // still look held for a moment: a child process that another test of this process is
        // starting holds copies of this process's descriptors (the dropped store's lock files
        // among them) from its fork until its exec. So a take still `recording` is looked at
        // again, for up to a second, before the checks below count it as never recovered.
        for attempt in 1...50 {
            try recoverUnlocked(store)
            guard attempt < 50, try store.sessions().contains(where: { $0.takes.contains { $0.state == .recording } }) else { break }
            usleep(20_000)
        }
        #expect(try store.interruptedTakes().isEmpty, "\(context): nothing left to recover")
        for session in try store.sessions() {
            for take in session.takes {
                #expect(FileManager.default.fileExists(atPath: try store.audioURL(for: take).path),
                        "\(context): take \"\(take.name)\" is listed without its audio")
                #expect(take.state != .recording, "\(context): take \"\(take.name)\" still recording after recovery")
            }
        }
        try checkKeyedReads(store, context: context)
    }

    /// The keyed reads (a store's index, summaries or catalog queries) agree with the full read:
    /// every session is found by its name and by each take's short id, with the same takes;
    /// `last`, and the session a recording goes into, are the ones `TakeStorage.sessions()`
    /// gives. Run after every fault, so an index that a crash left behind is checked too.
    public static func checkKeyedReads(_ store: any TakeStorage, context: String) throws {
        let all = try store.sessions()
        for session in all {
            let byName = try store.sessions(matching: session.name).first { $0.id == session.id }
            #expect(byName?.takes == session.takes, "\(context): session \"\(session.name)\" by its name")
            for take in session.takes {
                let byID = try store.sessions(matching: String(take.id.prefix(8))).first { $0.id == session.id }
                #expect(byID?.takes.contains(take) == true, "\(context): take \"\(take.name)\" by its short id")
            }
            let forRecording = try store.findSessionForRecording(named: session.name)
            #expect(forRecording?.id == all.first { $0.name == session.name }?.id, "\(context): recording into \"\(session.name)\"")
        }
        let active = all.max { a, b in
            (a.takes.map(\.createdAt).max() ?? a.createdAt) < (b.takes.map(\.createdAt).max() ?? b.createdAt)
        }
        #expect(try store.findSessionForRecording(named: nil)?.id == active?.id, "\(context): the session a recording goes into")
        if let newest = all.flatMap(\.takes).max(by: { $0.createdAt < $1.createdAt }) {
            let last = try store.sessions(matching: "last").flatMap(\.takes)
            #expect(last.contains { $0.createdAt == newest.createdAt }, "\(context): `last` finds the newest take")
        }
    }

    /// One pass of the recorder's recovery over the takes ``TakeStorage/interruptedTakes()`` gives
    /// (those whose lock is free): a file with audio is kept as it is; no file means no take.
    static func recoverUnlocked(_ store: any TakeStorage) throws {
        for interrupted in try store.interruptedTakes() {
            if let url = interrupted.fileURL {
                let size = (try? FileManager.default.attributesOfItem(atPath: url.path)[.size] as? Int) ?? 0
                _ = try store.completeRecovery(of: interrupted.take, repaired: RepairResult(frames: Int64(size / 4), format: interrupted.take.format, headerRepaired: false))
            } else {
                _ = try store.completeRecovery(of: interrupted.take, repaired: nil)
            }
        }
    }

    static let keptAudio = Data((0..<6000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
    static let freshAudio = Data((0..<5000).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ 1) })

    /// The library every fault scenario starts from: session "Library" with a finished take
    /// "Keep", and an empty session "Other".
    static func fixture(_ store: any TakeStorage) throws -> (library: Session, keep: Take) {
        let library = try store.createSession(named: "Library")
        _ = try store.createSession(named: "Other")
        let p = try begin(store, library, "Keep")
        try keptAudio.write(to: p.fileURL)
        let keep = try store.finishTake(p, frames: 1500, state: .complete, overruns: [])
        return (library, keep)
    }

    /// One operation of the contract, run against the fixture.
    struct Scenario: Sendable {
        var name: String
        var run: @Sendable (any TakeStorage, Session, Take) throws -> Void
    }

    static var scenarios: [Scenario] { [
        Scenario(name: "create a session") { store, _, _ in _ = try store.createSession(named: "New") },
        Scenario(name: "record a take") { store, library, _ in
            let p = try begin(store, library, "Fresh")
            try freshAudio.write(to: p.fileURL)
            _ = try store.finishTake(p, frames: 1250, state: .complete, overruns: [])
        },
        Scenario(name: "rename a session") { store, library, _ in _ = try store.renameSession(library.id, to: "Renamed") },
        Scenario(name: "rename a take") { store, _, keep in _ = try store.renameTake(keep.id, to: "Kept") },
        Scenario(name: "delete a take") { store, _, keep in try store.deleteTake(keep.id) },
        Scenario(name: "delete a session") { store, library, _ in try store.deleteSession(library.id) },
    ] }

    /// For every labelled step of every operation: stop the operation right after that step (all
    /// later mutations fail, as in a crash), reopen, recover, and require the library to be
    /// exactly as before or exactly as after, with no entry lacking its audio.
    static func crashPoints(make: (any StorageSeam) throws -> any TakeStorage, reopen: (any TakeStorage) throws -> any TakeStorage) throws {
        for scenario in scenarios {
            // A clean run gives the after-state and the steps to stop at.
            let probe = FaultInjectingSeam()
            let clean = try make(probe)
            let (library, keep) = try fixture(clean)
            let before = try snapshot(clean)
            probe.arm(nil)
            try scenario.run(clean, library, keep)
            let steps = probe.steps
            let mutations = probe.actions.count
            let after = try snapshot(clean)
            checkDurabilityOrder(probe.events, scenario: scenario.name)
            #expect(before != after, "\(scenario.name) changes the library")
            #expect(!steps.isEmpty, "\(scenario.name) reports its steps")
            #expect(steps.contains { $0.label.contains("committed") }, "\(scenario.name) reports its commit step")

            let faults = steps.map { FaultInjectingSeam.Fault.crash(after: $0) } + (1...max(1, mutations)).map { .crashAtMutation($0) }
            for fault in faults {
                let seam = FaultInjectingSeam()
                var store: (any TakeStorage)? = try make(seam)
                let (library, keep) = try fixture(store!)
                seam.arm(fault)
                let context = "\(scenario.name), \(fault)"
                #expect(throws: (any Error).self, "\(context): the operation stops") { try scenario.run(store!, library, keep) }
                #expect(seam.crashed, "\(context): the step was reached")
                let reopened = try dropAndReopen(&store, reopen)
                try recoverAll(reopened, context: context)
                let state = try snapshot(reopened)
                #expect(state == before || state == after, "\(context): the library is neither the before- nor the after-state")
            }
        }
    }

    /// The order durability needs: a file is synced before it is moved into place, and the
    /// folder is synced after a move before anything is reported committed.
    static func checkDurabilityOrder(_ events: [FaultInjectingSeam.Event], scenario: String) {
        var syncedSinceRename = false
        var renamePendingFolderSync = false
        for event in events {
            switch event {
            case .action(.sync):
                syncedSinceRename = true
                renamePendingFolderSync = false
            case .action(.rename):
                #expect(syncedSinceRename, "\(scenario): a file was moved into place without a sync before it")
                syncedSinceRename = false
                renamePendingFolderSync = true
            case .step(let step) where step.label.contains("committed"):
                #expect(!renamePendingFolderSync, "\(scenario): \(step) was reported before the folder of a move was synced")
            default:
                break
            }
        }
    }

    /// For every operation and every kind of mutation (write, sync, rename, unlink): fail the
    /// N-th one with EIO or ENOSPC. The operation must report a typed error (never success); the
    /// finished take that was not the operation's target is untouched; after reopening and
    /// recovering, the library is the before- or the after-state with no entry lacking audio.
    static func ioErrors(make: (any StorageSeam) throws -> any TakeStorage, reopen: (any TakeStorage) throws -> any TakeStorage) throws {
        for scenario in scenarios {
            let probe = FaultInjectingSeam()
            let clean = try make(probe)
            let (library, keep) = try fixture(clean)
            let before = try snapshot(clean)
            probe.arm(nil)
            try scenario.run(clean, library, keep)
            let after = try snapshot(clean)
            let counts = Dictionary(grouping: probe.actions, by: { $0 }).mapValues(\.count)

            for action in [FileAction.write, .sync, .rename, .unlink, .mkdir] {
                for nth in 1...max(1, counts[action] ?? 0) where counts[action] != nil {
                    let code = nth % 2 == 0 ? ENOSPC : EIO
                    let seam = FaultInjectingSeam()
                    var store: (any TakeStorage)? = try make(seam)
                    let (library, keep) = try fixture(store!)
                    seam.arm(.fail(action, nth: nth, errno: code))
                    let context = "\(scenario.name), \(action.rawValue) #\(nth) fails with errno \(code)"
                    do {
                        try scenario.run(store!, library, keep)
                        Issue.record("\(context): the operation reported success")
                    } catch let error as TapedeckError {
                        #expect(error.systemCode == code || error.code == .diskFull || error.code == .io, "\(context): \(error)")
                    } catch {
                        Issue.record("\(context): untyped error \(error)")
                    }
                    #expect(seam.injectedCount == 1, "\(context): the fault was injected")
                    if !scenario.name.contains("delete") && !scenario.name.contains("rename a session") {
                        let kept = try store!.sessions().flatMap(\.takes).first { $0.id == keep.id }
                        #expect(kept != nil && (try? Data(contentsOf: try store!.audioURL(for: kept!))) == keptAudio,
                                "\(context): the committed take \"Keep\" changed")
                    }
                    let reopened = try dropAndReopen(&store, reopen)
                    try recoverAll(reopened, context: context)
                    let state = try snapshot(reopened)
                    #expect(state == before || state == after, "\(context): the library is neither the before- nor the after-state")
                }
            }
        }
    }
}
