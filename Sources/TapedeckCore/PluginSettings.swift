import Foundation

/// The type of one plugin setting, as declared by the plugin.
public enum SettingType: Sendable, Hashable {
    case string
    /// A file-system path. `~` is expanded; a relative path in a config file is taken relative
    /// to that file's folder, elsewhere (environment, flags) relative to the working directory.
    case path
    case bool
    /// An integer within a closed range.
    case int(ClosedRange<Int>)
    /// A number within a closed range.
    case double(ClosedRange<Double>)
    /// One of a fixed set of words.
    case choice([String])

    /// A short name for messages and `tapedeck backends`.
    public var summary: String {
        switch self {
        case .string: "string"
        case .path: "path"
        case .bool: "bool"
        case .int(let r): "integer \(r.lowerBound)...\(r.upperBound)"
        case .double(let r): "number \(r.lowerBound)...\(r.upperBound)"
        case .choice(let words): "one of: " + words.joined(separator: ", ")
        }
    }
}

/// A validated setting value.
public enum SettingValue: Sendable, Hashable, CustomStringConvertible {
    case string(String)
    case bool(Bool)
    case int(Int)
    case double(Double)

    public var description: String {
        switch self {
        case .string(let s): s
        case .bool(let b): b ? "true" : "false"
        case .int(let i): String(i)
        case .double(let d): String(d)
        }
    }
}

/// One setting a plugin accepts: its key, type, default and help text.
public struct SettingDeclaration: Sendable, Hashable {
    /// The key inside the plugin's config section, e.g. `signal`.
    public var key: String
    public var type: SettingType
    /// The default as written in a config file.
    public var defaultValue: String
    /// One sentence for `tapedeck backends` and the config docs.
    public var help: String

    public init(_ key: String, _ type: SettingType, default defaultValue: String, help: String) {
        self.key = key
        self.type = type
        self.defaultValue = defaultValue
        self.help = help
    }

    /// Parses a textual value (from YAML, the environment or a flag) against this declaration.
    /// - Returns: the value, or a ``SettingProblem`` saying what is accepted.
    /// - Thread: any. Never blocks.
    public func parse(_ text: String) -> Result<SettingValue, SettingProblem> {
        switch type {
        case .string, .path:
            return .success(.string(text))
        case .bool:
            switch text.lowercased() {
            case "true", "yes", "on", "1": return .success(.bool(true))
            case "false", "no", "off", "0": return .success(.bool(false))
            default: return .failure(SettingProblem("expected true or false, got \"\(text)\""))
            }
        case .int(let range):
            guard let v = Int(text.trimmingSpaces) else {
                return .failure(SettingProblem("expected an integer from \(range.lowerBound) to \(range.upperBound), got \"\(text)\""))
            }
            guard range.contains(v) else {
                return .failure(SettingProblem("\(v) is out of range; use \(range.lowerBound) to \(range.upperBound)"))
            }
            return .success(.int(v))
        case .double(let range):
            guard let v = Double(text.trimmingSpaces), v.isFinite else {
                return .failure(SettingProblem("expected a number from \(range.lowerBound) to \(range.upperBound), got \"\(text)\""))
            }
            guard range.contains(v) else {
                return .failure(SettingProblem("\(v) is out of range; use \(range.lowerBound) to \(range.upperBound)"))
            }
            return .success(.double(v))
        case .choice(let words):
            guard words.contains(text) else {
                return .failure(SettingProblem("unknown value \"\(text)\"; use one of: \(words.joined(separator: ", "))"))
            }
            return .success(.string(text))
        }
    }
}

/// Why a setting's value was refused.
public struct SettingProblem: Error, Sendable, Hashable {
    public var reason: String
    public init(_ reason: String) { self.reason = reason }
}

/// The validated settings handed to one plugin: only its own section, every declared key present.
public struct PluginSettings: Sendable, Hashable {
    public private(set) var values: [String: SettingValue]

    public init(_ values: [String: SettingValue] = [:]) {
        self.values = values
    }

    /// Settings made of each declaration's default, overridden by `overrides` (parsed against it).
    /// - Throws: ``TapedeckError`` `.configuration` for an unknown key or a bad value.
    /// - Thread: any. Never blocks.
    public static func resolving(_ declarations: [SettingDeclaration], overrides: [String: String] = [:],
                                 section: String = "") throws -> PluginSettings {
        var values: [String: SettingValue] = [:]
        let prefix = section.isEmpty ? "" : section + "."
        for key in overrides.keys where !declarations.contains(where: { $0.key == key }) {
            let known = declarations.map(\.key).sorted().joined(separator: ", ")
            throw TapedeckError(.configuration, "\(prefix)\(key): unknown setting. Known settings: \(known.isEmpty ? "none" : known).")
        }
        for d in declarations {
            let text = overrides[d.key] ?? d.defaultValue
            switch d.parse(text) {
            case .success(let v): values[d.key] = v
            case .failure(let p): throw TapedeckError(.configuration, "\(prefix)\(d.key): \(p.reason).")
            }
        }
        return PluginSettings(values)
    }

    public subscript(key: String) -> SettingValue? { values[key] }

    public func string(_ key: String) -> String? {
        if case .string(let s)? = values[key] { return s }
        return nil
    }

    public func int(_ key: String) -> Int? {
        if case .int(let i)? = values[key] { return i }
        return nil
    }

    public func bool(_ key: String) -> Bool? {
        if case .bool(let b)? = values[key] { return b }
        return nil
    }

    public func double(_ key: String) -> Double? {
        switch values[key] {
        case .double(let d)?: d
        case .int(let i)?: Double(i)
        default: nil
        }
    }
}
