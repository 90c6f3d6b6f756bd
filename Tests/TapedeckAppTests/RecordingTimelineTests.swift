import Foundation
@testable import TapedeckApp
import TapedeckCore
import Testing

/// The timeline of a session's takes and the clips cut from it, without audio: which frames of
/// which takes a range of time is, where the gaps are, and what each gap policy makes of them.
@Suite("Recording timeline")
struct RecordingTimelineTests {
    static let format = AudioFormat(sampleRate: 48_000, channels: 2, sampleFormat: .s16)
    static let t0 = Date(timeIntervalSince1970: 1_800_000_000)

    /// A take of `seconds` of run `run` at `offset` seconds into it (its time: the run's start
    /// plus the offset, unless `began` is nil).
    static func take(_ n: Int, run: String?, offset: Double, seconds: Double, began: Bool = true, resumed: Bool = false,
                     runStart: Date = t0, markers: [TakeMarker] = []) -> Take {
        let frames = Int64(seconds * 48_000)
        let start = runStart.addingTimeInterval(offset)
        return Take(id: "take-\(n)", sessionID: "s", name: "Take \(n)", number: n, createdAt: start.addingTimeInterval(0.3),
                    state: .complete, format: format, encoding: "wav", file: "t\(n).wav", frames: frames,
                    run: run.map { TakeRun(id: $0, index: n, offset: Int64(offset * 48_000), began: resumed ? .deviceResumed : n == 1 ? .start : .splitTime) },
                    markers: markers, began: began ? start : nil)
    }

    static func session(_ takes: [Take]) -> Session {
        Session(id: "s", name: "Logger", createdAt: t0, takes: takes)
    }

    /// A run of ten one-minute takes (the first 40 s: aligned), as `--split 1m --split-align` makes.
    static let run: [Take] = (1...10).map { n in
        take(n, run: "r1", offset: n == 1 ? 0 : 40 + Double(n - 2) * 60, seconds: n == 1 ? 40 : 60)
    }

    @Test func aRunIsOneStretchAndARangeIsExactlyItsFrames() throws {
        let timeline = RecordingTimeline(session: Self.session(Self.run.shuffled()))
        #expect(timeline.stretches.count == 1 && timeline.stretches[0].pieces.map(\.take.number) == Array(1...10))
        let clips = try timeline.clips(from: Self.t0.addingTimeInterval(150), to: Self.t0.addingTimeInterval(430), gaps: .refuse)
        #expect(clips.count == 1)
        let clip = try #require(clips.first)
        #expect(clip.frames == 280 * 48_000 && clip.start == Self.t0.addingTimeInterval(150))
        // 150 s is 50 s into take 3 (which begins at 100 s); 430 s is 30 s into take 8 (at 400 s).
        let minute: Int64 = 60 * 48_000
        var expected: [ClipPlan.Part] = [.audio(Self.run[2], from: 50 * 48_000, frames: 10 * 48_000)]
        expected += (3...6).map { ClipPlan.Part.audio(Self.run[$0], from: 0, frames: minute) }
        expected.append(.audio(Self.run[7], from: 0, frames: 30 * 48_000))
        #expect(clip.parts == expected)
        let take = clip.take(in: Self.session(Self.run))
        #expect(take.began == clip.start && take.frames == clip.frames)
        #expect(take.notes.contains("Take 3 from 0:00:50.000") && take.notes.contains("Take 8 to 0:00:30.000"))
    }

    @Test func aTakeWithoutItsOwnTimeIsPlacedByItsRun() throws {
        var takes = Self.run
        takes[4].began = nil
        let timeline = RecordingTimeline(session: Self.session(takes))
        let piece = try #require(timeline.stretches.first?.pieces.first { $0.take.number == 5 })
        #expect(piece.timeSource == .run && piece.start == Self.t0.addingTimeInterval(40 + 3 * 60))
    }

