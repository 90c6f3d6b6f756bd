import Foundation
public import TapedeckCore

extension TakePusher {
    /// What adding verified takes to the fleet catalog did.
    public struct CatalogOutcome: Sendable {
        /// Takes added (or brought up to date) now.
        public var added = 0
        /// Takes the catalog holds with other audio: reported, never overwritten.
        public var conflicts: [FleetConflict] = []
        /// Why the catalog could not be written; the takes wait for the next push.
        public var unreachable: TapedeckError?
        /// Takes still waiting to be added.
        public var waiting = 0
    }

    /// Adds to `catalog` every take this library holds as verified on the remote whose entry it
    /// does not yet hold (just pushed, or left waiting by a push the catalog missed), in batches
    /// of 200, each marked in the ledger once the catalog has it. The manifest is the one `push`
    /// wrote to the remote (the take, its session, the audio's key, size and SHA-256), dated when
    /// the ledger verified it. A catalog that cannot be reached leaves the takes waiting: they
    /// stay verified in the bucket, and the next push adds them.
    /// - Thread: main actor; suspends while the catalog answers. Blocks briefly on the ledger.
    public func addToCatalog(_ catalog: any FleetIndex) async -> CatalogOutcome {
        var outcome = CatalogOutcome()
        guard let records = try? ledger.records() else { return outcome }
        var waiting: [(RemoteManifest, UploadLedger.Record)] = []
        for session in store.sessions {
            for take in session.takes {
                guard let record = records[take.id], record.state == .verified, record.cataloged != true, let digest = record.digest,
                      let keys = try? keys(take), keys.audio.rawValue == record.key else { continue }
                let manifest = RemoteManifest(machine: machine, session: .init(id: session.id, name: session.name, createdAt: session.createdAt),
                                              take: take, audio: .init(key: record.key, size: digest.size, sha256: digest.sha256), uploaded: record.updated)
                waiting.append((manifest, record))
            }
        }
        outcome.waiting = waiting.count
        guard !waiting.isEmpty else { return outcome }
        do {
            try await catalog.prepare()
            for start in stride(from: 0, to: waiting.count, by: 200) {
                let batch = Array(waiting[start..<min(start + 200, waiting.count)])
                let conflicts = try await catalog.upsert(batch.map(\.0))
                outcome.conflicts += conflicts
                let refused = Set(conflicts.map(\.takeID))
                var marked: [String: UploadLedger.Record] = [:]
                for (manifest, record) in batch where !refused.contains(manifest.take.id) {
                    var record = record
                    record.cataloged = true
                    marked[manifest.take.id] = record
                }
                // One write of the ledger for the batch.
                try ledger.set(marked)
                outcome.added += marked.count
                outcome.waiting -= batch.count
            }
        } catch let error as TapedeckError {
            outcome.unreachable = error
        } catch {
            outcome.unreachable = TapedeckError(.remoteUnavailable, "\(error)")
        }
        return outcome
    }
}
