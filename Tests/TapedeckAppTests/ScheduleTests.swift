import Foundation
import TapedeckApp
import Testing

/// The schedule's sun against python's astral, and its windows across daylight-saving changes.
@Suite("schedules: the sun's times and the windows")
struct ScheduleTests {
    /// 50 places from 77° S to 78° N, all around the world.
    static let places: [(Double, Double)] = [
        (52.37, 4.90), (51.51, -0.13), (40.71, -74.01), (34.05, -118.24), (35.68, 139.69), (-33.87, 151.21), (-34.60, -58.38),
        (55.76, 37.62), (1.35, 103.82), (-1.29, 36.82), (64.15, -21.94), (69.65, 18.96), (78.22, 15.65), (-54.80, -68.30),
        (-77.85, 166.67), (19.43, -99.13), (28.61, 77.21), (-22.91, -43.17), (60.17, 24.94), (59.33, 18.07), (47.61, -122.33),
        (61.22, -149.90), (21.31, -157.86), (-41.29, 174.78), (30.04, 31.24), (6.52, 3.38), (-26.20, 28.05), (39.90, 116.40),
        (37.57, 126.98), (13.76, 100.50), (-6.21, 106.85), (25.20, 55.27), (41.01, 28.98), (38.72, -9.14), (40.42, -3.70),
        (45.46, 9.19), (48.86, 2.35), (50.85, 4.35), (53.35, -6.26), (45.50, -73.57), (49.28, -123.12), (-12.05, -77.04),
        (4.71, -74.07), (-31.95, 115.86), (-17.83, 31.05), (33.89, 35.50), (43.24, 76.89), (62.45, -114.37), (67.86, 20.23), (-45.87, 170.50),
    ]
    static let events: [(astral: String, ours: SolarTimes.Event)] = [
        ("dawn:6", .civilDawn), ("sunrise", .sunrise), ("noon", .noon), ("sunset", .sunset), ("dusk:6", .civilDusk),
        ("dawn:12", .nauticalDawn), ("dusk:12", .nauticalDusk), ("dawn:18", .astronomicalDawn), ("dusk:18", .astronomicalDusk),
    ]

    @Test("50 places × 365 days × 9 events within a minute of astral's, and the same days without them")
    func againstAstral() async throws {
        let script = """
            import json, sys, datetime
            from astral import Observer
            from astral.sun import dawn, dusk, sunrise, sunset, noon
            places = json.loads(sys.argv[1]); events = json.loads(sys.argv[2])
            out = []
            for lat, lon in places:
                o = Observer(latitude=lat, longitude=lon)
                for day in range(365):
                    d = datetime.date(2026, 1, 1) + datetime.timedelta(days=day)
                    row = []
                    for e in events:
                        name, _, dep = e.partition(":")
                        try:
                            f = {"dawn": lambda: dawn(o, d, depression=float(dep)), "dusk": lambda: dusk(o, d, depression=float(dep)),
                                 "sunrise": lambda: sunrise(o, d), "sunset": lambda: sunset(o, d), "noon": lambda: noon(o, d)}[name]
                            row.append(f().timestamp())
                        except ValueError:
                            row.append(None)
                    out.append(row)
            print(json.dumps(out))
            """
        let places = String(decoding: try JSONSerialization.data(withJSONObject: Self.places.map { [$0.0, $0.1] }), as: UTF8.self)
        let names = String(decoding: try JSONSerialization.data(withJSONObject: Self.events.map(\.astral)), as: UTF8.self)
        let pipe = Pipe()
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["python3", "-c", script, places, names]
        p.standardOutput = pipe
        try p.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        try #require(p.terminationStatus == 0, "astral (pip install astral) did not run")
        let rows = try #require(try JSONSerialization.jsonObject(with: data) as? [[Any]])
        let utc = TimeZone(identifier: "UTC")!
        var compared = 0, worst = 0.0, disagreements: [String] = []
        for (i, place) in Self.places.enumerated() {
            let sun = SolarTimes(latitude: place.0, longitude: place.1)
            for day in 0..<365 {
                let date = Date(timeIntervalSince1970: 1_767_225_600 + Double(day) * 86_400)
                let comps = Calendar(identifier: .gregorian).dateComponents(in: utc, from: date)
                let row = rows[i * 365 + day]
                for (j, event) in Self.events.enumerated() {
                    let theirs = row[j] as? Double
                    let ours = sun.time(of: event.ours, on: DateComponents(year: comps.year, month: comps.month, day: comps.day), in: utc)?.timeIntervalSince1970
                    switch (theirs, ours) {
                    case let (t?, o?):
                        compared += 1
                        worst = max(worst, abs(t - o))
                        if abs(t - o) > 60 { disagreements.append("\(place) day \(day) \(event.ours): \(o - t) s") }
                    case (nil, nil): break
                    default: disagreements.append("\(place) day \(day) \(event.ours): astral \(theirs.map { "\($0)" } ?? "none"), ours \(ours.map { "\($0)" } ?? "none")")
                    }
                }
            }
        }
        #expect(compared > 130_000)
        #expect(disagreements.isEmpty, "\(disagreements.count) disagreements, e.g. \(disagreements.prefix(5)); worst \(worst) s")
    }

