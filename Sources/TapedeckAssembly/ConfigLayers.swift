import Foundation
import TapedeckCore

/// The layers a setting is looked up in, highest first: flags (`--set KEY=VALUE`), environment
/// (`TAPEDECK_CAPTURE_BACKEND`), this machine's `machines.NAME:` section of the file, the file's
/// top level; a key none of them gives takes its declared default. Every lookup returns the text
/// and the layer it came from together, so `config show` and every message name the same source.
/// A plain value; safe on any thread, never blocks.
struct ConfigLayers: Sendable {
    /// `--set` values by key.
    var flags: [String: String]
    /// The environment's `TAPEDECK_*` setting variables (reserved ones left out).
    var environment: [String: String]
    var file: ConfigFile?
    /// The `machines:` section that applies, if any.
    var machine: String?
    /// The user's folders: `~` in a path is ``UserPaths/home``, from `$HOME`.
    var paths: UserPaths

    private var machineEntries: [String: ConfigFile.Entry] {
        machine.flatMap { file?.machines[$0]?.entries } ?? [:]
    }

    /// The text of `key` and its source; `fallback` (a declared default) from `.builtIn` when
    /// no layer gives it. Paths are made absolute against their source (see ``absolutePath(_:source:)``).
    func value(of key: String, fallback: String, isPath: Bool = false) -> (text: String, source: ConfigSource) {
        let (text, source) = rawValue(of: key) ?? (fallback, .builtIn)
        return (isPath ? Self.absolutePath(paths.expandingTilde(text), source: source) : text, source)
    }

    /// The text of `key` and its source, if a layer gives it.
    func rawValue(of key: String) -> (text: String, source: ConfigSource)? {
        if let v = flags[key] { return (v, .flag) }
        let variable = Self.environmentName(for: key)
        if let v = environment[variable] { return (v, .environment(variable: variable)) }
        if let file, let machine, let e = machineEntries[key] { return (e.value, .machine(name: machine, path: file.name, line: e.line)) }
        if let file, let e = file.entries[key] { return (e.value, .file(path: file.name, line: e.line)) }
        return nil
    }

    /// Whether any layer gives a key inside the section `prefix` (e.g. `capture.alsa`), so that
    /// a plugin that is not selected still has its settings checked.
    func mentions(section prefix: String) -> Bool {
        let dotted = prefix + "."
        let variable = Self.environmentName(for: prefix) + "_"
        return flags.keys.contains { $0.hasPrefix(dotted) }
            || environment.keys.contains { $0.hasPrefix(variable) }
            || machineEntries.keys.contains { $0.hasPrefix(dotted) }
            || (file?.entries.keys.contains { $0.hasPrefix(dotted) } ?? false)
    }

    /// Relative paths resolved against the config file's folder (for values from the file) or
    /// the working directory (environment and flags); `~` was expanded already. Empty stays empty.
    static func absolutePath(_ text: String, source: ConfigSource) -> String {
        guard !text.isEmpty else { return text }
        let expanded = text
        if expanded.hasPrefix("/") { return URL(fileURLWithPath: expanded).standardizedFileURL.path }
        let base: URL = switch source {
        case .file(let path, _), .machine(_, let path, _): URL(fileURLWithPath: path).deletingLastPathComponent()
        default: URL(fileURLWithPath: FileManager.default.currentDirectoryPath)
        }
        return base.appendingPathComponent(expanded).standardizedFileURL.path
    }

    /// The one rule from key to variable: `capture.null.overrun-at-frame` →
    /// `TAPEDECK_CAPTURE_NULL_OVERRUN_AT_FRAME` (letters upper-cased, everything else `_`).
    static func environmentName(for key: String) -> String {
        guard key.utf8.allSatisfy({ $0 < 0x80 }) else {
            return "TAPEDECK_" + key.split(separator: ".").map { part in
                String(part.uppercased().map { $0.isLetter || $0.isNumber ? $0 : "_" })
            }.joined(separator: "_")
        }
        // Setting names are ASCII: the same result without Unicode property lookups.
        var name = Array("TAPEDECK_".utf8)
        for byte in key.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"): name.append(byte - 32)
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): name.append(byte)
            default: name.append(UInt8(ascii: "_"))
            }
        }
        return String(decoding: name, as: UTF8.self)
    }
}
