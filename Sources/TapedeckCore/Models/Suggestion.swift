/// "Did you mean …?" for misspelt keys, commands, names and devices.
/// - Thread: any; never blocks.
public enum Suggestion {
    /// The candidate closest to `word` by edit distance, if it is close enough to be a likely typo.
    public static func closest(to word: String, in candidates: [String]) -> String? {
        let scored = candidates.map { ($0, distance(word.lowercased(), $0.lowercased())) }
        guard let best = scored.min(by: { $0.1 < $1.1 }) else { return nil }
        return best.1 <= max(2, word.count / 3) ? best.0 : nil
    }

    /// Levenshtein distance.
    public static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var prev = Array(0...b.count)
        var cur = prev
        for i in 1...a.count {
            cur[0] = i
            for j in 1...b.count {
                cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            swap(&prev, &cur)
        }
        return prev[b.count]
    }

    /// ` (did you mean "x"?)` or an empty string.
    public static func phrase(_ word: String, _ candidates: [String]) -> String {
        closest(to: word, in: candidates.filter { $0 != word }).map { " (did you mean \"\($0)\"?)" } ?? ""
    }
}