    @Test func gapsAreRefusedFilledOrSplit() throws {
        // Two runs with 2.5 s between them; the device was lost in the second (a resumed take after an outage).
        let second = Self.t0.addingTimeInterval(12.5)
        let takes = [Self.take(1, run: "a", offset: 0, seconds: 10), Self.take(2, run: "b", offset: 0, seconds: 5, runStart: second),
                     Self.take(3, run: "b", offset: 5, seconds: 5, resumed: true, runStart: second.addingTimeInterval(1))]
        let timeline = RecordingTimeline(session: Self.session(takes))
        #expect(timeline.stretches.count == 3, "a resumed take is not contiguous: its run's frames hide the outage")
        let (from, to) = (Self.t0.addingTimeInterval(5), Self.t0.addingTimeInterval(20))
        let gaps = timeline.gaps(from: from, to: to)
        #expect(gaps.map(\.seconds) == [2.5, 1])
        let refused = #expect(throws: TapedeckError.self) { try timeline.clips(from: from, to: to, gaps: .refuse) }
        #expect(refused?.code == .timelineGap && refused?.message.contains("--gaps silence") == true)
        let filled = try #require(try timeline.clips(from: from, to: to, gaps: .silence).first)
        #expect(filled.frames == 15 * 48_000 && filled.start == from)
        #expect(filled.parts.map(\.frames) == [5 * 48_000, 120_000, 5 * 48_000, 48_000, 72_000])
        #expect(filled.filledGaps.count == 2)
        let split = try timeline.clips(from: from, to: to, gaps: .split)
        #expect(split.map(\.frames) == [5 * 48_000, 5 * 48_000, 72_000])
        #expect(split.map(\.start) == [from, second, second.addingTimeInterval(6)])
        #expect(throws: TapedeckError.self) { try timeline.clips(from: Self.t0.addingTimeInterval(100), to: Self.t0.addingTimeInterval(200), gaps: .silence) }
    }

    @Test func aClockSetBackBetweenRunsCutsTheEarlierShort() throws {
        let takes = [Self.take(1, run: "a", offset: 0, seconds: 10), Self.take(2, run: "b", offset: 0, seconds: 10, runStart: Self.t0.addingTimeInterval(8))]
        let timeline = RecordingTimeline(session: Self.session(takes))
        #expect(timeline.overlaps.count == 1 && timeline.overlaps[0].seconds == 2)
        let clip = try #require(try timeline.clips(from: Self.t0, to: Self.t0.addingTimeInterval(18), gaps: .refuse).first)
        let expected: [ClipPlan.Part] = [.audio(takes[0], from: 0, frames: 384_000), .audio(takes[1], from: 0, frames: 480_000)]
        #expect(clip.parts == expected)
    }

    @Test func markersAreTimesOfDay() throws {
        var takes = Self.run
        takes[2].markers = [TakeMarker(frame: 48_000, label: "news", date: Self.t0)]
        takes[6].markers = [TakeMarker(frame: 0, label: "News", date: Self.t0)]
        let timeline = RecordingTimeline(session: Self.session(takes))
        #expect(try timeline.mark("news").date == Self.t0.addingTimeInterval(40 + 5 * 60))
        #expect(try timeline.mark("news", after: Self.t0).date == Self.t0.addingTimeInterval(101))
        let missing = #expect(throws: TapedeckError.self) { try timeline.mark("weather") }
        #expect(missing?.message.contains("news") == true)
        let clip = try #require(try timeline.clips(from: Self.t0.addingTimeInterval(100), to: Self.t0.addingTimeInterval(110), gaps: .refuse).first)
        #expect(clip.take(in: Self.session(takes)).markers.map(\.frame) == [48_000])
    }

    @Test func clockTimesAsTyped() throws {
        let zone = try #require(TimeZone(identifier: "Europe/Amsterdam"))
        let now = try ClockTime.parse("2026-12-01T15:00:00Z", flag: "--from")
        #expect(try ClockTime.parse("2026-12-01 14:05", flag: "--from", zone: zone) == Date(timeIntervalSince1970: 1_796_130_300))
        #expect(try ClockTime.parse("14:05", flag: "--from", now: now, zone: zone) == Date(timeIntervalSince1970: 1_796_130_300))
        #expect(try ClockTime.parse("yesterday 14:05:30.25", flag: "--from", now: now, zone: zone) == Date(timeIntervalSince1970: 1_796_130_300 - 86_400 + 30.25))
        #expect(try ClockTime.parse("2026-12-01T13:05:00+00:00", flag: "--from", zone: zone) == Date(timeIntervalSince1970: 1_796_130_300))
        #expect(try ClockTime.parse("now", flag: "--from", now: now) == now)
        for bad in ["14h05", "25:00", "2026-13-01 10:00", "14:05:7", "tomorrow"] {
            let e = #expect(throws: TapedeckError.self) { try ClockTime.parse(bad, flag: "--from") }
            #expect(e?.message.contains("--from \(bad)") == true)
        }
    }
}
