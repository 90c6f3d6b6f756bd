/// Text another program wrote (an S3 server's error code and message, an ETag, a header) made
/// safe to put inside one of Tapedeck's messages: every control character, line breaks
/// included, and every bidirectional override or isolate is written as an escape (`\n`, `\e`,
/// `\x07`, `\u{202E}`), so what a server says can neither start a line of its own (a forged
/// `tapedeck: …` line) nor drive the terminal; and it is cut to a length a message can hold.
///
/// A plain namespace; every member runs on any thread and never blocks.
public enum ForeignText {
    /// The longest text kept, in characters; the rest is cut and `…` written instead.
    public static let defaultLimit = 300

    /// `text` with control characters and direction overrides escaped, at most `limit`
    /// characters of it (then `…`).
    public static func printable(_ text: some StringProtocol, limit: Int = defaultLimit) -> String {
        var out = ""
        var kept = 0
        for scalar in text.unicodeScalars {
            if kept >= limit {
                out += "…"
                break
            }
            kept += 1
            switch scalar.value {
            case 0x0A: out += "\\n"
            case 0x0D: out += "\\r"
            case 0x09: out += "\\t"
            case 0x1B: out += "\\e"
            case 0x00...0x1F, 0x7F: out += "\\x" + hex(scalar.value, width: 2)
            case 0x80...0x9F, 0x061C, 0x200E, 0x200F, 0x2028, 0x2029, 0x202A...0x202E, 0x2066...0x2069:
                out += "\\u{" + hex(scalar.value, width: 1) + "}"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    private static func hex(_ value: UInt32, width: Int) -> String {
        let digits = String(value, radix: 16, uppercase: true)
        return String(repeating: "0", count: max(0, width - digits.count)) + digits
    }
}