    static func schedule(_ zone: String, _ windows: [RecordingSchedule.Window], location: SolarTimes? = nil) -> RecordingSchedule {
        RecordingSchedule(zone: TimeZone(identifier: zone)!, location: location, windows: windows)
    }

    static func point(_ text: String) -> RecordingSchedule.Point { try! RecordingSchedule.Point.parse(text) }

    static func utc(_ text: String) -> Date { ISO8601DateFormatter().date(from: text)! }

    @Test("across daylight-saving changes, Europe and America: a skipped time begins when the clock passes it, a doubled one the first time, a night window lasts its real length")
    func daylightSaving() {
        // Amsterdam, 2026-03-29: 02:00 CET becomes 03:00 CEST (01:00 UTC).
        let spring = Self.schedule("Europe/Amsterdam", [.init(from: Self.point("02:30"), to: Self.point("04:00"))])
        let s = spring.occurrences(after: Self.utc("2026-03-28T23:00:00Z"), count: 1).occurrences
        #expect(s.first?.start == Self.utc("2026-03-29T01:00:00Z") && s.first?.end == Self.utc("2026-03-29T02:00:00Z"), "\(s)")
        // 2026-10-25: 03:00 CEST becomes 02:00 CET; 02:30 happens twice: the first (00:30 UTC).
        let autumn = Self.schedule("Europe/Amsterdam", [.init(from: Self.point("02:30"), to: Self.point("02:45"))])
        let a = autumn.occurrences(after: Self.utc("2026-10-24T22:00:00Z"), count: 1).occurrences
        #expect(a.first?.start == Self.utc("2026-10-25T00:30:00Z") && a.first?.end == Self.utc("2026-10-25T00:45:00Z"), "\(a)")
        // A night window across the autumn change lasts 9 h, across the spring one 7 h.
        let night = Self.schedule("Europe/Amsterdam", [.init(from: Self.point("22:00"), to: Self.point("06:00"))])
        let n1 = night.occurrences(after: Self.utc("2026-10-24T12:00:00Z"), count: 1).occurrences[0]
        #expect(n1.end.timeIntervalSince(n1.start) == 9 * 3600)
        let n2 = night.occurrences(after: Self.utc("2026-03-28T12:00:00Z"), count: 1).occurrences[0]
        #expect(n2.end.timeIntervalSince(n2.start) == 7 * 3600)
        // New York, 2026-03-08 (02:00 EST becomes 03:00 EDT) and 2026-11-01 (02:00 EDT becomes 01:00 EST).
        let ny = Self.schedule("America/New_York", [.init(from: Self.point("02:15"), to: Self.point("03:30"))])
        let m = ny.occurrences(after: Self.utc("2026-03-08T00:00:00Z"), count: 1).occurrences[0]
        #expect(m.start == Self.utc("2026-03-08T07:00:00Z") && m.end == Self.utc("2026-03-08T07:30:00Z"), "\(m)")
        let ny2 = Self.schedule("America/New_York", [.init(from: Self.point("01:30"), to: Self.point("01:45"))])
        let o = ny2.occurrences(after: Self.utc("2026-11-01T00:00:00Z"), count: 1).occurrences[0]
        #expect(o.start == Self.utc("2026-11-01T05:30:00Z"), "the first 01:30, EDT: \(o)")
        // An ordinary day after: whole hours again.
        let after = ny2.occurrences(after: Self.utc("2026-11-02T00:00:00Z"), count: 1).occurrences[0]
        #expect(after.start == Self.utc("2026-11-02T06:30:00Z"))
    }

