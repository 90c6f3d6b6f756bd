import Foundation
import Logging
import Synchronization
@testable import TapedeckApp
import TapedeckCore
import TapedeckTesting
import Testing

@MainActor
@Suite("App layer")
struct TakeRecorderTests {
    let format = AudioFormat(sampleRate: 48_000, channels: 2, sampleFormat: .s16)
    let logger = Logger(label: "test")

    func makeRecorder(_ script: [ScriptedCaptureBackend.Step], store: SessionStore) -> TakeRecorder {
        TakeRecorder(capture: ScriptedCaptureBackend(script: script), encoder: RawPCMEncoder(format: format), store: store,
                     settings: RecordingSettings(format: format, periodFrames: 256), logger: logger)
    }

    @Test("recording makes Session 1 / Take 1 with exactly the requested frames, then Take 2 in the same session")
    func recordTwice() async throws {
        let store = SessionStore(storage: try InMemoryStorage(), logger: logger)
        try await store.open(recoveringWith: [])
        let first = try await makeRecorder([.frames(1_000_000)], store: store).record(sessionName: nil, takeName: nil, duration: .frames(12_345))
        #expect(first.session.name == "Session 1" && first.take.name == "Take 1")
        #expect(first.take.state == .complete && first.take.frames == 12_345)
        let bytes = try [UInt8](Data(contentsOf: first.fileURL))
        #expect(bytes.count == 12_345 * format.bytesPerFrame)
        #expect(TestSignal.firstCounterMismatch(in: bytes, format: format) == nil)
        let second = try await makeRecorder([.frames(1_000_000)], store: store).record(sessionName: nil, takeName: nil, duration: .frames(100))
        #expect(second.session.id == first.session.id && second.take.name == "Take 2")
        #expect(store.sessions.count == 1 && store.sessions[0].takes.count == 2)
    }

    @Test("a store opened without loading records into the most recently active session and never lists the library")
    func recordWithoutListing() async throws {
        let storage = ListingCounter(try InMemoryStorage())
        let store = SessionStore(storage: storage, logger: logger)
        try await store.open(recoveringWith: [], loadingSessions: false)
        let first = try await makeRecorder([.frames(1_000_000)], store: store).record(sessionName: nil, takeName: nil, duration: .frames(100))
        #expect(first.session.name == "Session 1" && first.take.name == "Take 1")
        let gig = try await makeRecorder([.frames(1_000_000)], store: store).record(sessionName: "Gig", takeName: nil, duration: .frames(100))
        #expect(gig.session.name == "Gig" && gig.take.name == "Take 1")
        // Without a name: the session with the newest take, now Gig; with a name: that one.
        let next = try await makeRecorder([.frames(1_000_000)], store: store).record(sessionName: nil, takeName: nil, duration: .frames(100))
        #expect(next.session.id == gig.session.id && next.take.name == "Take 2")
        let back = try await makeRecorder([.frames(1_000_000)], store: store).record(sessionName: "Session 1", takeName: nil, duration: .frames(100))
        #expect(back.session.id == first.session.id && back.take.name == "Take 2")
        #expect(storage.listings.withLock { $0 } == 0, "recording listed the whole library")
        #expect(!store.isLoaded && store.sessions.isEmpty)
        // Loading it afterwards shows everything recorded, and changes refresh it from then on.
        try await store.refresh()
        #expect(store.sessions.map(\.name) == ["Session 1", "Gig"])
        #expect(store.sessions.map(\.takes.count) == [2, 2])
    }

    @Test("device loss gives an interrupted take with the audio captured so far")
    func interrupted() async throws {
        let store = SessionStore(storage: try InMemoryStorage(), logger: logger)
        try await store.open(recoveringWith: [])
        let report = try await makeRecorder([.frames(4_000), .fail], store: store).record(sessionName: "Gig", takeName: "Encore", duration: nil)
        #expect(report.take.state == .interrupted && report.take.frames == 4_000)
        #expect(report.summary.contains("Everything captured before that was kept"))
        #expect(store.sessions.first?.name == "Gig")
    }

    @Test("stop() drains and completes the take")
    func stop() async throws {
        let store = SessionStore(storage: try InMemoryStorage(), logger: logger)
        try await store.open(recoveringWith: [])
        let recorder = TakeRecorder(capture: ScriptedCaptureBackend(script: [.frames(Int.max)], realTime: false),
                                    encoder: RawPCMEncoder(format: format), store: store,
                                    settings: RecordingSettings(format: format, periodFrames: 256, bufferSeconds: 0.1), logger: logger)
        Task { @MainActor in
            // Stop once audio is flowing (a stop before that rightly records nothing).
            while recorder.frames < 10_000 { try await Task.sleep(for: .milliseconds(10)) }
            recorder.stop()
        }
        let report = try await recorder.record(sessionName: nil, takeName: nil, duration: nil)
        #expect(report.take.state == .complete)
        #expect(report.take.frames > 0)
        #expect(try Data(contentsOf: report.fileURL).count == Int(report.take.frames) * format.bytesPerFrame)
    }

