/// Credentials written into a URL (`http://user:pass@host/…`), kept out of what is shown: every
/// place that prints or stores a configured value a person may have put a URL in (a stream's
/// `device`, `config show`, the take's source) passes it through ``hidden(in:)``.
/// Plain functions; any thread; never block.
public enum Credentials {
    /// `text` with the user information of every `scheme://user[:password]@host` taken out.
    public static func hidden(in text: String) -> String {
        guard text.contains("@"), text.contains("://") else { return text }
        var out = ""
        var rest = Substring(text)
        while let scheme = rest.range(of: "://") {
            out += rest[..<scheme.upperBound]
            rest = rest[scheme.upperBound...]
            // The authority ends at the first `/`, `?`, `#` or space; an `@` inside it ends the user information.
            let authorityEnd = rest.firstIndex { "/?# ".contains($0) } ?? rest.endIndex
            if let at = rest[..<authorityEnd].lastIndex(of: "@") {
                rest = rest[rest.index(after: at)...]
            }
        }
        return out + rest
    }
}
