public import Foundation
import TapedeckCore
import Yams
#if canImport(Glibc)
import Glibc
#endif

/// A parsed config file: every scalar as a dotted key path with its line, kept as text so that
/// every layer (file, environment, flags) is parsed by the same declarations.
public struct ConfigFile: Sendable, Hashable {
    /// One value and where it is.
    public struct Entry: Sendable, Hashable {
        public var value: String
        public var line: Int?
        /// `key:` with no value (or `~`, `null`): an empty string for a setting, an empty
        /// section for a section (``nullsAsSections(where:)``).
        public var isNull = false
    }

    /// The file's path (or a name for text that came from elsewhere).
    public var name: String
    /// Dotted key path → entry, e.g. `capture.null.signal`.
    public var entries: [String: Entry]
    /// Key paths that are sections (mappings), with their lines.
    public var sections: [String: Int?]
    /// `machines:` sections: machine name → its own entries and sections (key paths without the
    /// `machines.NAME.` prefix), layered over the file's top level on that machine.
    public var machines: [String: Machine] = [:]
    /// The sections that are lists (``listKeys``: `alerts:`), each entry a mapping read as key
    /// paths inside it; a list of words inside an entry (`when: [silence, disk-low]`) is one
    /// value, its words joined with ", ".
    public var lists: [String: [ListEntry]] = [:]

    /// The keys that hold a list of mappings.
    public static let listKeys: Set<String> = ["alerts", "schedule.windows", "programs"]

    /// One entry of a list section.
    public struct ListEntry: Sendable, Hashable {
        public var line: Int?
        public var entries: [String: Entry]
    }

    /// One `machines.NAME:` section.
    public struct Machine: Sendable, Hashable {
        public var line: Int?
        public var entries: [String: Entry] = [:]
        public var sections: [String: Int?] = [:]
        /// Its list sections (`alerts:`), which replace the top level's on that machine.
        public var lists: [String: [ListEntry]] = [:]
    }