    @Test("a failing device open leaves no take behind")
    func openFailure() async throws {
        let store = SessionStore(storage: try InMemoryStorage(), logger: logger)
        try await store.open(recoveringWith: [])
        let recorder = TakeRecorder(capture: ScriptedCaptureBackend(script: []), encoder: RawPCMEncoder(format: format), store: store,
                                    settings: RecordingSettings(format: AudioFormat(sampleRate: 1, channels: 1, sampleFormat: .s16)), logger: logger)
        await #expect(throws: TapedeckError.self) { _ = try await recorder.record(sessionName: "S", takeName: nil, duration: .frames(10)) }
        #expect(store.sessions.allSatisfy { $0.takes.isEmpty })
    }

    @Test("takes are resolved by SESSION/TAKE, by short id, and names containing / are found")
    func references() async throws {
        let store = SessionStore(storage: try InMemoryStorage(), logger: logger)
        try await store.open(recoveringWith: [])
        let a = try await makeRecorder([.frames(1_000)], store: store).record(sessionName: "A/B", takeName: "C/D", duration: .frames(10))
        guard case .take(let t, let s) = try store.resolve("A/B/C/D") else { Issue.record("not a take"); return }
        #expect(t.id == a.take.id && s.name == "A/B")
        guard case .take(let byID, _) = try store.resolve(a.take.shortID) else { Issue.record("not a take"); return }
        #expect(byID.id == a.take.id)
        guard case .session = try store.resolve("A/B") else { Issue.record("not a session"); return }
        #expect(throws: TapedeckError.self) { try store.resolve("A/B/nope") }
    }

    @Test("rename and delete go through the store and refresh the published sessions")
    func renameDelete() async throws {
        let store = SessionStore(storage: try InMemoryStorage(), logger: logger)
        try await store.open(recoveringWith: [])
        let r = try await makeRecorder([.frames(1_000)], store: store).record(sessionName: nil, takeName: nil, duration: .frames(10))
        try await store.rename(.take(r.take, in: r.session), to: "Keeper")
        #expect(store.sessions[0].takes[0].name == "Keeper")
        try await store.delete(.session(r.session))
        #expect(store.sessions.isEmpty)
        #expect(!FileManager.default.fileExists(atPath: r.fileURL.path))
    }

    @Test("the player plays a recorded take through the decoder")
    func play() async throws {
        let store = SessionStore(storage: try InMemoryStorage(), logger: logger)
        try await store.open(recoveringWith: [])
        let r = try await makeRecorder([.frames(1_000_000)], store: store).record(sessionName: nil, takeName: nil, duration: .frames(5_000))
        let playback = CollectingPlaybackBackend()
        let player = TakePlayer(playback: playback, decoders: [RawPCMEncoder(format: format)], store: store, logger: logger)
        let result = try await player.play(r.take)
        #expect(result.frames == 5_000)
        #expect(firstDifference(playback.collected, try [UInt8](Data(contentsOf: r.fileURL))) == nil)
    }
}

@MainActor
@Suite("Review regressions")
struct ReviewRegressionTests {
    let format = AudioFormat(sampleRate: 48_000, channels: 2, sampleFormat: .s16)
    let logger = Logger(label: "test")

    @Test("a stop that comes before recording begins makes no take and says so")
    func stopBeforeStart() async throws {
        let store = SessionStore(storage: try InMemoryStorage(), logger: logger)
        try await store.open(recoveringWith: [])
        let recorder = TakeRecorder(capture: ScriptedCaptureBackend(script: [.frames(Int.max)]), encoder: RawPCMEncoder(format: format),
                                    store: store, settings: RecordingSettings(format: format, periodFrames: 1024), logger: logger)
        let task = Task { @MainActor in try await recorder.record(sessionName: "S", takeName: nil, duration: nil) }
        while recorder.phase != .opening { await Task.yield() }
        recorder.stop()
        let error = await #expect(throws: TapedeckError.self) { _ = try await task.value }
        #expect(error?.code == .cancelled)
        #expect(store.sessions.allSatisfy { $0.takes.isEmpty })
    }

