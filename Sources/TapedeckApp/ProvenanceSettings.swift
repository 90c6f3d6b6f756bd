public import TapedeckCore
import Foundation

/// The `provenance:` section: whether this machine signs its takes as it records them, with
/// which key, and how often. A plain value; any thread.
public struct ProvenanceSettings: SettingsGroup, Hashable {
    public static let sign = Setting<Bool>("sign", default: false,
        help: "Sign every take as it is recorded: a hash chain of its audio beside it (TAKEFILE.chain), signed with this machine's key (`tapedeck keys init`). Recording refuses to start without the key.")
    public static let key = Setting<String>("key",
        help: "The signing key's file; empty: $XDG_CONFIG_HOME/tapedeck/signing-key, where `tapedeck keys init` makes it.")
    public static let signEvery = Setting<Int>("sign-every", range: 1...3600, default: 10,
        help: "Sign the chain's head every this many checkpoints (one a second), and at each take's end.")
    public static let tsa = Setting<String>("tsa",
        help: "An RFC 3161 time-stamping authority's URL (http or https): each signed take's head is stamped at its end and every tsa-every-minutes; tokens go into its chain. Requests wait in a queue while it cannot be reached. Empty: no time stamps.")
    public static let tsaEvery = Setting<Int>("tsa-every-minutes", range: 0...1440, default: 60,
        help: "Time-stamp a long take's head every this many minutes as well as at its end; 0: only at its end.")
    public static let tsaCA = Setting<String>("tsa-ca",
        help: "A file of PEM certificates trusted to vouch for time-stamping authorities (`tapedeck verify` checks tokens against it); empty: the system's CA bundle.")
    public static let declarations = [sign.declaration, key.declaration, signEvery.declaration, tsa.declaration, tsaEvery.declaration, tsaCA.declaration]

    public var sign: Bool
    public var key: String
    public var signEvery: Int
    public var tsa: String
    public var tsaEveryMinutes: Int
    public var tsaCA: String

    public init(_ settings: PluginSettings) {
        sign = settings[Self.sign]
        key = settings[Self.key]
        signEvery = settings[Self.signEvery]
        tsa = settings[Self.tsa].trimmingCharacters(in: .whitespaces)
        tsaEveryMinutes = settings[Self.tsaEvery]
        tsaCA = settings[Self.tsaCA].trimmingCharacters(in: .whitespaces)
    }

    /// Why `tsa` is not an authority's URL (`nil`: it is, or it is empty).
    public var tsaProblem: String? {
        guard !tsa.isEmpty else { return nil }
        guard let url = URL(string: tsa), ["http", "https"].contains(url.scheme?.lowercased() ?? ""), url.host != nil else {
            return "provenance.tsa is \"\(tsa)\", not an http:// or https:// URL. Give the time-stamping authority's URL (e.g. https://freetsa.org/tsr), or leave it empty for no time stamps."
        }
        return nil
    }
}
