import Foundation
import TapedeckCore

extension RecordingSchedule {
    /// The keys of `schedule:` (outside `windows:`), and of each window.
    public static let keys = ["timezone", "location.latitude", "location.longitude", "duty-cycle.record", "duty-cycle.every"]
    public static let windowKeys = ["from", "to", "days", "every"]

    /// One value of the config with its line.
    public struct Text: Sendable, Hashable {
        public var value: String
        public var line: Int?
        public init(_ value: String, line: Int?) {
            self.value = value
            self.line = line
        }
    }

    /// Reads the `schedule:` section: `values` its keys (without `schedule.`), `windows` its list's
    /// entries. Returns the schedule (`nil` when there are problems or no windows) and a sentence
    /// for each problem (`FILE:LINE: schedule…: …`). - Thread: any. Never blocks.
    public static func parse(values: [String: Text], windows: [(line: Int?, values: [String: Text])], file: String) -> (RecordingSchedule?, [String]) {
        var problems: [String] = []
        func place(_ line: Int?) -> String { line.map { "\(file):\($0)" } ?? file }
        for (key, text) in values.sorted(by: { $0.key < $1.key }) where !keys.contains(key) {
            let guess = Suggestion.closest(to: key, in: keys).map { " (did you mean \"\($0)\"?)" } ?? ""
            problems.append("\(place(text.line)): schedule.\(key): unknown setting\(guess). Accepted here: timezone, location (latitude, longitude), windows, duty-cycle (record, every).")
        }
        var zone = TimeZone.current
        if let text = values["timezone"] {
            if let z = TimeZone(identifier: text.value.trimmingSpaces.description) { zone = z } else {
                problems.append("\(place(text.line)): schedule.timezone: \"\(text.value)\" is not a time zone. Give a name of the tz database, e.g. Europe/Amsterdam or America/New_York (timedatectl list-timezones lists them).")
            }
        }
        var location: SolarTimes?
        let lat = values["location.latitude"], lon = values["location.longitude"]
        if lat != nil || lon != nil {
            let la = lat.flatMap { Double($0.value.trimmingSpaces) }, lo = lon.flatMap { Double($0.value.trimmingSpaces) }
            if let la, let lo, (-90...90).contains(la), (-180...180).contains(lo) {
                location = SolarTimes(latitude: la, longitude: lo)
            } else {
                problems.append("\(place(lat?.line ?? lon?.line)): schedule.location: give latitude (-90 to 90, north positive) and longitude (-180 to 180, east positive) in degrees, e.g. { latitude: 52.37, longitude: 4.90 }.")
            }
        }
        var parsed: [Window] = []
        for (index, entry) in windows.enumerated() {
            let label = "schedule.windows[\(index + 1)]"
            for (key, text) in entry.values.sorted(by: { $0.key < $1.key }) where !windowKeys.contains(key) {
                problems.append("\(place(text.line)): \(label).\(key): unknown setting. A window takes from, to, and optionally days and every.")
            }
            guard let fromText = entry.values["from"], let toText = entry.values["to"] else {
                problems.append("\(place(entry.line)): \(label): give from and to, e.g. { from: \"06:00\", to: \"09:00\" } or { from: sunrise-1h, to: sunrise+2h }.")
                continue
            }
            var window: Window?
            do {
                window = Window(from: try Point.parse(fromText.value), to: try Point.parse(toText.value), line: entry.line)
            } catch let error as TapedeckError {
                problems.append("\(place(fromText.line)): \(label): \(error.message)")
            } catch {}
            guard var w = window else { continue }
            if case .sun = w.from.base, location == nil {
                problems.append("\(place(entry.line)): \(label): \(w.from) needs schedule.location (latitude and longitude).")
            } else if case .sun = w.to.base, location == nil {
                problems.append("\(place(entry.line)): \(label): \(w.to) needs schedule.location (latitude and longitude).")
            }
            if let text = entry.values["days"] {
                let names = ["sun": 1, "mon": 2, "tue": 3, "wed": 4, "thu": 5, "fri": 6, "sat": 7]
                for word in text.value.split(separator: ",").map({ String($0.trimmingSpaces.lowercased().prefix(3)) }) where !word.isEmpty {
                    if let d = names[word] { w.days.insert(d) } else {
                        problems.append("\(place(text.line)): \(label).days: \"\(word)\" is not a weekday. Give mon, tue, wed, thu, fri, sat, sun.")
                    }
                }
            }
            if let text = entry.values["every"] {
                let t = text.value.trimmingSpaces.lowercased()
                if t.hasSuffix("d"), let n = Int(t.dropLast()), (1...366).contains(n) { w.everyDays = n } else {
                    problems.append("\(place(text.line)): \(label).every: \"\(text.value)\" is not a number of days. Give e.g. 2d (every other day).")
                }
            }
            parsed.append(w)
        }
        var dutyRecord: Double?, dutyEvery: Double?
        if let r = values["duty-cycle.record"], let e = values["duty-cycle.every"] {
            dutyRecord = try? DurationText.seconds(r.value, flag: "schedule.duty-cycle.record")
            dutyEvery = try? DurationText.seconds(e.value, flag: "schedule.duty-cycle.every")
            if dutyRecord == nil || dutyEvery == nil || dutyRecord! < 1 || dutyEvery! < dutyRecord! {
                problems.append("\(place(r.line)): schedule.duty-cycle: give record and every as durations, record no longer than every, e.g. { record: 1m, every: 5m }.")
            }
        } else if let one = values["duty-cycle.record"] ?? values["duty-cycle.every"] {
            problems.append("\(place(one.line)): schedule.duty-cycle: give both record and every, e.g. { record: 1m, every: 5m }.")
        }
        if parsed.isEmpty && windows.isEmpty && (!values.isEmpty) {
            problems.append("\(file): schedule: no windows. Give windows: [ { from: \"06:00\", to: \"09:00\" } ].")
        }
        guard problems.isEmpty, !parsed.isEmpty else { return (nil, problems) }
        return (RecordingSchedule(zone: zone, location: location, windows: parsed, dutyRecord: dutyRecord, dutyEvery: dutyEvery), problems)
    }
}