    @Test("a name that is also an id prefix is ambiguous, never silently the id")
    func nameVersusID() throws {
        let take = Take(id: "cafe1234-0000-0000-0000-000000000000", sessionID: "s2", name: "Take 1", number: 1, createdAt: Date(),
                        state: .complete, format: format, encoding: "raw", file: "x", frames: 1)
        let sessions = [
            Session(id: "11111111-0000-0000-0000-000000000000", name: "cafe", createdAt: Date()),
            Session(id: "s2", name: "Other", createdAt: Date(), takes: [take]),
        ]
        let error = #expect(throws: TapedeckError.self) { try TakeReference.resolve("cafe", in: sessions) }
        #expect(error?.message.contains("could mean") == true)
        guard case .take = try TakeReference.resolve("cafe1", in: sessions) else { Issue.record("expected the take"); return }
        guard case .session = try TakeReference.resolve("1111", in: sessions) else { Issue.record("expected the session"); return }
    }
}

@Suite("Export helpers")
struct ExportHelperTests {
    @Test("file names are safe for file systems and keep the names readable")
    func fileNames() {
        let s = Session(id: "s", name: "../Gig/2026", createdAt: Date())
        let t = Take(id: "abcdef12-0000", sessionID: "s", name: "Take\u{0}1", number: 1, createdAt: Date(), state: .complete,
                     format: .cdStereo, encoding: "wav", file: "x", frames: 1)
        #expect(ExportJob.fileName(for: ExportItem(take: t, session: s), extension: "flac") == "_Gig_2026 - Take_1.flac")
        let dots = Session(id: "s", name: "...", createdAt: Date())
        let empty = Take(id: "abcdef12-0000", sessionID: "s", name: "-", number: 1, createdAt: Date(), state: .complete,
                         format: .cdStereo, encoding: "wav", file: "x", frames: 1)
        #expect(ExportJob.fileName(for: ExportItem(take: empty, session: dots), extension: "flac") == "take-abcdef12.flac")
    }

    @Test("the content hash does not depend on chunking, and any changed byte changes it")
    func contentHash() {
        let bytes = (0..<1000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        var whole = ContentHash(), pieces = ContentHash(), changed = ContentHash()
        bytes.withUnsafeBytes { whole.add($0.baseAddress!, count: 1000) }
        bytes.withUnsafeBytes { raw in
            var offset = 0
            for size in [1, 3, 8, 13, 100, 875] {
                pieces.add(raw.baseAddress! + offset, count: size)
                offset += size
            }
        }
        var altered = bytes
        altered[517] ^= 1
        altered.withUnsafeBytes { changed.add($0.baseAddress!, count: 1000) }
        #expect(whole == pieces && whole.hex == pieces.hex)
        #expect(whole.hex != changed.hex)
    }
}

/// A store that counts how often the whole library is listed (``TakeStorage/sessions()``).
private final class ListingCounter: TakeStorage {
    let base: InMemoryStorage
    let listings = Mutex(0)
    init(_ base: InMemoryStorage) { self.base = base }

    var rootURL: URL { base.rootURL }
    func sessions() throws -> [Session] {
        listings.withLock { $0 += 1 }
        return try base.sessions()
    }
    func findSessionForRecording(named name: String?) throws -> Session? {
        // What a catalog answers with one query: the same choice, without counting as a listing.
        try base.findSessionForRecording(named: name)
    }
    func createSession(named name: String?) throws -> Session { try base.createSession(named: name) }
    func beginTake(in sessionID: String, named name: String?, format: AudioFormat, encoding: String, fileExtension: String,
                   startDate: Date) throws -> PendingTake {
        try base.beginTake(in: sessionID, named: name, format: format, encoding: encoding, fileExtension: fileExtension, startDate: startDate)
    }
    func finishTake(_ pending: PendingTake, frames: Int64, state: TakeState, overruns: [OverrunEvent]) throws -> Take {
        try base.finishTake(pending, frames: frames, state: state, overruns: overruns)
    }
    func renameSession(_ id: String, to name: String) throws -> Session { try base.renameSession(id, to: name) }
    func renameTake(_ id: String, to name: String) throws -> Take { try base.renameTake(id, to: name) }
    func annotateTake(_ id: String, _ annotations: TakeAnnotations) throws -> Take { try base.annotateTake(id, annotations) }
    func deleteSession(_ id: String) throws { try base.deleteSession(id) }
    func deleteTake(_ id: String) throws { try base.deleteTake(id) }
    func interruptedTakes() throws -> [InterruptedTake] { try base.interruptedTakes() }
    func completeRecovery(of take: Take, repaired: RepairResult?) throws -> Take? { try base.completeRecovery(of: take, repaired: repaired) }
    func audioURL(for take: Take) throws -> URL { try base.audioURL(for: take) }
}
