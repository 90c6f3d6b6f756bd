import Foundation

/// Rules for user-chosen display names and the file names derived from them, shared by every store.
public enum NameRules {
    /// The longest display name accepted, in UTF-8 bytes.
    public static let maxNameBytes = 1024

    /// Checks a display name. Any Unicode is allowed except control characters (NUL included);
    /// the name is never used as a path. - Thread: any. Never blocks.
    public static func validate(_ name: String, what: String) throws -> String {
        guard !name.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else {
            throw TapedeckError(.invalidArgument, "The \(what) name is empty. Give a name with at least one visible character.")
        }
        guard name.utf8.count <= maxNameBytes else {
            throw TapedeckError(.invalidArgument, "The \(what) name is \(name.utf8.count) bytes long. Use at most \(maxNameBytes) bytes.")
        }
        if name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            throw TapedeckError(.invalidArgument,
                "The \(what) name contains a control character (such as NUL or a newline). Use printable characters only.")
        }
        return name
    }

    /// A file-name-safe fragment of a display name: lowercase ASCII letters, digits and dashes,
    /// at most 32 characters, never empty, never starting with a dot or dash. - Thread: any. Never blocks.
    public static func slug(_ name: String, fallback: String) -> String {
        var out = ""
        var lastDash = true
        for scalar in name.unicodeScalars {
            if scalar.isASCII, scalar.properties.isAlphabetic || ("0"..."9").contains(scalar) {
                out.unicodeScalars.append(scalar)
                lastDash = false
            } else if !lastDash {
                out.append("-")
                lastDash = true
            }
            if out.count >= 32 { break }
        }
        while out.hasSuffix("-") { out.removeLast() }
        return out.isEmpty ? fallback : out.lowercased()
    }
}
