import Foundation
public import TapedeckCore

/// Programmes as a user writes them: `record --program "News 09:00-09:10 pad 2m mon-fri"`, and
/// the entries of `programs:` in the config (`{ name: News, time: 09:00-09:10, pad: 2m, days:
/// mon-fri }`). Pure functions; any thread, never blocks.
extension ProgramRule {
    /// The programme as `--program` reads it: `News 09:00-09:10 pad 2m mon,tue,wed,thu,fri`.
    public var text: String {
        let clock = { (s: Int) in RecordingSchedule.Point(base: .clock(seconds: s % 86_400), offset: 0).description }
        var t = "\(name) \(clock(start))-\(clock(end))"
        if padSeconds > 0 { t += " pad " + (padSeconds.truncatingRemainder(dividingBy: 60) == 0 ? "\(Int(padSeconds) / 60)m" : String(format: "%gs", padSeconds)) }
        let names = [1: "sun", 2: "mon", 3: "tue", 4: "wed", 5: "thu", 6: "fri", 7: "sat"]
        if !days.isEmpty { t += " " + [2, 3, 4, 5, 6, 7, 1].filter(days.contains).compactMap { names[$0] }.joined(separator: ",") }
        return t
    }

    /// The keys of a `programs:` entry.
    public static let keys = ["name", "time", "pad", "days"]

    /// Reads `NAME HH:MM-HH:MM [pad DURATION] [days] ` for `flag`.
    /// - Throws: `.invalidArgument` with the form it reads.
    public static func parse(_ text: String, flag: String = "--program") throws -> ProgramRule {
        let form = "Give NAME START-END [pad DURATION] [DAYS], e.g. \(flag) \"News 09:00-09:10 pad 2m mon-fri\"."
        let words = text.split(whereSeparator: \.isWhitespace).map(String.init)
        guard let at = words.firstIndex(where: { $0.contains(":") && $0.contains("-") }) else {
            throw TapedeckError(.invalidArgument, "\(flag) \"\(text)\": no START-END time. \(form)")
        }
        let name = words[..<at].joined(separator: " ")
        guard !name.isEmpty else { throw TapedeckError(.invalidArgument, "\(flag) \"\(text)\": the programme has no name. \(form)") }
        var rule = try clock(words[at], name: name, flag: flag)
        var rest = words[(at + 1)...]
        while let word = rest.first {
            rest = rest.dropFirst()
            if word.lowercased() == "pad" {
                guard let value = rest.first else { throw TapedeckError(.invalidArgument, "\(flag) \"\(text)\": pad needs a duration, e.g. pad 2m.") }
                rest = rest.dropFirst()
                rule.padSeconds = try pad(value, flag: flag)
            } else if word.lowercased() == "days", let value = rest.first {
                rest = rest.dropFirst()
                rule.days = try days(value, flag: flag)
            } else {
                do {
                    rule.days = try days(word, flag: flag)
                } catch {
                    throw TapedeckError(.invalidArgument, "\(flag) \"\(text)\": \"\(word)\" is neither pad DURATION nor weekdays. \(form)")
                }
            }
        }
        return rule
    }

    /// `09:00-09:10`, `23:00-01:00` (over midnight), `09:00:30-09:10`.
    static func clock(_ text: String, name: String, flag: String) throws -> ProgramRule {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 2, let from = try? RecordingSchedule.Point.parse(String(parts[0])), let to = try? RecordingSchedule.Point.parse(String(parts[1])),
              case .clock(let start) = from.base, case .clock(let end) = to.base else {
            throw TapedeckError(.invalidArgument, "\(flag): \"\(text)\" is not START-END on the clock. Give e.g. 09:00-09:10 (23:00-01:00 goes past midnight).")
        }
        guard start != end else { throw TapedeckError(.invalidArgument, "\(flag): \"\(text)\" starts when it ends. Give a programme that lasts.") }
        // Its takes are named "NAME YYYY-MM-DD HH.MM": a name no take could have is refused now, not at the programme's start.
        _ = try NameRules.validate(name + " 2026-01-01 00.00", what: "programme")
        return ProgramRule(name: name, start: start, end: end)
    }

    /// A padding: a duration up to ``longestPad``.
    static func pad(_ text: String, flag: String) throws -> Double {
        let seconds = try DurationText.seconds(text, flag: "\(flag) pad", allowingZero: true)
        guard seconds <= longestPad else { throw TapedeckError(.invalidArgument, "\(flag): pad \(text) is more than an hour. Give 1h or less.") }
        return seconds
    }

    /// `mon-fri`, `sat,sun`, `mon,wed-fri`, `daily` as `Calendar` weekdays (1 Sunday … 7 Saturday).
    static func days(_ text: String, flag: String) throws -> Set<Int> {
        let names = ["sun": 1, "mon": 2, "tue": 3, "wed": 4, "thu": 5, "fri": 6, "sat": 7]
        if ["daily", "every-day", "all"].contains(text.lowercased()) { return [] }
        var days: Set<Int> = []
        for item in text.lowercased().split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) where !item.isEmpty {
            let ends = item.split(separator: "-").map { names[String($0.trimmingCharacters(in: .whitespaces).prefix(3))] }
            guard (1...2).contains(ends.count), ends.allSatisfy({ $0 != nil }) else {
                throw TapedeckError(.invalidArgument, "\(flag): \"\(item)\" is not a weekday. Give mon, tue, wed, thu, fri, sat, sun, ranges (mon-fri) or lists (sat,sun).")
            }
            var d = ends[0]!
            days.insert(d)
            // A range goes round the week: fri-mon is fri, sat, sun, mon.
            while d != ends[ends.count - 1]! {
                d = d % 7 + 1
                days.insert(d)
            }
        }
        return days
    }

    /// The entries of `programs:` (each key's value with its line): the rules, and a sentence
    /// for each problem (`FILE:LINE: programs[N]…: …`).
    public static func parse(entries: [(line: Int?, values: [String: RecordingSchedule.Text])], file: String) -> ([ProgramRule], [String]) {
        var rules: [ProgramRule] = []
        var problems: [String] = []
        func place(_ line: Int?) -> String { line.map { "\(file):\($0)" } ?? file }
        for (index, entry) in entries.enumerated() {
            let label = "programs[\(index + 1)]"
            for (key, text) in entry.values.sorted(by: { $0.key < $1.key }) where !keys.contains(key) {
                let guess = Suggestion.closest(to: key, in: keys).map { " (did you mean \"\($0)\"?)" } ?? ""
                problems.append("\(place(text.line)): \(label).\(key): unknown setting\(guess). A programme takes name, time, and optionally pad and days.")
            }
            guard let name = entry.values["name"], !name.value.trimmingSpaces.isEmpty, let time = entry.values["time"] else {
                problems.append("\(place(entry.line)): \(label): give name and time, e.g. { name: News, time: \"09:00-09:10\", pad: 2m, days: mon-fri }.")
                continue
            }
            do {
                var rule = try clock(time.value.trimmingSpaces.description, name: String(name.value.trimmingSpaces), flag: "\(label).time")
                if let pad = entry.values["pad"] { rule.padSeconds = try Self.pad(pad.value.trimmingSpaces.description, flag: label) }
                if let days = entry.values["days"] { rule.days = try Self.days(days.value.trimmingSpaces.description, flag: "\(label).days") }
                rules.append(rule)
            } catch let error as TapedeckError {
                problems.append("\(place(entry.line)): \(error.message)")
            } catch {}
        }
        return (rules, problems)
    }
}
