public import TapedeckCore

/// The settings of the `sync:` section itself (its plugin's are in `sync.NAME.*`). A plain
/// value; safe on any thread.
public struct SyncSettings: SettingsGroup, Hashable {
    public static let keepLocal = Setting<String>("keep-local",
        help: "Delete local takes whose upload is verified once they are older than this (30d, 12h, 90m); empty keeps every take.")
    public static let catalogPostgres = Setting<String>("catalog.postgres",
        help: "The fleet catalog in PostgreSQL: postgres://USER@HOST[:PORT]/DATABASE (?sslmode=require for TLS, verify-full&sslrootcert=CA.pem to check the server), or postgres://USER@/DATABASE?host=/run/postgresql; empty: no catalog.")
    public static let catalogPasswordEnv = Setting<String>("catalog.password-env",
        help: "The environment variable holding the catalog user's password (never in the config); empty: the server asks for none.")
    public static let catalogHeartbeat = Setting<Double>("catalog.heartbeat-seconds", range: 1...3_600, default: 10,
        help: "How often a running record, serve or push --watch tells the catalog its state (fleet status marks one unheard for two of these stale).")
    public static let declarations = [keepLocal.declaration, catalogPostgres.declaration, catalogPasswordEnv.declaration, catalogHeartbeat.declaration]

    public var keepLocal: String
    /// The fleet catalog's URL (empty: none), and the variable holding its password.
    public var catalogPostgres: String
    public var catalogPasswordEnv: String
    public var catalogHeartbeat: Double

    public init(_ settings: PluginSettings) {
        keepLocal = settings[Self.keepLocal]
        catalogPostgres = settings[Self.catalogPostgres]
        catalogPasswordEnv = settings[Self.catalogPasswordEnv]
        catalogHeartbeat = settings[Self.catalogHeartbeat]
    }

    /// `keepLocal` in seconds; `nil` when it is empty (keep every take).
    /// - Throws: `.configuration` naming `sync.keep-local` and the forms accepted.
    /// - Thread: any. Never blocks.
    public func keepLocalSeconds() throws -> Double? {
        let text = keepLocal.trimmingSpaces.lowercased()
        guard !text.isEmpty else { return nil }
        let problem = TapedeckError(.configuration, "sync.keep-local: \"\(keepLocal)\" is not an age. Use days (30d), hours (12h) or minutes (90m), more than zero; leave it empty to keep every take.")
        if text.hasSuffix("d") {
            guard let days = Double(text.dropLast()), days > 0, days <= 36_500 else { throw problem }
            return days * 86_400
        }
        guard let seconds = try? DurationText.seconds(text, flag: "sync.keep-local") else { throw problem }
        return seconds
    }
}
