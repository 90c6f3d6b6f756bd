public import Foundation
import TapedeckCore
import Yams

/// A parsed config file: every scalar as a dotted key path with its line, kept as text so that
/// every layer (file, environment, flags) is parsed by the same declarations.
public struct ConfigFile: Sendable, Hashable {
    /// One value and where it is.
    public struct Entry: Sendable, Hashable {
        public var value: String
        public var line: Int?
    }

    /// The file's path (or a name for text that came from elsewhere).
    public var name: String
    /// Dotted key path → entry, e.g. `capture.null.signal`.
    public var entries: [String: Entry]
    /// Key paths that are sections (mappings), with their lines.
    public var sections: [String: Int?]

    /// Reads and parses the file at `url`.
    /// - Thread: any. Blocks on disk I/O.
    /// - Throws: ``TapedeckError`` `.configuration` naming the file and what to do.
    public static func load(_ url: URL) throws -> ConfigFile {
        let text: String
        do {
            text = try String(contentsOf: url, encoding: .utf8)
        } catch {
            let reason = (error as NSError).userInfo[NSUnderlyingErrorKey].map { "\($0)" } ?? error.localizedDescription
            throw TapedeckError(.configuration,
                "Cannot read the config file \(url.path): \(FileManager.default.fileExists(atPath: url.path) ? "it is not readable UTF-8 text (\(reason))" : "no such file"). Check the path given with --config or $TAPEDECK_CONFIG.")
        }
        return try parse(text, name: url.path)
    }

    /// Parses YAML text. An empty document is a file with no settings.
    /// - Throws: ``TapedeckError`` `.configuration` with the line of the problem.
    /// - Thread: any. Never blocks.
    public static func parse(_ text: String, name: String) throws -> ConfigFile {
        let root: Node?
        do {
            root = try Yams.compose(yaml: text)
        } catch let error as YamlError {
            throw TapedeckError(.configuration, "\(name):\(Self.describe(error))")
        } catch {
            throw TapedeckError(.configuration, "\(name): not valid YAML (\(error)). Fix the YAML syntax.")
        }
        var file = ConfigFile(name: name, entries: [:], sections: [:])
        guard let root else { return file }
        guard case .mapping(let mapping) = root else {
            throw TapedeckError(.configuration, "\(name):\(root.mark?.line ?? 1): the file must be a mapping of sections (capture:, playback:, format:, encoder:, storage:).")
        }
        try file.walk(mapping, prefix: "")
        return file
    }

    private mutating func walk(_ mapping: Node.Mapping, prefix: String) throws {
        for (keyNode, value) in mapping {
            guard case .scalar(let keyScalar) = keyNode else {
                throw TapedeckError(.configuration, "\(name):\(keyNode.mark?.line ?? 0): keys must be plain words.")
            }
            let key = prefix.isEmpty ? keyScalar.string : prefix + "." + keyScalar.string
            let line = keyNode.mark?.line
            if entries[key] != nil || sections[key] != nil {
                throw TapedeckError(.configuration, "\(name):\(line ?? 0): \(key) is given twice. Keep one.")
            }
            switch value {
            case .scalar(let s):
                entries[key] = Entry(value: s.string, line: line)
            case .mapping(let m):
                sections[key] = line
                try walk(m, prefix: key)
            case .sequence:
                throw TapedeckError(.configuration, "\(name):\(line ?? 0): \(key): a list is not accepted here; give a single value.")
            case .alias:
                throw TapedeckError(.configuration, "\(name):\(line ?? 0): \(key): YAML aliases are not accepted; write the value out.")
            }
        }
    }

    /// `LINE: not valid YAML: problem` in one line, from Yams' multi-line description.
    static func describe(_ error: YamlError) -> String {
        switch error {
        case .scanner(let context, let problem, let mark, _), .parser(let context, let problem, let mark, _),
             .composer(let context, let problem, let mark, _):
            let what = [context?.text, problem].compactMap { $0 }.filter { !$0.isEmpty }.joined(separator: ", ")
            return "\(mark.line): not valid YAML: \(what). Fix the syntax on that line."
        case .duplicatedKeysInMapping(let duplicates, let context):
            return "\(context.mark.line): \(duplicates.joined(separator: ", ")) given twice in one section. Keep one of them."
        default:
            let first = "\(error)".split(separator: "\n").first.map(String.init) ?? "\(error)"
            return " not valid YAML: \(first). Fix the file's syntax."
        }
    }

    /// `PATH:LINE` for messages.
    func location(of key: String) -> String {
        if let line = entries[key]?.line ?? sections[key] ?? nil { return "\(name):\(line)" }
        return name
    }
}
