/// The names a store gives what it creates: "Session N", "Take N", and a take's file name. Every
/// store uses these, so every library names things the same way. Plain functions; any thread,
/// never block.
public enum StoreNames {
    /// A new session's name: `chosen`, unless a session has it already (`.alreadyExists`), else
    /// the first free "Session N". Names compare as Swift compares text (canonically equivalent
    /// spellings are one name).
    public static func sessionName(_ chosen: String?, taken: [String]) throws -> String {
        if let chosen {
            guard !taken.contains(chosen) else {
                throw TapedeckError(.alreadyExists, "A session named \"\(chosen)\" exists already. Choose another name, or record into it with --session.")
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
                throw TapedeckError(.alreadyExists, "Session \"\(session)\" has a take named \"\(chosen)\" already. Choose another name with --name.")
            }
            return chosen
        }
        var n = number
        while taken.contains("Take \(n)") { n += 1 }
        return "Take \(n)"
    }

    /// A take's file name: its number, a slug of its name and the start of its id, e.g.
    /// `003-opener-1f2e3d4c.flac`. Safe as one path component whatever the name.
    public static func takeFile(number: Int, name: String, id: String, fileExtension: String) -> String {
        "\(zeroPadded(number, width: 3))-\(NameRules.slug(name, fallback: "take"))-\(id.prefix(8)).\(fileExtension)"
    }
}
