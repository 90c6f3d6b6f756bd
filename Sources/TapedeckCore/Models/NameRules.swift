import Foundation

/// Rules for user-chosen display names and the file names derived from them, shared by every store.
public enum NameRules {
    /// The longest display name accepted, in UTF-8 bytes.
    public static let maxNameBytes = 1024

    /// The first 8 characters of an id without its dashes, lowercased: a UUID's short form.
    /// - Thread: any. Never blocks.
    public static func shortID(of id: String) -> String {
        guard id.utf8.allSatisfy({ $0 < 0x80 }) else {
            return String(id.filter { $0 != "-" }.prefix(8)).lowercased()
        }
        // ASCII (every id Tapedeck makes): without generic collection code, whose first use at
        // start-up costs a scan of the program's protocol conformances.
        var bytes: [UInt8] = []
        bytes.reserveCapacity(8)
        for byte in id.utf8 where byte != UInt8(ascii: "-") {
            bytes.append(byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte + 32 : byte)
            if bytes.count == 8 { break }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Whether a character is blank as Foundation's `whitespacesAndNewlines` counts it: Unicode's
    /// White_Space, and the zero-width space. - Thread: any. Never blocks.
    public static func isBlank(_ scalar: Unicode.Scalar) -> Bool {
        scalar.properties.isWhitespace || scalar == "\u{200B}"
    }

    /// Checks a display name. Any Unicode is allowed except control characters (NUL included);
    /// the name is never used as a path. - Thread: any. Never blocks.
    public static func validate(_ name: String, what: String) throws -> String {
        // Printable ASCII with one visible character (most names): nothing below can refuse it.
        var printable = true, visible = false
        for byte in name.utf8 {
            if byte <= 0x20 || byte >= 0x7F { printable = printable && byte == 0x20 } else { visible = true }
        }
        if printable && visible && name.utf8.count <= maxNameBytes { return name }
        guard !name.unicodeScalars.allSatisfy(isBlank) else {
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
        // Accents come off (é → e, ü → u) rather than turning letters into dashes.
        for scalar in name.decomposedStringWithCanonicalMapping.unicodeScalars where scalar.properties.generalCategory != .nonspacingMark {
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

extension StringProtocol {
    /// The text without leading and trailing spaces and tabs (Unicode space separators, tab and
    /// the zero-width space: what Foundation's `CharacterSet.whitespaces` holds), without Foundation's `NSString`
    /// bridge, whose first use at start-up costs milliseconds. - Thread: any. Never blocks.
    public var trimmingSpaces: Substring {
        func isSpace(_ s: Unicode.Scalar) -> Bool {
            s == " " || s == "\t" || (s.value >= 0x80 && (s.properties.generalCategory == .spaceSeparator || s == "\u{200B}"))
        }
        let scalars = Substring(self).unicodeScalars
        guard let first = scalars.firstIndex(where: { !isSpace($0) }),
              let last = scalars.lastIndex(where: { !isSpace($0) }) else { return "" }
        return Substring(scalars[first...last])
    }
}
