import Foundation
import Synchronization

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
public enum SettingValue: Sendable, Hashable, CustomStringConvertible, Codable {
    case string(String)
    case bool(Bool)
    case int(Int)
    case double(Double)

    /// In JSON as the value's own type: `"level": 5`, `"verify": false`, `"name": "x"`.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .string(let s): try c.encode(s)
        case .bool(let b): try c.encode(b)
        case .int(let i): try c.encode(i)
        case .double(let d): try c.encode(d)
        }
    }

    /// From JSON: a boolean, an integer, another number or a string, in that order.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if let b = try? c.decode(Bool.self) { self = .bool(b) }
        else if let i = try? c.decode(Int.self) { self = .int(i) }
        else if let d = try? c.decode(Double.self) { self = .double(d) }
        else { self = .string(try c.decode(String.self)) }
    }

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
            default: return .failure(SettingProblem("expected true or false, got \"\(SettingProblem.shown(text))\""))
            }
        case .int(let range):
            guard let v = Int(text.trimmingSpaces) else {
                return .failure(SettingProblem("expected an integer from \(range.lowerBound) to \(range.upperBound), got \"\(SettingProblem.shown(text))\""))
            }
            guard range.contains(v) else {
                return .failure(SettingProblem("\(v) is out of range; use \(range.lowerBound) to \(range.upperBound)"))
            }
            return .success(.int(v))
        case .double(let range):
            guard let v = Double(text.trimmingSpaces), v.isFinite else {
                return .failure(SettingProblem("expected a number from \(range.lowerBound) to \(range.upperBound), got \"\(SettingProblem.shown(text))\""))
            }
            guard range.contains(v) else {
                return .failure(SettingProblem("\(v) is out of range; use \(range.lowerBound) to \(range.upperBound)"))
            }
            return .success(.double(v))
        case .choice(let words):
            guard words.contains(text) else {
                return .failure(SettingProblem("unknown value \"\(SettingProblem.shown(text))\"; use one of: \(words.joined(separator: ", "))"))
            }
            return .success(.string(text))
        }
    }
}

/// Why a setting's value was refused.
public struct SettingProblem: Error, Sendable, Hashable {
    /// A value as a message quotes it: at most 60 characters (a value may be megabytes long).
    public static func shown(_ text: String) -> String {
        text.count > 60 ? String(text.prefix(57)) + "…" : text
    }

    public var reason: String
    public init(_ reason: String) { self.reason = reason }
}

/// The validated settings handed to one plugin: only its own section, every declared key present.
///
/// Read through a typed ``Setting``: `settings[FLACSettings.level]`. A plain value; every member
/// is safe on any thread and never blocks.
public struct PluginSettings: Sendable, Hashable {
    /// Every value by key, for reports of the effective settings.
    public private(set) var values: [String: SettingValue]
    /// Keys read so far, when made with ``recordingReads(of:)`` (a check that a plugin reads only
    /// what it declares); `nil` otherwise.
    private let readLog: SettingReadLog?

    public init(_ values: [String: SettingValue] = [:]) {
        self.values = values
        readLog = nil
    }

    private init(_ values: [String: SettingValue], readLog: SettingReadLog) {
        self.values = values
        self.readLog = readLog
    }

    /// Settings made of each declaration's default, overridden by `overrides` (parsed against it).
    /// - Throws: ``TapedeckError`` `.configuration` for an unknown key or a bad value.
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

    /// The value of `setting`: the validated value, or its default where this value holds none
    /// (settings built by hand in a test).
    public subscript<Value>(setting: Setting<Value>) -> Value {
        readLog?.record(setting.key)
        if let value = values[setting.key], let typed = Value(settingValue: value) { return typed }
        return setting.defaultValue
    }

    /// A copy that logs every key read from it, and the log.
    public static func recordingReads(of settings: PluginSettings) -> (PluginSettings, SettingReadLog) {
        let log = SettingReadLog()
        return (PluginSettings(settings.values, readLog: log), log)
    }

    public static func == (a: PluginSettings, b: PluginSettings) -> Bool { a.values == b.values }
    public func hash(into hasher: inout Hasher) { hasher.combine(values) }
}

/// The keys read from a ``PluginSettings`` made by ``PluginSettings/recordingReads(of:)``.
/// Safe on any thread; never blocks for long.
public final class SettingReadLog: Sendable {
    private let keys = Mutex<Set<String>>([])

    /// Every key read so far.
    public var read: Set<String> { keys.withLock { $0 } }

    func record(_ key: String) { keys.withLock { _ = $0.insert(key) } }
}
