import Foundation
import Logging
import Synchronization
@testable import TapedeckApp
import TapedeckCore
import TapedeckNull
import TapedeckTesting
import Testing

/// Virtual time shared by the null device's pacing and the schedule: a sleep returns at once
/// with the clock moved to its deadline, so an hour of audio takes the time to write it.
final class VirtualPacing: PacingClock, Sendable {
    let nanos = Atomic<UInt64>(0)
    var isRealTime: Bool { false }
    func nowNanoseconds() -> UInt64 { nanos.load(ordering: .relaxed) }
    func sleep(untilNanoseconds deadline: UInt64) {
        var current = nanos.load(ordering: .relaxed)
        while deadline > current {
            let (exchanged, original) = nanos.compareExchange(expected: current, desired: deadline, ordering: .relaxed)
            if exchanged { return }
            current = original
        }
    }
}

@MainActor
final class VirtualScheduleClock: ScheduleClock {
    let pacing = VirtualPacing()
    let epoch: Date
    init(startingAt epoch: Date) { self.epoch = epoch }
    func now() -> Date { epoch.addingTimeInterval(Double(pacing.nowNanoseconds()) / 1e9) }
    func sleep(until date: Date, stopped: @MainActor () -> Bool) async {
        pacing.sleep(untilNanoseconds: UInt64(max(0, date.timeIntervalSince(epoch)) * 1e9))
    }
}

@MainActor
@Suite("A scheduled day on a virtual clock")
struct ScheduledDayTests {
    @Test("the night the clocks go back, started inside a stretch: a catch-up take, then each window once, at its computed time and length in frames")
    func scheduledDay() async throws {
        let zone = TimeZone(identifier: "Europe/Amsterdam")!
        let amsterdam = SolarTimes(latitude: 52.37, longitude: 4.90)
        let point = { (text: String) in try RecordingSchedule.Point.parse(text) }
        // 2026-10-25: 03:00 CEST becomes 02:00 CET (01:00 UTC), so 02:30 happens twice.
        let schedule = RecordingSchedule(zone: zone, location: amsterdam, windows: [
            .init(from: try point("02:30"), to: try point("02:30:15")),
            .init(from: try point("sunrise"), to: try point("sunrise+1m")),
            .init(from: try point("12:00"), to: try point("12:00:30")),
            .init(from: try point("civil-dusk"), to: try point("civil-dusk+1m")),
        ])
        let utc = { (text: String) in ISO8601DateFormatter().date(from: text)! }
        // Started 5 s into the first 02:30 (CEST), stopped at the day's end (midnight CET).
        let clock = VirtualScheduleClock(startingAt: utc("2026-10-25T00:30:05Z"))
        let dayEnd = utc("2026-10-25T23:00:00Z")
        let format = AudioFormat(sampleRate: 8_000, channels: 1, sampleFormat: .s16)
        let logger = Logger(label: "test")
        let store = SessionStore(storage: try InMemoryStorage(), logger: logger)
        try await store.open(recoveringWith: [])
        let recorder = TakeRecorder(capture: NullCaptureBackend(signal: .sine(frequency: 440, level: 0.5), clock: clock.pacing),
                                    encoder: RawPCMEncoder(format: format), store: store,
                                    settings: RecordingSettings(format: format, periodFrames: 256), logger: logger)
        var started: [(at: Date, stretch: RecordingSchedule.Occurrence, catchUp: Bool)] = []
        var reports: [RecordingReport] = []
        var waits = 0
        try await ScheduledRecording(schedule: schedule, recorder: recorder, clock: clock)
            .run(plan: RunPlan(), session: "Dawn chorus", take: nil, stopped: { clock.now() >= dayEnd }) { event in
                switch event {
                case .recording(let stretch, let now, let catchUp): started.append((now, stretch, catchUp))
                case .finished(let report): reports.append(report)
                case .waiting: waits += 1
                case .waited, .deviceMissing: break
                }
            }
        let day = DateComponents(year: 2026, month: 10, day: 25)
        let sunrise = try #require(amsterdam.time(of: .sunrise, on: day, in: zone))
        let dusk = try #require(amsterdam.time(of: .civilDusk, on: day, in: zone))
        // The second 02:30 (01:30 UTC, CET) is not a second stretch; noon is 11:00 UTC in CET.
        let expected: [(start: Date, seconds: Double)] = [
            (utc("2026-10-25T00:30:00Z"), 15), (sunrise, 60), (utc("2026-10-25T11:00:00Z"), 30), (dusk, 60),
        ]
        #expect(started.map(\.stretch.start) == expected.map(\.start), "\(started.map(\.stretch))")
        #expect(started.map(\.catchUp) == [true, false, false, false])
        #expect(waits == 4, "waited before each later stretch and after the last")
        // Each began when the virtual clock reached it (the first at once, 5 s late).
        for (run, want) in zip(started.dropFirst(), expected.dropFirst()) {
            #expect(abs(run.at.timeIntervalSince(want.start)) < 0.001, "began at \(run.at), computed \(want.start)")
        }
        #expect(abs(started[0].at.timeIntervalSince(utc("2026-10-25T00:30:05Z"))) < 0.001)
        // One complete take per stretch, its length in frames the stretch's (the first from
        // where it started), and its run saying why it began.
        #expect(reports.count == 4)
        let frames = reports.map(\.take.frames)
        let expectedFrames: [Int64] = [80_000, 480_000, 240_000, 480_000]
        #expect(frames == expectedFrames, "\(frames)")
        #expect(reports.allSatisfy { $0.take.state == .complete && $0.take.overruns.isEmpty })
        let began: [TakeBoundary?] = reports.map { $0.take.run?.began }
        #expect(began == [.scheduleCatchUp, .schedule, .schedule, .schedule])
        #expect(Set(reports.map(\.session.name)) == ["Dawn chorus"])
        #expect(store.sessions.first?.takes.count == 4)
    }
}

