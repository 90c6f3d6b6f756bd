import ArgumentParser
import Foundation
import TapedeckApp
import TapedeckAssembly
import TapedeckCore

/// `tapedeck schedule`: the stretches the config's `schedule:` records next.
struct ScheduleCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "schedule",
        abstract: "Show when the config's schedule: records next, in the schedule's time zone and in UTC.",
        discussion: """
            The schedule's windows are clock times (06:00) or the sun's times at \
            schedule.location (sunrise, sunset, noon, civil-, nautical- and astronomical-dawn and \
            -dusk) with an offset (sunrise-1h), on some weekdays (days:) or every N days (every: \
            2d), with a duty cycle inside them (duty-cycle: { record: 1m, every: 5m }). A window \
            whose sun event does not happen that day (polar day or night) is skipped and said. \
            `tapedeck record --schedule` records them, waiting between them.
            """ + HelpExamples.text([
                "tapedeck schedule --next 10": "The next ten stretches.",
                "tapedeck schedule --from 2027-03-28T00:00 --next 3": "Around a change to summer time.",
            ]))

    @Option(help: ArgumentHelp("How many stretches to show.", valueName: "n"))
    var next = 5

    @Option(help: ArgumentHelp("Show from this time (YYYY-MM-DDTHH:MM, in the schedule's zone) instead of now.", valueName: "time"))
    var from: String?

    @Flag(help: "Print them as JSON (docs/JSON.md, \"schedule\").")
    var json = false

    @OptionGroup var global: GlobalOptions

    func validate() throws {
        guard (1...1000).contains(next) else { throw ValidationError("--next \(next): give 1 to 1000.") }
    }

    @MainActor
    func run() async throws {
        try await reportingErrors {
            let studio = try global.makeStudioWithoutLibrary()
            guard let schedule = studio.configuration.schedule else {
                throw TapedeckError(.configuration, "No schedule is configured\(studio.configPlace). Add a schedule: section, e.g. schedule: { timezone: Europe/Amsterdam, windows: [ { from: \"06:00\", to: \"09:00\" } ] }; `tapedeck config example` shows every key.")
            }
            let start = try from.map { try ClockTime.parse($0, flag: "--from", zone: schedule.zone) } ?? Date()
            let (stretches, skipped) = schedule.occurrences(after: start, count: next)
            if json {
                try Terminal.printJSON(ScheduleJSON(schedule, stretches: stretches, skipped: skipped))
                return
            }
            let place = schedule.location.map { String(format: " at %.2f° %@, %.2f° %@", abs($0.latitude), $0.latitude >= 0 ? "N" : "S", abs($0.longitude), $0.longitude >= 0 ? "E" : "W") } ?? ""
            print("Schedule in \(schedule.zone.identifier)\(place); windows:")
            let dayNames = ["", "sun", "mon", "tue", "wed", "thu", "fri", "sat"]
            for (index, window) in schedule.windows.enumerated() {
                // Monday first.
                let order: [Int] = window.days.sorted { (a: Int, b: Int) -> Bool in (a + 5) % 7 < (b + 5) % 7 }
                let days = order.isEmpty ? "" : order.map { dayNames[$0] }.joined(separator: ", ") + " "
                let every = window.everyDays > 1 ? ", every \(window.everyDays) days" : ""
                print("  \(index + 1). \(days)\(window.from) to \(window.to)\(every)")
            }
            if let record = schedule.dutyRecord, let every = schedule.dutyEvery {
                print("  Inside them: \(RetentionClock.duration(record)) every \(RetentionClock.duration(every)).")
            }
            print("Next:")
            for s in stretches {
                let now = s.start <= start ? "  (now)" : ""
                let begins = Self.local(s.start, schedule.zone, zoneName: false)
                print("  \(begins) → \(Self.local(s.end, schedule.zone, dayIfOther: s.start)) (\(Self.utc(s.start)) → \(Self.utc(s.end)) UTC) window \(s.window + 1)\(now)")
            }
            if stretches.isEmpty { print("  Nothing in the next 400 days.") }
            for skip in skipped {
                print("Skipped \(String(format: "%04d-%02d-%02d", skip.day.year ?? 0, skip.day.month ?? 0, skip.day.day ?? 0)), window \(skip.window + 1): \(skip.reason).")
            }
        }
    }

    /// `Sun 2026-11-29 17:12:30 CET`, or `17:12:30 CET` on the same day as `other`.
    static func local(_ date: Date, _ zone: TimeZone, dayIfOther other: Date? = nil, zoneName: Bool = true) -> String {
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.timeZone = zone
        var cal = Calendar(identifier: .gregorian)
        cal.timeZone = zone
        f.dateFormat = other.map { cal.isDate($0, inSameDayAs: date) } == true ? "HH:mm:ss" : "EEE yyyy-MM-dd HH:mm:ss"
        return f.string(from: date) + (zoneName ? " " + (zone.abbreviation(for: date) ?? zone.identifier) : "")
    }

    /// `16:12:30` in UTC (the day is the local one's, or the one before or after).
    static func utc(_ date: Date) -> String {
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.timeZone = TimeZone(identifier: "UTC")
        f.dateFormat = "HH:mm:ss"
        return f.string(from: date)
    }
}

/// `schedule --json`.
struct ScheduleJSON: Encodable {
    struct Stretch: Encodable {
        var start: String
        var end: String
        var window: Int
    }
    struct Skipped: Encodable {
        var day: String
        var window: Int
        var reason: String
    }
    var kind = "schedule"
    var schema = JSONSchema.version
    var timezone: String
    var stretches: [Stretch]
    var skipped: [Skipped]

    init(_ schedule: RecordingSchedule, stretches: [RecordingSchedule.Occurrence], skipped: [RecordingSchedule.Skip]) {
        timezone = schedule.zone.identifier
        let f = ISO8601DateFormatter()
        f.timeZone = schedule.zone
        f.formatOptions = [.withInternetDateTime]
        self.stretches = stretches.map { Stretch(start: f.string(from: $0.start), end: f.string(from: $0.end), window: $0.window + 1) }
        self.skipped = skipped.map { Skipped(day: String(format: "%04d-%02d-%02d", $0.day.year ?? 0, $0.day.month ?? 0, $0.day.day ?? 0), window: $0.window + 1, reason: $0.reason) }
    }
}
