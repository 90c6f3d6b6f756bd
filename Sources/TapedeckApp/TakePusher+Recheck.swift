public import Foundation
public import TapedeckCore
#if canImport(Glibc)
import Glibc
#endif

/// Checking verified takes again: `push --verify-remote`, the takes retention or `fleet doctor`
/// could not confirm, and the age `sync.keep-local` counts from.
extension TakePusher {
    /// Why a verified take's remote copy could not be confirmed.
    enum Doubt: Sendable, Hashable {
        /// The server could not be asked (unreachable, failing): nothing is known of the copy.
        case unreachable(String)
        /// The server answered, and the copy is not what was sent (gone, other bytes, no manifest).
        case answered(String)
    }

    /// Whether the remote still holds `digest` (what the ledger says was sent) at `audioKey`, as
    /// the take's file `file` holds it, and a manifest at `manifestKey` naming it; `nil` when it
    /// does. - Thread: main actor; suspends while the network and the disk work.
    func doubt(about digest: ContentDigest, audioKey: RemoteKey, manifestKey: RemoteKey, file: URL, take: Take? = nil) async -> Doubt? {
        do {
            switch try await remote.verify(audioKey, against: file) {
            case .missing:
                return .answered("its audio is missing there")
            case .differs(let reason):
                return .answered("its audio there is not the take's: \(reason)")
            case .matches(let held, _) where held != digest:
                return .answered("the take here is not what the library recorded as sent")
            case .matches:
                break
            }
            guard let data = try await remote.get(manifestKey, limit: RemoteManifest.maximumBytes) else {
                return .answered("its manifest is missing there")
            }
            guard let there = try? RemoteManifest.decode(data, key: manifestKey.rawValue), there.audio.sha256 == digest.sha256 else {
                return .answered("its manifest there describes other audio")
            }
            // Renamed, noted or tagged since it was pushed: the remote has the old words, and
            // deleting the take here would lose the new ones.
            if let take, there.take.name != take.name || there.take.notes != take.notes || there.take.tags != take.tags {
                return .answered("its name, notes or tags changed since it was pushed, and the remote's manifest has the old ones")
            }
            return nil
        } catch {
            return .unreachable((error as? TapedeckError)?.message ?? "\(error)")
        }
    }

    /// When the library got `take`, for `sync.keep-local`: the latest of when it began and when
    /// its file in the library (`file`) was last written or replaced there: its modification
    /// and inode change times, which a recording, an import and a pull set as they write it.
    /// The dates an imported file carries (its own modification time, its bext date, which
    /// become the take's `createdAt`) never make a take look older than its time in the library.
    /// - Returns: `nil` when the file cannot be looked at (the take is then kept).
    /// - Thread: any. A system call; does not block for long.
    public nonisolated static func receivedDate(of take: Take, file: URL) -> Date? {
        var st = stat()
        guard stat(file.path, &st) == 0 else { return nil }
        let changed = Date(timeIntervalSince1970: Double(st.st_ctim.tv_sec) + Double(st.st_ctim.tv_nsec) / 1e9)
        let modified = Date(timeIntervalSince1970: Double(st.st_mtim.tv_sec) + Double(st.st_mtim.tv_nsec) / 1e9)
        return max(take.createdAt, changed, modified)
    }

    /// Checks a verified take's remote copy again and sends what is missing or stale: the audio
    /// object must hold the take's bytes (its size and the server's checksum, as after an upload)
    /// and the manifest must name them.
    ///
    /// What this library sent is recognised by its manifest (this take, and the size and SHA-256
    /// the ledger recorded as sent). A missing audio object or manifest is sent again; a copy of
    /// this library's that is older than the take here (changed since, e.g. by `tapedeck
    /// loudness`) is removed, audio first, and sent anew; the record is marked to be checked
    /// again first, so a run stopped midway finishes the work at the next push. Anything not
    /// recognised as this library's is never removed (a conflict, exit 73), nor a remote copy
    /// that differs from a take that has not changed here since it was sent (one of the two is
    /// damaged: exit 74, nothing replaced).
    /// - Thread: main actor; suspends while the network and the disk work.
    func recheck(_ item: Item, options: UploadOptions, progress: @escaping @MainActor (Event) -> Void) async throws -> Outcome {
        let take = item.take
        let (audioKey, manifestKey) = try keys(take)
        let file = try store.storage.audioURL(for: take)
        let sent = item.record?.digest
        let audio = try await remote.verify(audioKey, against: file)
        let data = try await remote.get(manifestKey, limit: RemoteManifest.maximumBytes)
        let there = data.flatMap { try? RemoteManifest.decode($0, key: manifestKey.rawValue) }
        if data != nil && there == nil { throw conflict(manifestKey, "it is not a manifest this version of Tapedeck can read") }
        let ours = there.map { $0.take.id == take.id && $0.audio.size == sent?.size && $0.audio.sha256 == sent?.sha256 } ?? false
        let found: String
        var stale: [RemoteKey] = []
        switch audio {
        case .matches(let digest, let how):
            if let there, there.take.id == take.id, there.audio.size == digest.size, there.audio.sha256 == digest.sha256 {
                if digest != sent || item.record?.unconfirmed != nil {
                    try ledger.set(take.id, UploadLedger.Record(state: .verified, key: audioKey.rawValue, digest: digest))
                }
                return .confirmed(digest, how: how)
            }
            guard there == nil || ours else { throw conflict(manifestKey, "it describes other audio") }
            found = there == nil ? "its manifest was missing on the remote" : "its manifest on the remote described an older copy"
            if there != nil { stale = [manifestKey] }
        case .missing:
            guard there == nil || ours else { throw conflict(manifestKey, "it describes other audio") }
            found = "its audio was missing on the remote"
            // A manifest without its audio commits nothing: it goes first.
            if there != nil { stale = [manifestKey] }
        case .differs(let reason):
            guard ours else { throw conflict(audioKey, reason) }
            guard let updated = item.record?.updated, Self.changedHere(file, since: updated) else {
                throw TapedeckError(.corruptFile, "\(audioKey) on \(remote.location) differs from take \"\(item.session.name)/\(take.name)\" [\(take.shortID)] (\(reason)), though the take has not changed here since it was sent: one of the two copies is damaged. Nothing was replaced. Check the take here (`tapedeck doctor`, `tapedeck play`); the remote's copy can be fetched into another library with `tapedeck fleet pull`.")
            }
            found = "the remote held an older copy (the take changed here since it was sent)"
            // The audio first: a run stopped in between leaves the manifest that says the rest is ours.
            stale = [audioKey, manifestKey]
        }
        // Marked first: a run stopped from here on is finished by the next push, flag or not.
        try ledger.markUnconfirmed(take.id, reason: found)
        for key in stale { try await remote.remove(key) }
        var fresh = item
        fresh.record = nil
        switch try await pushOne(fresh, options: options, progress: progress) {
        case .uploaded(let d, let how):
            return .resent(d, how: how, found: found, audioSent: true)
        case .alreadyThere(let d, let how):
            return .resent(d, how: how, found: found, audioSent: false)
        case let other:
            return other
        }
    }

    /// Whether `file` was written after `date` (more than the ledger's one-second resolution).
    nonisolated static func changedHere(_ file: URL, since date: Date) -> Bool {
        var st = stat()
        guard stat(file.path, &st) == 0 else { return false }
        return Double(st.st_mtim.tv_sec) + Double(st.st_mtim.tv_nsec) / 1e9 > date.timeIntervalSince1970 + 1
    }
}
