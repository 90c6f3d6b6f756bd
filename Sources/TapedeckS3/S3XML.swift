import Foundation

/// The little XML S3 answers with (ListObjectsV2, ListParts, ListMultipartUploads,
/// InitiateMultipartUpload, Error), read by element name. S3's documents are flat and have no
/// attributes that matter here, so a scan for `<Name>…</Name>` with the five predefined entities
/// and numeric references decoded is enough; nothing is ever evaluated. A plain namespace; safe
/// on any thread, never blocks.
enum S3XML {
    /// The contents of every `<tag>` element (its inner text, undecoded), in document order.
    static func elements(_ tag: String, in xml: Substring) -> [Substring] {
        var out: [Substring] = []
        let open = "<" + tag
        let close = "</" + tag + ">"
        var rest = xml[...]
        while let start = rest.range(of: open) {
            // `<Key>` but not `<KeyMarker>`: the name must end at `>`, `/` or white space.
            let after = rest[start.upperBound...]
            guard let next = after.first else { break }
            if next == "/" { rest = after.dropFirst(); continue }
            guard next == ">" || next == " " else { rest = after; continue }
            guard let gt = after.firstIndex(of: ">"), let end = rest[gt...].range(of: close) else { break }
            out.append(rest[rest.index(after: gt)..<end.lowerBound])
            rest = rest[end.upperBound...]
        }
        return out
    }

    /// The decoded text of the first `<tag>` element, or `nil`.
    static func text(_ tag: String, in xml: Substring) -> String? {
        elements(tag, in: xml).first.map(decode)
    }

    /// Text with `&amp; &lt; &gt; &quot; &apos;` and `&#N;`/`&#xN;` decoded; anything else kept.
    static func decode(_ text: Substring) -> String {
        guard text.contains("&") else { return String(text) }
        var out = ""
        var rest = text
        while let amp = rest.firstIndex(of: "&") {
            out += rest[..<amp]
            guard let semi = rest[amp...].firstIndex(of: ";"), rest.distance(from: amp, to: semi) <= 10 else {
                out += rest[amp...]
                return out
            }
            let entity = rest[rest.index(after: amp)..<semi]
            switch entity {
            case "amp": out += "&"
            case "lt": out += "<"
            case "gt": out += ">"
            case "quot": out += "\""
            case "apos": out += "'"
            default:
                var scalar: Unicode.Scalar?
                if entity.hasPrefix("#x") || entity.hasPrefix("#X") { scalar = UInt32(entity.dropFirst(2), radix: 16).flatMap(Unicode.Scalar.init) }
                else if entity.hasPrefix("#") { scalar = UInt32(entity.dropFirst()).flatMap(Unicode.Scalar.init) }
                if let scalar { out.unicodeScalars.append(scalar) } else { out += rest[amp...semi] }
            }
            rest = rest[rest.index(after: semi)...]
        }
        return out + rest
    }

    /// `text` with `&`, `<` and `>` escaped, for the one document Tapedeck sends (CompleteMultipartUpload).
    static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
    }
}
