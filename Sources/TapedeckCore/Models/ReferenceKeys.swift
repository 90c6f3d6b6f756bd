/// What a user's reference to a session or take (`tapedeck show TEXT`) can name by key: the
/// forms `TakeStorage.sessions(matching:)` answers without reading the whole library, read the
/// way `TakeReference` resolves them. One definition, so every store finds the same candidates.
/// A plain value; any thread, never blocks.
public struct ReferenceKeys: Sendable, Hashable {
    /// The text lowercased when it can be the start of an id (4 or more hex digits and dashes,
    /// starting with a digit): every session or take whose id starts with it is a candidate.
    public var idPrefix: String?
    /// The session names it can name: the text itself, and its part before each `/` (of
    /// `SESSION/TAKE`, where names may hold slashes).
    public var sessionNames: Set<String>
    /// Whether it is `last` (the newest take).
    public var isLast: Bool

    public init(_ text: String) {
        let lowered = text.lowercased()
        idPrefix = Self.canBeIDPrefix(lowered) ? lowered : nil
        var names: Set<String> = [text]
        var index = text.startIndex
        while let slash = text[index...].firstIndex(of: "/") {
            names.insert(String(text[..<slash]))
            index = text.index(after: slash)
        }
        sessionNames = names
        isLast = text == "last"
    }

    /// Whether lowercased `text` can be the start of an id: 4 or more hex digits and dashes,
    /// the first a hex digit.
    public static func canBeIDPrefix(_ lowered: String) -> Bool {
        lowered.count >= 4 && lowered.allSatisfy { $0.isHexDigit || $0 == "-" } && lowered.first?.isHexDigit == true
    }
}