    /// Reads and parses the file at `url`.
    /// - Thread: any. Blocks on disk I/O.
    /// - Throws: `TapedeckError` `.configuration` naming the file and what to do.
    public static func load(_ url: URL) throws -> ConfigFile {
        // A character device (`--config /dev/null`, as `ssh -F /dev/null`) is an empty config:
        // nothing is read from it, and the rules for files do not apply to it.
        var st = stat()
        if stat(url.path, &st) == 0, st.st_mode & S_IFMT == S_IFCHR {
            return ConfigFile(name: url.path, entries: [:], sections: [:])
        }
        try checkPermissions(url)
        if let size = try? FileManager.default.attributesOfItem(atPath: url.path)[.size] as? Int, size > maxBytes {
            throw TapedeckError(.configuration, "\(url.path) is \(size / 1024) KiB; a config file may be at most \(maxBytes / 1024) KiB. Check that --config names the right file.")
        }
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
    /// - Throws: `TapedeckError` `.configuration` with the line of the problem.
    /// - Thread: any. Never blocks.
    public static func parse(_ text: String, name: String) throws -> ConfigFile {
        // Anchors and aliases are refused before YAML is parsed: the parser expands aliases as
        // it builds the document, so a few hundred bytes of nested aliases are gigabytes.
        if let line = anchorOrAlias(in: text) {
            throw TapedeckError(.configuration, "\(name):\(line): YAML anchors and aliases (&name, *name) are not accepted. Write the values out.")
        }
        let root: Node?
        do {
            // Values are read as text and checked against each setting's declaration, so YAML's
            // tag resolution (the default resolver compiles a dozen regular expressions, a
            // millisecond of every command's start) is not needed: the basic resolver has none.
            root = try Yams.compose(yaml: text, .basic)
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
        try file.splitMachines()
        return file
    }

    /// The most bytes a config file may hold.
    public static let maxBytes = 1 << 20

    /// The line of the first anchor (`&name`) or alias (`*name`) in `text`, if any: an `&` or
    /// `*` where a YAML node starts (the line's start, or after a space, `[`, `{`, `,`, `:` or
    /// `-`), outside quotes and comments. In the middle of a word (`hw:1*`) they are text.
    /// - Thread: any. Never blocks.
    static func anchorOrAlias(in text: String) -> Int? {
        var line = 1
        var quote: Character?
        var previous: Character = "\n"
        var inComment = false
        for c in text {
            defer { previous = c }
            if c == "\n" {
                line += 1
                inComment = false
                if quote == "'" || quote == "\"" { continue }
                continue
            }
            if inComment { continue }
            if let q = quote {
                if c == q && previous != "\\" { quote = nil }
                continue
            }
            switch c {
            case "#" where previous == " " || previous == "\n" || previous == "\t":
                inComment = true
            case "'", "\"":
                if " \t\n[{,:-".contains(previous) { quote = c }
            case "&", "*":
                if " \t\n[{,:-?".contains(previous) { return line }
            default:
                break
            }
        }
        return nil
    }

    /// Turns each `key:` with no value whose key names a section, not a setting, into an empty
    /// section (a section whose settings are all commented out, as `config init` writes them).
    /// - Thread: any. Never blocks.
    public mutating func nullsAsSections(where isSection: (String) -> Bool) {
        for (key, entry) in entries where entry.isNull && isSection(key) {
            entries[key] = nil
            sections[key] = entry.line
        }
        for name in machines.keys {
            for (key, entry) in machines[name]!.entries where entry.isNull && isSection(key) {
                machines[name]!.entries[key] = nil
                machines[name]!.sections[key] = entry.line
            }
        }
    }

    /// Moves `machines.NAME.*` out of the top level into ``machines``.
    private mutating func splitMachines() throws {
        if let value = entries["machines"] {
            throw TapedeckError(.configuration, "\(name):\(value.line ?? 0): machines: must hold one section per host name, e.g. machines: { studio-pi: { capture: { backend: alsa } } }.")
        }
        guard sections.removeValue(forKey: "machines") != nil else { return }
        for (key, list) in lists where key.hasPrefix("machines.") {
            lists[key] = nil
            let parts = try machineParts(key, line: list.first?.line)
            machines[parts[1], default: Machine()].lists[parts[2]] = list
        }
        for (key, entry) in entries where key.hasPrefix("machines.") {
            entries[key] = nil
            let parts = try machineParts(key, line: entry.line)
            guard parts.count == 3 else {
                throw TapedeckError(.configuration, "\(name):\(entry.line ?? 0): \(key): a machine section holds sections (capture:, format:, …), not a value.")
            }
            machines[parts[1], default: Machine()].entries[parts[2]] = entry
        }
        for (key, line) in sections where key.hasPrefix("machines.") {
            sections[key] = nil
            let parts = try machineParts(key, line: line)
            if parts.count == 2 {
                machines[parts[1], default: Machine()].line = line
            } else {
                machines[parts[1], default: Machine()].sections[parts[2]] = line
            }
        }
    }

    /// `machines.NAME[.REST]` split in (at most) three, refusing an empty machine name (a YAML key
    /// `""` under `machines:`), which would otherwise match no host and index past the parts.
    private func machineParts(_ key: String, line: Int?) throws -> [String] {
        let parts = key.split(separator: ".", maxSplits: 2, omittingEmptySubsequences: false).map(String.init)
        guard parts.count >= 2, !parts[1].isEmpty else {
            throw TapedeckError(.configuration, "\(name):\(line ?? 0): machines: each section needs a host name, e.g. machines: { studio-pi: { capture: { backend: alsa } } }.")
        }
        return parts
    }

    /// Refuses a config file (or its folder) that someone other than its owner may write, or that
    /// belongs to another user (root's files excepted), as ssh does: whoever can change the file
    /// chooses where recordings go.
    /// - Thread: any. Blocks briefly on `stat`.
    static func checkPermissions(_ url: URL) throws {
        var st = stat()
        guard stat(url.path, &st) == 0 else { return } // reading reports a missing file
        guard st.st_mode & S_IFMT == S_IFREG else {
            throw TapedeckError(.configuration, "\(url.path) is not a regular file. Give --config a YAML file (or /dev/null for none).")
        }
        // The folder: one that others may write (without the sticky bit that keeps them from
        // replacing a file they do not own, as /tmp has) lets them swap the file.
        let folder = url.deletingLastPathComponent().path
        var fst = stat()
        if stat(folder, &fst) == 0, fst.st_mode & 0o022 != 0, fst.st_mode & S_ISVTX == 0 {
            throw TapedeckError(.configuration,
                "\(url.path): its folder \(folder) may be written by \(fst.st_mode & 0o002 != 0 ? "anyone" : "its group") (mode \(String(fst.st_mode & 0o777, radix: 8))), so anyone could replace the config. Keep it in a folder only you can write, or run `chmod go-w \(folder)` if that folder is yours.")
        }
        if fst.st_uid != getuid() && fst.st_uid != 0, fst.st_mode & 0o022 == 0 {
            // A folder of another user's: they could replace the file.
            throw TapedeckError(.configuration,
                "\(url.path): its folder \(folder) belongs to another user (uid \(fst.st_uid)). Keep your config in a folder of your own.")
        }
        let mode = st.st_mode & 0o777
        if mode & 0o022 != 0 {
            throw TapedeckError(.configuration,
                "\(url.path): the config file may be written by \(mode & 0o002 != 0 ? "anyone" : "its group") (mode \(String(mode, radix: 8))), so anyone could choose where recordings go. Run `chmod go-w \(url.path)`.")
        }
        if st.st_uid != getuid() && st.st_uid != 0 {
            throw TapedeckError(.configuration,
                "\(url.path): the config file belongs to another user (uid \(st.st_uid)). Use your own copy, or `chown` it to yourself.")
        }
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
                let isNull = s.style == .plain && ["", "~", "null", "Null", "NULL"].contains(s.string)
                entries[key] = Entry(value: s.string, line: line, isNull: isNull)
            case .mapping(let m):
                sections[key] = line
                try walk(m, prefix: key)
            case .sequence(let items):
                let parts = key.split(separator: ".")
                // The list's own key (without a machine section's `machines.NAME.`).
                let own = parts.count >= 3 && parts[0] == "machines" ? parts.dropFirst(2).joined(separator: ".") : key
                if (parts.count > 1 && parts[0] == "alerts") || (parts.count > 3 && parts[0] == "machines" && parts[2] == "alerts") {
                    throw TapedeckError(.configuration, "\(name):\(line ?? 0): alerts: is a list of rules: start each rule with \"- \" on its own line under alerts:, e.g. alerts: [ { when: [silence], webhook: { url: https://… } } ].")
                }
                guard Self.listKeys.contains(own) else {
                    throw TapedeckError(.configuration, "\(name):\(line ?? 0): \(key): a list is not accepted here; give a single value.")
                }
                lists[key] = try items.map { try listEntry($0, in: key) }
            case .alias:
                throw TapedeckError(.configuration, "\(name):\(line ?? 0): \(key): YAML aliases are not accepted; write the value out.")
            }
        }
    }

