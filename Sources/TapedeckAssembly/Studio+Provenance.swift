public import Foundation
public import TapedeckCore
import TapedeckApp
import TapedeckProvenance

extension Studio {
    /// The signing key's file: `provenance.key`, or `$XDG_CONFIG_HOME/tapedeck/signing-key`.
    /// - Thread: any. Never blocks.
    public func signingKeyFile(environment: [String: String] = ProcessInfo.processInfo.environment) -> URL {
        let paths = UserPaths(environment: environment)
        let named = ProvenanceSettings(configuration.provenanceSettings).key.trimmingCharacters(in: .whitespaces)
        return named.isEmpty ? paths.signingKeyFile : URL(fileURLWithPath: paths.expandingTilde(named))
    }

    /// The sealer of a recorder on a machine that signs (`provenance.sign`), with its key loaded;
    /// `nil` when it does not sign.
    /// - Throws: when the key is missing or unreadable: a recorder asked to sign never records
    ///   unsigned. - Thread: any. Blocks briefly, reading the key.
    public func makeSealer() throws -> (any TakeSealing)? {
        let settings = ProvenanceSettings(configuration.provenanceSettings)
        guard settings.sign else { return nil }
        let file = signingKeyFile()
        do {
            return ProvenanceSealer(key: try DeviceKey.load(at: file), signEvery: settings.signEvery)
        } catch let error as TapedeckError {
            throw TapedeckError(error.code, "provenance.sign is on, so takes are signed, but the signing key cannot be used: \(error.message) Nothing was recorded.")
        }
    }
}
