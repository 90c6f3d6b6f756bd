public import Foundation
public import TapedeckCore

extension FleetReader {
    /// One problem `fleet doctor` found on the remote. A plain value.
    public struct Finding: Sendable, Hashable {
        /// The object (or unfinished upload) concerned.
        public var key: String
        /// What is wrong, in a sentence.
        public var problem: String
        /// Whether the repair mended it.
        public var repaired: Bool
        /// What the repair did (`removed`, `added to the catalog`).
        public var repair: String
        /// When the unfinished upload it is about was begun, when the remote says.
        public var started: Date?

        public init(key: String, problem: String, repaired: Bool, repair: String, started: Date? = nil) {
            self.key = key
            self.problem = problem
            self.repaired = repaired
            self.repair = repair
            self.started = started
        }

        /// A finding whose repair removes it.
        public init(key: String, problem: String, repaired: Bool, started: Date? = nil) {
            self.init(key: key, problem: problem, repaired: repaired, repair: "removed", started: started)
        }
    }

    /// What a check of the whole remote found. A plain value.
    public struct Checkup: Sendable {
        /// Takes with a manifest that reads.
        public var takes: Int
        /// Their manifests.
        public var manifests: [RemoteManifest]
        public var findings: [Finding]
        /// Objects under the remote's root whose keys are not Tapedeck's (another program's
        /// files in a shared bucket): counted, never read, judged or removed.
        public var foreign: Int
    }

    /// Checks the whole remote: manifests that do not read, manifests whose audio is missing,
    /// Tapedeck's audio without a manifest, unfinished uploads.
    ///
    /// Only keys Tapedeck could have written are judged: `MACHINE/SESSION-ID/TAKE-ID.EXT` with
    /// EXT `json` or one of ``audioExtensions``. With `repair`, audio without a manifest older
    /// than `age` is removed only when Tapedeck sent it (`TakeRemote.sentByTapedeck(_:)`: it
    /// carries Tapedeck's mark) and its manifest is still absent when asked again; unfinished
    /// uploads to Tapedeck's keys older than `age` are abandoned. An object without the mark
    /// is reported and left alone.
    /// - Thread: main actor; suspends while the remote answers.
    public func checkup(repair: Bool, olderThan age: TimeInterval = 86_400, now: Date = Date()) async throws -> Checkup {
        let (entries, problems, objects) = try await self.entries()
        var findings = problems.map { Finding(key: $0.key, problem: $0.reason, repaired: false) }
        let cutoff = now.addingTimeInterval(-age)
        for e in entries where !e.audioPresent {
            findings.append(Finding(key: e.manifest.audio.key, problem: Self.missingAudioAdvice(e.manifest), repaired: false))
            noteMissingAudio(e.manifest)
        }
        // A signed take's chain: where its manifest says, of the size it says (its bytes are
        // checked against the manifest's SHA-256 when the take is pulled).
        let sizes = Dictionary(objects.map { ($0.key, $0.size) }, uniquingKeysWith: { a, _ in a })
        for e in entries where e.audioPresent {
            guard let chain = e.manifest.chain else { continue }
            if let size = sizes[chain.key], size == chain.size { continue }
            findings.append(Finding(key: chain.key, problem: sizes[chain.key] == nil
                ? "the signed chain of take \"\(e.manifest.take.name)\" is missing, so the take cannot be proven. Push it again from \(e.manifest.machine) (`tapedeck push`)."
                : "the signed chain of take \"\(e.manifest.take.name)\" is not the one its manifest names (another size): it was changed on the remote.", repaired: false))
        }
        let committed = Set(entries.map(\.manifest.audio.key))
        let manifests = Set(objects.map(\.key).filter { Self.isTakeKey($0, extensions: ["json"]) })
        var foreign = 0
        for object in objects {
            guard isAudioKey(object.key) else {
                // A signed take's chain (AUDIOKEY.chain) is Tapedeck's too.
                if !manifests.contains(object.key) && !(TakeCompanions.audioName(of: object.key).map(isAudioKey) ?? false) { foreign += 1 }
                continue
            }
            guard !committed.contains(object.key) else { continue }
            let manifestKey = (object.key as NSString).deletingPathExtension + ".json"
            if manifests.contains(manifestKey) { continue }  // an unreadable manifest: reported above
            var finding = Finding(key: object.key, problem: "audio without a manifest (an upload that did not finish)", repaired: false)
            if repair, (object.modified ?? now) < cutoff, let key = try? RemoteKey(object.key), let manifest = try? RemoteKey(manifestKey),
               try await remote.get(manifest, limit: RemoteManifest.maximumBytes) == nil {
                // Looked at again just before: a push may have committed it since the listing.
                if try await remote.sentByTapedeck(key) {
                    try await remote.remove(key)
                    finding.repaired = true
                } else {
                    finding.problem = "audio without a manifest that Tapedeck did not send (it lacks the mark Tapedeck's uploads carry), so it was left alone. Remove it yourself if no other program of yours wrote it."
                }
            }
            findings.append(finding)
        }
        for upload in try await remote.unfinishedUploads(under: "") where isAudioKey(upload.key) {
            var repaired = false
            if repair, (upload.started ?? now) < cutoff, let key = try? RemoteKey(upload.key) {
                try await remote.abandon(upload.token, key: key)
                repaired = true
            }
            findings.append(Finding(key: upload.key, problem: "an unfinished multipart upload", repaired: repaired, started: upload.started))
        }
        return Checkup(takes: entries.count, manifests: entries.map(\.manifest), findings: findings, foreign: foreign)
    }

    /// Compares the fleet catalog with the remote's takes (`manifests`, a checkup's): an entry
    /// whose take the remote does not have, and a take the catalog lacks, are findings (keyed
    /// `catalog:TAKE-ID` and by the manifest's key). With `repair` the catalog is brought to the
    /// remote (it is derived from it): entries without a take removed, missing takes added. A
    /// take id the catalog holds with other audio is a finding, never overwritten.
    /// - Thread: main actor; suspends while the catalog answers.
    public static func catalogFindings(_ manifests: [RemoteManifest], catalog: any FleetIndex, repair: Bool) async throws -> [Finding] {
        let held = try await catalog.takeIDs()
        let present = Set(manifests.map(\.take.id))
        let orphans = held.filter { !present.contains($0.key) }.sorted { ($0.value, $0.key) < ($1.value, $1.key) }
        let missing = manifests.filter { held[$0.take.id] == nil }
        if repair, !orphans.isEmpty { try await catalog.remove(takeIDs: orphans.map(\.key)) }
        let conflicts = repair && !missing.isEmpty ? try await catalog.upsert(missing) : []
        let refused = Set(conflicts.map(\.takeID))
        var findings = orphans.map { id, machine in
            Finding(key: "catalog:\(id)", problem: "the fleet catalog lists this take of \(machine), and the remote has no manifest of it",
                    repaired: repair, repair: "removed from the catalog")
        }
        for m in missing {
            let key = (m.audio.key as NSString).deletingPathExtension + ".json"
            findings.append(Finding(key: key, problem: "a take the fleet catalog does not list" + (refused.contains(m.take.id) ? ", and it holds this take id with other audio" : ""),
                                    repaired: repair && !refused.contains(m.take.id), repair: "added to the catalog"))
        }
        return findings
    }
}
