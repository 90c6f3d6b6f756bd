import Foundation
import TapedeckApp
import TapedeckCore
import Testing

/// Retention under a fake clock: a year of hourly takes, some protected, and a wall clock that
/// steps; exactly the takes the rules let go are chosen, never a protected one, never early.
@Suite("retention: what goes, what never does, and a clock that steps")
struct RetentionTests {
    static let start = Date(timeIntervalSince1970: 1_767_225_600)  // 2026-01-01 00:00 UTC
    static let day = 86_400.0

    /// 8 760 hourly takes from `start`: every 97th recording (the newest few too), every 50th
    /// marked, noted or tagged, every 7th not verified.
    static func year() -> [RetentionItem] {
        (0..<8760).map { hour in
            var take = Take(id: String(format: "t%05d", hour), sessionID: "s", name: "Hour \(hour)", number: hour + 1,
                            createdAt: start.addingTimeInterval(Double(hour) * 3600), state: hour % 97 == 0 ? .recording : .complete,
                            format: AudioFormat(sampleRate: 48_000, channels: 1, sampleFormat: .s16), encoding: "wav", file: "f\(hour).wav",
                            frames: 48_000 * 3600)
            switch hour % 150 {
            case 50: take.markers = [TakeMarker(frame: 10, date: take.createdAt)]
            case 100: take.notes = "the owl"
            case 0 where hour % 97 != 0: take.tags = ["species": "owl"]
            default: break
            }
            return RetentionItem(take: take, session: "s", sessionName: "Logger", bytes: 345_600_000, verified: hour % 7 != 3)
        }
    }

    static func expectedProtected(_ item: RetentionItem) -> Bool {
        let t = item.take
        return t.state == .recording || !t.markers.isEmpty || !t.notes.isEmpty || !t.tags.isEmpty || !item.verified
    }

    @Test("keep 30d after a year: exactly the unprotected takes over 30 days old go")
    func age() {
        let items = Self.year()
        let now = Self.start.addingTimeInterval(365 * Self.day)
        let policy = RetentionPolicy(keepSeconds: 30 * Self.day, floor: nil, keepMarked: true, requireVerified: true)
        let plan = RetentionPlanner.plan(items, policy: policy, now: now, disk: nil)
        let expected = items.filter { !Self.expectedProtected($0) && now.timeIntervalSince($0.take.createdAt) > 30 * Self.day }.map(\.take.id)
        #expect(plan.deletions.map(\.item.take.id) == expected)
        #expect(plan.deletions.allSatisfy { !Self.expectedProtected($0.item) })
        #expect(plan.protected["recording"] == items.filter { $0.take.state == .recording }.count)
        #expect((plan.protected["unverified"] ?? 0) > 0 && (plan.protected["marked"] ?? 0) > 0)
        // keep-marked off: the marked go too; without a remote, the unverified go too.
        let loose = RetentionPlanner.plan(items, policy: RetentionPolicy(keepSeconds: 30 * Self.day, floor: nil, keepMarked: false), now: now, disk: nil)
        #expect(loose.deletions.count == items.filter { $0.take.state != .recording && now.timeIntervalSince($0.take.createdAt) > 30 * Self.day }.count)
    }

    @Test("below the floor, the oldest unprotected takes go until the disk has room, whatever their age")
    func floor() {
        let items = Self.year()
        let now = Self.start.addingTimeInterval(365 * Self.day)
        let total: Int64 = 4_000_000_000_000
        // 10% of 4 TB is 400 GB; 100 GB free: 300 GB to free, 345.6 MB a take: 869 takes.
        let plan = RetentionPlanner.plan(items, policy: RetentionPolicy(keepSeconds: nil, floor: .percent(10), requireVerified: true),
                                         now: now, disk: (100_000_000_000, total))
        let eligible = items.filter { !Self.expectedProtected($0) }
        #expect(plan.deletions.count == 869)
        #expect(plan.deletions.map(\.item.take.id) == eligible.prefix(869).map(\.take.id), "the oldest first")
        #expect(plan.deletions.allSatisfy { $0.reason == .freeSpace })
        #expect(plan.floorBytes == 400_000_000_000 && (plan.freeAfter ?? 0) >= 400_000_000_000)
    }

    @Test("a clock stepped forward or back by 10 hours deletes nothing early; a step believed after a day")
    func clockSteps() {
        let items = Self.year()
        let policy = RetentionPolicy(keepSeconds: 30 * Self.day, floor: nil, requireVerified: true)
        // Runs every hour on the boot clock; the true time is the year's end.
        let trueNow = Self.start.addingTimeInterval(365 * Self.day)
        var clock = RetentionClock()
        func run(boot: Double, step: Double) -> RetentionPlan {
            let reading = RetentionClock.Reading(wall: trueNow.addingTimeInterval(boot - 100_000 + step), boot: boot, bootID: "b1")
            let (now, trusted, problem) = clock.trustedNow(reading, newestTake: items.last?.take.createdAt)
            return RetentionPlanner.plan(items, policy: policy, now: now, agesTrusted: trusted, clockProblem: problem, disk: nil)
        }
        func truth(boot: Double) -> Set<String> {
            let now = trueNow.addingTimeInterval(boot - 100_000)
            return Set(items.filter { !Self.expectedProtected($0) && now.timeIntervalSince($0.take.createdAt) > 30 * Self.day }.map(\.take.id))
        }
        let steady = Set(run(boot: 100_000, step: 0).deletions.map(\.item.take.id)) == truth(boot: 100_000)
        #expect(steady, "a steady clock deletes exactly what the true time allows")
        // Forward by 10 h: nothing beyond what the true time allows, and it is said.
        let forward = run(boot: 103_600, step: 36_000)
        let early = Set(forward.deletions.map(\.item.take.id)).subtracting(truth(boot: 103_600))
        #expect(early.isEmpty, "\(early.count) deleted early")
        #expect(forward.clockProblem?.contains("stepped forward by 10 h") == true, "\(forward.clockProblem ?? "")")
        for hour in 2...23 {
            let plan = run(boot: 100_000 + Double(hour) * 3600, step: 36_000)
            let early = Set(plan.deletions.map(\.item.take.id)).subtracting(truth(boot: 100_000 + Double(hour) * 3600))
            #expect(early.isEmpty, "hour \(hour): \(early.count) deleted early")
        }
        // A day later the step is believed.
        let believed = run(boot: 100_000 + 26 * 3600, step: 36_000)
        #expect(believed.clockProblem == nil)
        // Back by 10 h (from where it is now): takes look younger; never one more than the truth.
        var back = RetentionClock()
        let r1 = RetentionClock.Reading(wall: trueNow, boot: 50, bootID: "b2")
        _ = back.trustedNow(r1, newestTake: nil)
        let r2 = RetentionClock.Reading(wall: trueNow.addingTimeInterval(3600 - 36_000), boot: 3650, bootID: "b2")
        let (now, _, problem) = back.trustedNow(r2, newestTake: nil)
        #expect(now <= trueNow.addingTimeInterval(3600))
        #expect(problem?.contains("stepped back by 10 h") == true)
        // A take dated after the clock's time: the clock is behind; nothing goes for its age.
        var behind = RetentionClock()
        let (_, trusted, said) = behind.trustedNow(RetentionClock.Reading(wall: Self.start, boot: 1, bootID: "b3"), newestTake: trueNow)
        #expect(!trusted && said?.contains("the clock is behind") == true)
        let none = RetentionPlanner.plan(items, policy: policy, now: Self.start, agesTrusted: trusted, disk: nil)
        #expect(none.deletions.isEmpty)
    }
}
