public import TapedeckCore

/// What a user's `SESSION`, `SESSION/TAKE` or short id names.
public enum TakeReference: Sendable, Hashable {
    case session(Session)
    case take(Take, in: Session)

    /// Resolves `text` against `sessions`:
    /// 1. an id or any unique prefix of it of 4 or more characters (the short id `list` prints,
    ///    the full UUID `--json` prints) of a take or session;
    /// 2. `SESSION/TAKE` by exact names, trying every `/` (names may contain `/` themselves);
    /// 3. a session by exact name;
    /// 4. a take by its name alone, when no other take in `sessions` has that name.
    /// - Throws: `TapedeckError` `.notFound` (with what to do) or `.invalidArgument` when ambiguous.
    /// - Thread: any. Never blocks.
    public static func resolve(_ text: String, in sessions: [Session]) throws -> TakeReference {
        var candidates: [TakeReference] = []
        let lowered = text.lowercased()
        // Any unique prefix of an id, from the short id `list` prints to the full UUID `--json`
        // prints, dashes included.
        if ReferenceKeys.canBeIDPrefix(lowered) {
            for s in sessions {
                if s.id.lowercased().hasPrefix(lowered) { candidates.append(.session(s)) }
                for t in s.takes where t.id.lowercased().hasPrefix(lowered) { candidates.append(.take(t, in: s)) }
            }
        }
        var index = text.startIndex
        while let slash = text[index...].firstIndex(of: "/") {
            let sessionName = String(text[..<slash])
            let takeName = String(text[text.index(after: slash)...])
            for s in sessions where s.name == sessionName {
                for t in s.takes where t.name == takeName { candidates.append(.take(t, in: s)) }
            }
            index = text.index(after: slash)
        }
        for s in sessions where s.name == text { candidates.append(.session(s)) }
        if text == "last" {
            // The newest take by its date, always: a session or take that is really called
            // "last" is named by its id (or SESSION/TAKE) instead.
            // Of takes with the same date, the one listed last (the higher number, the later session).
            let latest = sessions.flatMap { s in s.takes.map { (take: $0, session: s) } }
                .reduce(nil as (take: Take, session: Session)?) { best, next in
                    guard let best, best.take.createdAt > next.take.createdAt else { return next }
                    return best
                }
            guard let latest else {
                throw TapedeckError(.notFound, "There is no take yet, so \"last\" names nothing. Record one with `tapedeck record`.")
            }
            return .take(latest.take, in: latest.session)
        }
        if candidates.count == 1 { return candidates[0] }
        if candidates.count > 1 {
            let ids = candidates.map { c -> String in
                switch c {
                case .session(let s): "session \(s.shortID)"
                case .take(let t, _): "take \(t.shortID)"
                }
            }
            throw TapedeckError(.invalidArgument, "\"\(text)\" could mean \(ids.joined(separator: ", ")). Name one by its id.")
        }
        // A take's name alone, when one take in the library has it.
        let named = sessions.flatMap { s in s.takes.filter { $0.name == text }.map { TakeReference.take($0, in: s) } }
        if named.count == 1 { return named[0] }
        if (1...3).contains(lowered.count), lowered.allSatisfy(\.isHexDigit) {
            throw TapedeckError(.invalidArgument,
                "\"\(text)\" is too short for an id: ids need at least 4 characters, as `tapedeck list` prints them.")
        }
        throw TapedeckError(.notFound, "No session or take is called \"\(text)\"\(suggestion(for: text, in: sessions)). Run `tapedeck list` to see names and ids; address a take as SESSION/TAKE or by its id, or the newest take as `last`.")
    }

    /// ` (did you mean "X"?)` for the name `text` most likely meant: one that differs only in
    /// case, else the closest by edit distance (session names, and SESSION/TAKE).
    static func suggestion(for text: String, in sessions: [Session]) -> String {
        var names = sessions.map(\.name)
        for s in sessions { names += s.takes.map { "\(s.name)/\($0.name)" } }
        if let same = names.first(where: { $0.lowercased() == text.lowercased() }) {
            return " (did you mean \"\(same)\"?)"
        }
        // A take's name alone (without its session) is a common slip too.
        var byTakeName: [String: String] = [:]
        for s in sessions {
            for t in s.takes where byTakeName[t.name] == nil { byTakeName[t.name] = "\(s.name)/\(t.name)" }
        }
        if let close = Suggestion.closest(to: text, in: names + byTakeName.keys.sorted() + (byTakeName.isEmpty ? [] : ["last"])) {
            return " (did you mean \"\(byTakeName[close] ?? close)\"?)"
        }
        return ""
    }
}
