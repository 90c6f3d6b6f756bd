public import TapedeckCore

/// What a user's `SESSION`, `SESSION/TAKE` or short id names.
public enum TakeReference: Sendable, Hashable {
    case session(Session)
    case take(Take, in: Session)

    /// Resolves `text` against `sessions`:
    /// 1. a short id (4 or more leading hex digits of an id) of a take or session;
    /// 2. `SESSION/TAKE` by exact names, trying every `/` (names may contain `/` themselves);
    /// 3. a session by exact name.
    /// - Throws: ``TapedeckError`` `.notFound` (with what to do) or `.invalidArgument` when ambiguous.
    public static func resolve(_ text: String, in sessions: [Session]) throws -> TakeReference {
        let lowered = text.lowercased()
        if lowered.count >= 4, lowered.allSatisfy(\.isHexDigit) {
            let takes = sessions.flatMap { s in s.takes.filter { $0.shortID.hasPrefix(lowered) }.map { ($0, s) } }
            let matchedSessions = sessions.filter { $0.shortID.hasPrefix(lowered) }
            if takes.count + matchedSessions.count > 1 {
                throw TapedeckError(.invalidArgument, "The id \"\(text)\" matches more than one take or session. Give more of the id, as printed by `tapedeck list`.")
            }
            if let (t, s) = takes.first { return .take(t, in: s) }
            if let s = matchedSessions.first { return .session(s) }
        }
        var candidates: [TakeReference] = []
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
        if candidates.count == 1 { return candidates[0] }
        if candidates.count > 1 {
            throw TapedeckError(.invalidArgument, "\"\(text)\" names more than one session or take. Use the short id printed by `tapedeck list`.")
        }
        throw TapedeckError(.notFound, "No session or take is called \"\(text)\". Run `tapedeck list` to see names and ids; address a take as SESSION/TAKE or by its id.")
    }
}