    /// One entry of a list section: a mapping, read as key paths inside it.
    private func listEntry(_ node: Node, in list: String) throws -> ListEntry {
        guard case .mapping(let mapping) = node else {
            let example = list.hasSuffix("programs") ? "- { name: News, time: \"09:00-09:10\", pad: 2m, days: mon-fri }"
                : list.hasSuffix("windows") ? "- { from: \"06:00\", to: \"09:00\" }" : "- { when: [silence], webhook: { url: https://… } }"
            throw TapedeckError(.configuration, "\(name):\(node.mark?.line ?? 0): \(list): each entry is a mapping, e.g. \(example).")
        }
        var entry = ListEntry(line: node.mark?.line, entries: [:])
        func walk(_ mapping: Node.Mapping, prefix: String) throws {
            for (keyNode, value) in mapping {
                guard case .scalar(let keyScalar) = keyNode else {
                    throw TapedeckError(.configuration, "\(name):\(keyNode.mark?.line ?? 0): keys must be plain words.")
                }
                let key = prefix.isEmpty ? keyScalar.string : prefix + "." + keyScalar.string
                let line = keyNode.mark?.line
                guard entry.entries[key] == nil else {
                    throw TapedeckError(.configuration, "\(name):\(line ?? 0): \(list): \(key) is given twice in one entry. Keep one.")
                }
                switch value {
                case .scalar(let s):
                    entry.entries[key] = Entry(value: s.string, line: line)
                case .mapping(let m):
                    try walk(m, prefix: key)
                case .sequence(let words):
                    let texts = try words.map { word -> String in
                        guard case .scalar(let s) = word else {
                            throw TapedeckError(.configuration, "\(name):\(word.mark?.line ?? 0): \(list): \(key): give a list of words, e.g. [silence, disk-low].")
                        }
                        return s.string
                    }
                    entry.entries[key] = Entry(value: texts.joined(separator: ", "), line: line)
                case .alias:
                    throw TapedeckError(.configuration, "\(name):\(line ?? 0): \(key): YAML aliases are not accepted; write the value out.")
                }
            }
        }
        try walk(mapping, prefix: "")
        return entry
    }

    /// `LINE: not valid YAML: problem` in one line, from Yams' multi-line description.
    static func describe(_ error: YamlError) -> String {
        switch error {
        case .scanner(let context, let problem, let mark, _), .parser(let context, let problem, let mark, _),
             .composer(let context, let problem, let mark, _):
            let what = [context?.text, problem].compactMap { $0 }.filter { !$0.isEmpty }.joined(separator: ", ")
            // A construct left open (`[pulse` without `]`) is found where the file ends: name the
            // line it starts on, where the fix goes.
            if let start = context?.mark.line, start < mark.line {
                return "\(start): not valid YAML: \(what) (by line \(mark.line)). Fix the syntax that starts on line \(start)."
            }
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

    /// `PATH:LINE (machines.NAME)` for messages about a machine section's key.
    func location(of key: String, machine: String) -> String {
        let m = machines[machine]
        let line = m?.entries[key]?.line ?? m?.sections[key] ?? nil
        return (line.map { "\(name):\($0)" } ?? name) + " (machines.\(machine))"
    }
}
