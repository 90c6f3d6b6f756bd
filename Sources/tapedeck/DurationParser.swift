import TapedeckCore

/// Parses durations such as `5s`, `2m`, `1h`, `1m30s`, `250ms` or a bare number of seconds.
enum DurationParser {
    static func seconds(_ text: String) throws -> Double {
        let units: [(String, Double)] = [("ms", 0.001), ("h", 3600), ("m", 60), ("s", 1)]
        var rest = Substring(text.trimmingSpaces.lowercased())
        guard !rest.isEmpty else { throw invalid(text) }
        if let plain = Double(rest) {
            guard plain > 0, plain.isFinite, plain < 366 * 86400 else { throw invalid(text) }
            return plain
        }
        var total = 0.0
        while !rest.isEmpty {
            let number = rest.prefix { $0.isNumber || $0 == "." }
            guard !number.isEmpty, let value = Double(number) else { throw invalid(text) }
            rest = rest.dropFirst(number.count)
            guard let (unit, scale) = units.first(where: { rest.hasPrefix($0.0) }) else { throw invalid(text) }
            rest = rest.dropFirst(unit.count)
            total += value * scale
        }
        guard total > 0, total.isFinite, total < 366 * 86400 else { throw invalid(text) }
        return total
    }

    private static func invalid(_ text: String) -> TapedeckError {
        TapedeckError(.invalidArgument, "--duration \(text): not a duration. Use e.g. 5s, 2m, 1h, 1m30s or 250ms (at most a year).")
    }
}

import Foundation