@Suite("The upload backlog")
struct UploadBacklogTests {
    @Test("finished takes not verified count, with their files' sizes and the wait of the one that finished first; verified and recording ones do not")
    func backlog() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("backlog-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let format = AudioFormat(sampleRate: 48_000, channels: 2, sampleFormat: .s16)
        let t0 = Date(timeIntervalSince1970: 1_800_000_000)
        func take(_ id: String, _ state: TakeState, began: Date, seconds: Int64) throws -> Take {
            try Data(count: 1_000 + id.count).write(to: folder.appendingPathComponent(id))
            return Take(id: id, sessionID: "s", name: id, number: 1, createdAt: began, state: state, format: format, encoding: "wav",
                        file: id, frames: seconds * 48_000, began: began)
        }
        let session = Session(id: "s", name: "Dawn", createdAt: t0, takes: [
            try take("sent", .complete, began: t0, seconds: 60),
            try take("first", .interrupted, began: t0.addingTimeInterval(100), seconds: 600),
            try take("second", .complete, began: t0.addingTimeInterval(200), seconds: 60),
            try take("live", .recording, began: t0.addingTimeInterval(300), seconds: 60),
        ])
        let records = ["sent": UploadLedger.Record(state: .verified, key: "k"), "second": UploadLedger.Record(state: .failed, key: "k")]
        // "second" finished at t0+260, before "first" (t0+700): it has waited longest.
        let now = t0.addingTimeInterval(260 + 3_000)
        let backlog = UploadBacklog.measure([session], records: records, now: now) { folder.appendingPathComponent($0.id) }
        #expect(backlog.takes == 2 && backlog.bytes == Int64(2_000 + "first".count + "second".count))
        #expect(backlog.oldest == "Dawn/second" && backlog.oldestSeconds == 3_000 && !backlog.isStale)
        let later = UploadBacklog.measure([session], records: records, now: now.addingTimeInterval(601)) { folder.appendingPathComponent($0.id) }
        #expect(later.isStale)
        let none = UploadBacklog.measure([session], records: records.merging(["first": .init(state: .verified, key: "k"), "second": .init(state: .verified, key: "k")]) { $1 },
                                         now: now) { folder.appendingPathComponent($0.id) }
        #expect(none.takes == 0 && none.oldestSeconds == nil && !none.isStale)
    }
}

@Suite("The journal's native protocol")
struct JournalSinkTests {
    @Test("the native protocol: a value with a newline is sent with its length; keys are upper case")
    func encoding() {
        let bytes = JournalSink.entry([("MESSAGE", "two\nlines"), ("take_id", "abc"), ("_hidden", "x")])
        var expected = Array("MESSAGE\n".utf8)
        withUnsafeBytes(of: UInt64(9).littleEndian) { expected += $0 }
        expected += Array("two\nlines\nTAKE_ID=abc\nHIDDEN=x\n".utf8)
        #expect(bytes == expected)
    }
}