    @Test("weekdays, every other day, a duty cycle, overlapping windows merged, and a polar day skipped and said")
    func windows() throws {
        let zone = "Europe/Amsterdam"
        var weekdays = RecordingSchedule.Window(from: Self.point("06:00"), to: Self.point("09:00"))
        weekdays.days = [2, 3, 4, 5, 6]
        let s = Self.schedule(zone, [weekdays])
        // 2026-11-28 is a Saturday: the next is Monday the 30th.
        let next = s.occurrences(after: Self.utc("2026-11-28T12:00:00Z"), count: 2).occurrences
        #expect(next.map(\.start) == [Self.utc("2026-11-30T05:00:00Z"), Self.utc("2026-12-01T05:00:00Z")])
        var other = RecordingSchedule.Window(from: Self.point("12:00"), to: Self.point("13:00"))
        other.everyDays = 2
        let o = Self.schedule(zone, [other]).occurrences(after: Self.utc("2026-11-28T00:00:00Z"), count: 3).occurrences
        #expect(zip(o, o.dropFirst()).allSatisfy { $1.start.timeIntervalSince($0.start) == 2 * 86_400 })
        var duty = Self.schedule(zone, [.init(from: Self.point("06:00"), to: Self.point("06:20"))])
        duty.dutyRecord = 60
        duty.dutyEvery = 300
        let d = duty.occurrences(after: Self.utc("2026-11-30T00:00:00Z"), count: 5).occurrences
        #expect(d.map { $0.end.timeIntervalSince($0.start) } == [60, 60, 60, 60, 60])
        #expect(d.map { $0.start.timeIntervalSince(d[0].start) } == [0, 300, 600, 900, 86_400])
        let merged = Self.schedule(zone, [.init(from: Self.point("06:00"), to: Self.point("08:00")), .init(from: Self.point("07:00"), to: Self.point("09:00"))])
        let m = merged.occurrences(after: Self.utc("2026-11-30T00:00:00Z"), count: 1).occurrences[0]
        #expect(m.end.timeIntervalSince(m.start) == 3 * 3600)
        // Longyearbyen (78° N) in June: no sunset; the window is skipped and said.
        let polar = Self.schedule("Arctic/Longyearbyen", [.init(from: Self.point("sunset"), to: Self.point("sunset+1h"))],
                                  location: SolarTimes(latitude: 78.22, longitude: 15.65))
        let (found, skipped) = polar.occurrences(after: Self.utc("2026-06-20T00:00:00Z"), count: 1)
        #expect(found.first.map { $0.start > Self.utc("2026-08-01T00:00:00Z") } == true, "the first sunset after the midnight sun: \(found)")
        #expect(skipped.first?.reason.contains("the sun does not reach sunset that day at 78.22° north") == true, "\(skipped.prefix(1))")
        // The sun's windows with offsets, against the sun's own time.
        let amsterdam = SolarTimes(latitude: 52.37, longitude: 4.90)
        let dawn = Self.schedule(zone, [.init(from: Self.point("sunrise-1h"), to: Self.point("sunrise+2h"))], location: amsterdam)
        let w = dawn.occurrences(after: Self.utc("2026-06-21T00:00:00Z"), count: 1).occurrences[0]
        let sunrise = try #require(amsterdam.time(of: .sunrise, on: DateComponents(year: 2026, month: 6, day: 21), in: TimeZone(identifier: zone)!))
        #expect(w.start == sunrise.addingTimeInterval(-3600) && w.end == sunrise.addingTimeInterval(7200))
    }

    @Test("the config's schedule: read with its lines; mistakes named with what to write")
    func parsing() {
        let (schedule, problems) = RecordingSchedule.parse(
            values: ["timezone": .init("Europe/Amsterdam", line: 2), "location.latitude": .init("52.37", line: 3), "location.longitude": .init("4.90", line: 3)],
            windows: [(line: 5, values: ["days": .init("mon, tue", line: 5), "from": .init("06:00", line: 5), "to": .init("09:00", line: 5)]),
                      (line: 6, values: ["from": .init("civil-dusk", line: 6), "to": .init("civil-dusk+30m", line: 6), "every": .init("2d", line: 6)])],
            file: "config.yaml")
        #expect(problems == [])
        #expect(schedule?.windows.count == 2 && schedule?.windows[0].days == [2, 3] && schedule?.windows[1].everyDays == 2)
        let (none, said) = RecordingSchedule.parse(
            values: ["timezone": .init("Mars/Olympus", line: 2)],
            windows: [(line: 4, values: ["from": .init("sunrise-1h", line: 4), "to": .init("25:00", line: 4)]),
                      (line: 5, values: ["from": .init("06:00", line: 5)])],
            file: "config.yaml")
        #expect(none == nil)
        #expect(said.count == 3, "\(said)")
        #expect(said.contains { $0.hasPrefix("config.yaml:2: schedule.timezone: \"Mars/Olympus\" is not a time zone") })
        #expect(said.contains { $0.contains("config.yaml:4: schedule.windows[1]: \"25:00\" is not a time of day") })
        #expect(said.contains { $0.contains("config.yaml:5: schedule.windows[2]: give from and to") })
    }
}
