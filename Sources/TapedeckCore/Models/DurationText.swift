
/// Durations as people type them, the forms arecord, sox and ffmpeg users know: a bare number of
/// seconds (`5`, `2.5`), units (`5s`, `250ms`, `2m`, `1h30m`, `1m30s`), a unit followed by a
/// bare number of the next smaller unit (`1h30` is 1 h 30 min, `2m15` is 2 min 15 s), and clock
/// forms (`00:05`, `1:30`, `01:02:03.5`). Plain functions; any thread, never block.
public enum DurationText {
    /// The longest duration accepted: a year.
    public static let limit = 366.0 * 86_400

    /// The seconds `text` names.
    /// - Parameters:
    ///   - text: the duration as typed, e.g. `5s`, `1h30` or `01:02:03.5`.
    ///   - flag: how messages name the option, e.g. `-d/--duration`.
    ///   - allowingZero: `0` is a time (`play -s 0`), not only a length.
    /// - Throws: `.invalidArgument` naming the forms accepted.
    public static func seconds(_ text: String, flag: String = "--duration", allowingZero: Bool = false) throws -> Double {
        let trimmed = text.trimmingSpaces.lowercased()
        let value: Double? = trimmed.contains(":") ? clock(trimmed) : units(Substring(trimmed))
        if let value, value == 0, !allowingZero {
            throw TapedeckError(.invalidArgument, "\(flag) \(text): a length must be more than zero.")
        }
        guard let value, value >= 0, value.isFinite, value < limit else {
            throw TapedeckError(.invalidArgument,
                "\(flag) \(text): not a duration. Use seconds (5, 2.5), units (5s, 250ms, 2m, 1h30m, 1h30) or a clock (00:05, 01:02:03.5), at most a year.")
        }
        return value
    }

    /// `MM:SS[.f]` or `HH:MM:SS[.f]`: every part but the first below 60.
    static func clock(_ text: String) -> Double? {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        guard (2...3).contains(parts.count) else { return nil }
        var total = 0.0
        for (i, part) in parts.enumerated() {
            let isLast = i == parts.count - 1
            guard !part.isEmpty, part.allSatisfy({ $0.isNumber || (isLast && $0 == ".") }), let v = Double(part) else { return nil }
            if i > 0 { guard v < 60 else { return nil } }
            total = total * 60 + v
        }
        return total
    }

    /// A bare number, or numbers with units; a bare number after a unit counts in the next
    /// smaller unit.
    static func units(_ text: Substring) -> Double? {
        guard !text.isEmpty else { return nil }
        if text.allSatisfy({ $0.isNumber || $0 == "." }) { return Double(text) }
        let units: [(String, Double)] = [("ms", 0.001), ("h", 3600), ("m", 60), ("s", 1)]
        var rest = text
        var total = 0.0
        var lastScale: Double?
        while !rest.isEmpty {
            let number = rest.prefix { $0.isNumber || $0 == "." }
            guard !number.isEmpty, let value = Double(number) else { return nil }
            rest = rest.dropFirst(number.count)
            if rest.isEmpty {
                // `1h30`, `2m15`: the next smaller unit after the last one given.
                guard let last = lastScale, last == 3600 || last == 60 else { return nil }
                return total + value * last / 60
            }
            guard let (unit, scale) = units.first(where: { rest.hasPrefix($0.0) }) else { return nil }
            // Each unit once, largest first: `1h1h` or `5s2m` is a typo, not 2 h.
            if let last = lastScale, scale >= last { return nil }
            rest = rest.dropFirst(unit.count)
            total += value * scale
            lastScale = scale
        }
        return total
    }
}
