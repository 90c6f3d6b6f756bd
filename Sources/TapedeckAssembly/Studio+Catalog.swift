import Foundation
public import TapedeckCore
import TapedeckApp
#if Postgres
import TapedeckPostgres
#endif

extension Studio {
    /// Whether the config names a fleet catalog (`sync.catalog.postgres`), without making one.
    /// - Thread: main actor; never blocks.
    public var hasFleetCatalog: Bool {
        !SyncSettings(configuration.syncSettings).catalogPostgres.trimmingCharacters(in: .whitespaces).isEmpty
    }

    /// The fleet catalog of the config's `sync.catalog.postgres`; `nil` when it is empty. The
    /// password comes from the variable `sync.catalog.password-env` names, never the config.
    /// Nothing is connected until it is first used.
    /// - Throws: `.configuration` for a URL that is not one, a password variable that is not
    ///   set, or a build without the `Postgres` trait.
    /// - Thread: main actor. Never blocks.
    public func makeFleetIndex(environment: [String: String]) throws -> (any FleetIndex)? {
        let settings = SyncSettings(configuration.syncSettings)
        let url = settings.catalogPostgres.trimmingCharacters(in: .whitespaces)
        guard !url.isEmpty else { return nil }
        var password: String?
        let variable = settings.catalogPasswordEnv.trimmingCharacters(in: .whitespaces)
        if !variable.isEmpty {
            guard let value = environment[variable], !value.isEmpty else {
                throw TapedeckError(.configuration, "sync.catalog.password-env names \(variable), which is not set. Set it to the catalog user's password (for a service: Environment= or EnvironmentFile= in its unit), or empty sync.catalog.password-env when the server asks for none.")
            }
            password = value
        }
        #if Postgres
        return try PostgresFleetIndex(try PostgresSettings(url: url, password: password), logger: logger)
        #else
        throw TapedeckError(.configuration, "sync.catalog.postgres: this build of Tapedeck has no PostgreSQL catalog: it was built without the Postgres trait. Rebuild with the default traits, or empty sync.catalog.postgres.")
        #endif
    }
}
