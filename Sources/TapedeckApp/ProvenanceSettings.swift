public import TapedeckCore

/// The `provenance:` section: whether this machine signs its takes as it records them, with
/// which key, and how often. A plain value; any thread.
public struct ProvenanceSettings: SettingsGroup, Hashable {
    public static let sign = Setting<Bool>("sign", default: false,
        help: "Sign every take as it is recorded: a hash chain of its audio beside it (TAKEFILE.chain), signed with this machine's key (`tapedeck keys init`). Recording refuses to start without the key.")
    public static let key = Setting<String>("key",
        help: "The signing key's file; empty: $XDG_CONFIG_HOME/tapedeck/signing-key, where `tapedeck keys init` makes it.")
    public static let signEvery = Setting<Int>("sign-every", range: 1...3600, default: 10,
        help: "Sign the chain's head every this many checkpoints (one a second), and at each take's end.")
    public static let declarations = [sign.declaration, key.declaration, signEvery.declaration]

    public var sign: Bool
    public var key: String
    public var signEvery: Int

    public init(_ settings: PluginSettings) {
        sign = settings[Self.sign]
        key = settings[Self.key]
        signEvery = settings[Self.signEvery]
    }
}
