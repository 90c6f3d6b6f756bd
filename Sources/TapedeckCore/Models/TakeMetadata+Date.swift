public import Foundation

extension TakeMetadata {
    /// ``startDate`` as the DATE tag of a file carries it: ISO 8601 in UTC, to the second
    /// (`2023-11-14T22:13:20Z`), the same text as `Date.ISO8601Format()`.
    ///
    /// Made by ``UTCTimestamp``, not Foundation's calendar: a writer is created when a recording
    /// starts, and loading a calendar there costs milliseconds of start-up.
    /// - Thread: any. Never blocks.
    public var startDateISO8601: String { startDate.iso8601UTC }
}

extension Date {
    /// This date as ISO 8601 in UTC, to the second (`2023-11-14T22:13:20Z`), the same text as
    /// `ISO8601Format()`.
    ///
    /// Made by ``UTCTimestamp``, not Foundation's calendar: writers and `--json` reports need it
    /// when a command starts or ends, and loading a calendar costs milliseconds.
    /// - Thread: any. Never blocks.
    public var iso8601UTC: String { UTCTimestamp.seconds(self) }
}

/// `value` in decimal with leading zeros up to `width` characters, a minus sign included
/// (`zeroPadded(7, width: 3)` is `"007"`, as `String(format: "%03d", 7)`), without
/// `String(format:)`, whose first use costs a scan of every protocol conformance in the program.
/// - Thread: any. Never blocks.
public func zeroPadded(_ value: Int, width: Int) -> String {
    let digits = String(value.magnitude)
    let sign = value < 0 ? "-" : ""
    return sign + String(repeating: "0", count: max(0, width - sign.count - digits.count)) + digits
}

extension TakeMetadata {
    /// The tags a file with Vorbis comments (FLAC, Opus) carries, in file order: TITLE, ALBUM,
    /// TRACKNUMBER, DATE, DESCRIPTION (when there are notes), then the user's ``tags`` sorted by
    /// name. A user tag with a standard tag's name replaces it; an empty one (the ALBUM of a file
    /// recorded outside the library) is left out.
    /// - Thread: any; never blocks.
    public var commentFields: [(String, String)] {
        var fields = [("TITLE", takeName), ("ALBUM", sessionName), ("TRACKNUMBER", String(takeNumber)), ("DATE", startDateISO8601)]
        if !notes.isEmpty { fields.append(("DESCRIPTION", notes)) }
        let user = Dictionary(tags.map { ($0.key.uppercased(), $0.value) }) { _, last in last }
        fields = fields.map { name, value in (name, user[name] ?? value) }
        let standard = Set(fields.map(\.0))
        fields += user.filter { !standard.contains($0.key) }.sorted { $0.key < $1.key }
        return fields.filter { !$0.1.isEmpty }
    }
}
