import Foundation
public import TapedeckApp
import TapedeckCore

extension Studio {
    /// The retention of the config's `retention:` section over this studio's library; `nil` when
    /// the section asks for nothing. With a remote configured, only takes whose upload the
    /// library's ledger holds as verified may go; when the remote cannot be opened (no
    /// credentials), none may, and `remoteProblem` says why.
    /// - Throws: `.configuration` for a value of the section that cannot be read.
    /// - Thread: main actor. Blocks briefly reading the ledger; suspends while the remote closes.
    public func makeRetentionRunner(environment: [String: String]) async throws -> (runner: RetentionRunner, remoteProblem: String?)? {
        let settings = RetentionSettings(configuration.retentionSettings)
        guard settings.isActive else { return nil }
        let requireVerified = configuration.sync.plugin != nil
        let policy = RetentionPolicy(keepSeconds: try settings.keepSeconds(), floor: try settings.floor(),
                                     keepMarked: settings.keepMarked, requireVerified: requireVerified)
        var verified: Set<String> = []
        var remoteProblem: String?
        if requireVerified {
            do {
                let remote = try makeRemote()
                let ledger = UploadLedger(libraryURL: store.storage.rootURL, remote: remote.location)
                let records = Result { try ledger.records() }
                await remote.shutdown()
                verified = Set(try records.get().filter { $0.value.state == .verified }.map(\.key))
            } catch {
                remoteProblem = "The remote could not be opened (\((error as? TapedeckError)?.message ?? "\(error)")): no take counts as verified, so none goes."
            }
        }
        let stateFile = RetentionRunner.stateFile(library: store.storage.rootURL,
                                                  stateFolder: URL(fileURLWithPath: UserPaths(environment: environment).stateHome).appendingPathComponent("tapedeck"))
        let runner = RetentionRunner(store: store, policy: policy, stateFile: stateFile, logger: logger,
                                     verified: { verified.contains($0.id) })
        return (runner, remoteProblem)
    }
}
