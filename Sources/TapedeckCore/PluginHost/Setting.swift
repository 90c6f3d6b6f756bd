/// A Swift type a setting's value can have: `Int`, `Double`, `Bool`, `String`, or a
/// ``SettingChoice`` enum.
public protocol SettingValueType: Sendable, Hashable {
    /// The typed value of a validated setting; `nil` when the value is of another type.
    init?(settingValue: SettingValue)
    /// The value as a validated setting.
    var settingValue: SettingValue { get }
}

extension Int: SettingValueType {
    public init?(settingValue: SettingValue) {
        guard case .int(let i) = settingValue else { return nil }
        self = i
    }
    public var settingValue: SettingValue { .int(self) }
}

extension Double: SettingValueType {
    public init?(settingValue: SettingValue) {
        switch settingValue {
        case .double(let d): self = d
        case .int(let i): self = Double(i)
        default: return nil
        }
    }
    public var settingValue: SettingValue { .double(self) }
}

extension Bool: SettingValueType {
    public init?(settingValue: SettingValue) {
        guard case .bool(let b) = settingValue else { return nil }
        self = b
    }
    public var settingValue: SettingValue { .bool(self) }
}

extension String: SettingValueType {
    public init?(settingValue: SettingValue) {
        guard case .string(let s) = settingValue else { return nil }
        self = s
    }
    public var settingValue: SettingValue { .string(self) }
}

/// An enum whose cases are a setting's accepted words, e.g. ``SampleFormat``: the declaration
/// lists `allCases` and the plugin reads the case.
public protocol SettingChoice: SettingValueType, RawRepresentable, CaseIterable where RawValue == String {}

extension SettingChoice {
    public init?(settingValue: SettingValue) {
        guard case .string(let s) = settingValue else { return nil }
        self.init(rawValue: s)
    }
    public var settingValue: SettingValue { .string(rawValue) }
}

extension SampleFormat: SettingChoice {}

/// One setting, declared once: key, type, accepted values, default and help.
///
/// The declaration is what `tapedeck backends`, `tapedeck config check` and the docs show, and
/// the value the code reads: `settings[FLACSettings.level]` is an `Int` in `0...8`, never `nil`.
/// A plain value; every member is safe on any thread and never blocks.
public struct Setting<Value: SettingValueType>: Sendable, Hashable {
    /// The key, type, default (as text) and help, as listings and validation use them.
    public let declaration: SettingDeclaration
    /// The value when no layer gives one.
    public let defaultValue: Value

    /// The key inside its section, e.g. `level`.
    public var key: String { declaration.key }

    init(key: String, type: SettingType, defaultValue: Value, help: String) {
        self.defaultValue = defaultValue
        declaration = SettingDeclaration(key, type, default: Self.text(defaultValue.settingValue), help: help)
    }

    /// A default as a config file would write it (`2`, not `2.0`).
    static func text(_ value: SettingValue) -> String {
        if case .double(let d) = value, d.rounded() == d, abs(d) < 1e15 { return String(Int(d)) }
        return value.description
    }
}

extension Setting where Value == Int {
    /// The values accepted.
    public var range: ClosedRange<Int> {
        if case .int(let range) = declaration.type { return range }
        return Int.min...Int.max
    }

    /// `value` brought into ``range``.
    public func clamp(_ value: Int) -> Int { min(max(value, range.lowerBound), range.upperBound) }

    /// An integer setting within `range`.
    public init(_ key: String, range: ClosedRange<Int>, default value: Int, help: String) {
        precondition(range.contains(value), "the default of \(key) is outside its range")
        self.init(key: key, type: .int(range), defaultValue: value, help: help)
    }
}

extension Setting where Value == Double {
    /// A number setting within `range`.
    public init(_ key: String, range: ClosedRange<Double>, default value: Double, help: String) {
        precondition(range.contains(value), "the default of \(key) is outside its range")
        self.init(key: key, type: .double(range), defaultValue: value, help: help)
    }
}

extension Setting where Value == Bool {
    /// A `true`/`false` setting.
    public init(_ key: String, default value: Bool, help: String) {
        self.init(key: key, type: .bool, defaultValue: value, help: help)
    }
}

extension Setting where Value == String {
    /// A free-text setting.
    public init(_ key: String, default value: String = "", help: String) {
        self.init(key: key, type: .string, defaultValue: value, help: help)
    }

    /// A file-system path: `~` is expanded, and a relative path in a config file is taken
    /// relative to that file's folder (see ``SettingType/path``).
    public static func path(_ key: String, default value: String = "", help: String) -> Setting<String> {
        Setting(key: key, type: .path, defaultValue: value, help: help)
    }
}

extension Setting where Value: SettingChoice {
    /// One of the enum's cases, written as its raw value.
    public init(_ key: String, default value: Value, help: String) {
        self.init(key: key, type: .choice(Value.allCases.map(\.rawValue)), defaultValue: value, help: help)
    }
}

/// The typed settings of one plugin (or host section), built from its own declarations only.
///
/// A conforming struct declares each setting once as a `static let` ``Setting``, lists them in
/// ``declarations`` and reads them in `init(_:)`; plugin descriptors are made from the type, so
/// what a plugin reads and what it declares cannot drift apart unseen (the plugin tests read
/// every group through a ``PluginSettings`` that logs reads and compare).
public protocol SettingsGroup: Sendable {
    /// Every setting of the group, in the order listings show them.
    static var declarations: [SettingDeclaration] { get }
    /// Reads the group from validated settings. - Thread: any. Never blocks.
    init(_ settings: PluginSettings)
}

/// The settings group of a plugin that has none.
public struct NoSettings: SettingsGroup {
    public static let declarations: [SettingDeclaration] = []
    public init(_ settings: PluginSettings) {}
}
