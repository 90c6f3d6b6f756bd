import TapedeckCore

/// File sizes as people type them, in GNU coreutils' convention (`dd`, `split`, `truncate`): a
/// bare number of bytes, `K`, `M`, `G`, `T` (also `KiB`…`TiB`) for powers of 1024 and `KB`, `MB`,
/// `GB`, `TB` for powers of 1000; case-insensitive, fractions allowed (`1.5G`). Plain
/// functions; any thread, never block.
public enum ByteCountText {
    /// The bytes `text` names.
    /// - Parameters:
    ///   - text: the size as typed, e.g. `2G` or `1000000`.
    ///   - flag: how messages name the option, e.g. `--split-size`.
    /// - Throws: `.invalidArgument` naming the forms accepted.
    public static func bytes(_ text: String, flag: String) throws -> Int64 {
        let trimmed = text.trimmingSpaces.lowercased()
        let digits = trimmed.prefix { $0.isNumber || $0 == "." }
        let unit = trimmed.dropFirst(digits.count).trimmingSpaces
        let multipliers: [String: Double] = [
            "": 1, "b": 1,
            "k": 1024, "kib": 1024, "kb": 1000,
            "m": 1_048_576, "mib": 1_048_576, "mb": 1e6,
            "g": 1_073_741_824, "gib": 1_073_741_824, "gb": 1e9,
            "t": 1_099_511_627_776, "tib": 1_099_511_627_776, "tb": 1e12,
        ]
        guard let number = Double(digits), number.isFinite, let multiplier = multipliers[String(unit)],
              case let value = (number * multiplier).rounded(), value >= 1, value < 1e18 else {
            throw TapedeckError(.invalidArgument,
                "\(flag) \(text): not a size. Use bytes (1000000), or a number with K, M, G or T (powers of 1024, as 2G or 2GiB) or KB, MB, GB or TB (powers of 1000).")
        }
        return Int64(value)
    }
}
