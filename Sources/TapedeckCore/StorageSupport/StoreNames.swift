/// The names a store gives what it creates: "Session N", "Take N", and a take's file name. Every
/// store uses these, so every library names things the same way. Plain functions; any thread,
/// never block.
public enum StoreNames {
    /// A new session's name: `chosen`, unless a session has it already (`.alreadyExists`; the
    /// caller says which name to change, as it knows where the name came from), else
    /// the first free "Session N". Names compare as Swift compares text (canonically equivalent
    /// spellings are one name).
    public static func sessionName(_ chosen: String?, taken: [String]) throws -> String {
        if let chosen {
            guard !taken.contains(chosen) else {
                throw TapedeckError(.alreadyExists, "A session named \"\(chosen)\" exists already.")
            }
            return chosen
        }
        var n = 1
        while taken.contains("Session \(n)") { n += 1 }
        return "Session \(n)"
    }

    /// A new take's name in `session`: `chosen`, unless a take there has it already
    /// (`.alreadyExists`), else "Take N" from the take's `number` up to the first free one.
    public static func takeName(_ chosen: String?, number: Int, taken: [String], session: String) throws -> String {
        if let chosen {
            guard !taken.contains(chosen) else {
                throw TapedeckError(.alreadyExists, "Session \"\(session)\" has a take named \"\(chosen)\" already.")
            }
            return chosen
        }
        var n = number
        while taken.contains("Take \(n)") { n += 1 }
        return "Take \(n)"
    }

    /// A take's file name: its number, a slug of its name and the start of its id, e.g.
    /// `003-opener-1f2e3d4c.flac`. One plain path component whatever the name and extension.
    public static func takeFile(number: Int, name: String, id: String, fileExtension: String) -> String {
        "\(zeroPadded(number, width: 3))-\(NameRules.slug(name, fallback: "take"))-\(id.prefix(8)).\(safeExtension(fileExtension))"
    }

    /// The hidden file a take's audio is written to while it records, e.g. `.ID.pending.flac`.
    public static func pendingFile(id: String, fileExtension: String) -> String {
        ".\(id).pending.\(safeExtension(fileExtension))"
    }

    /// The lock file a take's recorder holds while it lives, e.g. `.ID.lock`.
    public static func lockFile(id: String) -> String { ".\(id).lock" }

    /// A session's folder name: a slug of its name and the start of its id, e.g. `gig-1f2e3d4c`.
    public static func sessionFolder(name: String, id: String) -> String {
        NameRules.slug(name, fallback: "session") + "-" + String(id.prefix(8))
    }

    /// An encoder's file extension made safe for a file name (`audio` when nothing is left).
    static func safeExtension(_ text: String) -> String { NameRules.slug(text, fallback: "audio") }
}
