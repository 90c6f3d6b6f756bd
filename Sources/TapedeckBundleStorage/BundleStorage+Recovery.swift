import Foundation
public import TapedeckCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Takes whose recording process died: found by their free lock, then kept (their pending
/// file moved into place) or forgotten.
extension BundleStorage {
    // MARK: recovery

    /// Takes in state `recording` whose recording process is gone, claimed for recovery by this
    /// instance (their locks are held until ``completeRecovery(of:repaired:)``).
    /// - Thread: any. Blocks on disk I/O; never waits for a lock.
    public func interruptedTakes() throws -> [InterruptedTake] {
        var result: [(Date, InterruptedTake)] = []
        // Only bundles whose summary names a take in state `recording` are read.
        for scanned in try summaries() where (scanned.summary?.recordingTakes ?? 0) > 0 {
            let bundle = scanned.url
            guard let manifest = try? readManifest(bundle) else { continue }
            for entry in manifest.takes where entry.state == .recording {
                guard !liveLocks.withLock({ $0[entry.id] != nil }) else { continue }
                // Hold the take's lock from here until its recovery is committed, so neither the
                // recording process nor another recovering process can race this one.
                guard let fd = claimTakeLock(entry.id, in: bundle) else { continue }
                let current = try? readManifest(bundle).takes.first { $0.id == entry.id }
                guard let current, current.state == .recording else {
                    close(fd)
                    continue
                }
                // A take whose file names cannot be used is skipped (doctor reports the bundle's
                // files), never allowed to stop the rest of the library from opening.
                let candidates = [current.pendingFile, current.file].compactMap { $0 }
                guard let urls = try? candidates.map({ try confined($0, in: bundle) }) else {
                    close(fd)
                    continue
                }
                let url = urls.first { FileManager.default.fileExists(atPath: $0.path) }
                liveLocks.withLock { $0[entry.id] = fd }
                result.append((current.startDate, InterruptedTake(take: makeTake(current, of: manifest, bundle: bundle), fileURL: url)))
            }
        }
        return result.sorted { $0.0 < $1.0 }.map(\.1)
    }

    /// Moves a repaired take's audio into place and marks it `recovered`, or removes its entry
    /// when no audio exists. Only for takes this instance claimed with ``interruptedTakes()``.
    /// - Thread: any. Blocks on disk I/O and on other processes' library locks (up to the lock timeout).
    public func completeRecovery(of take: Take, repaired: RepairResult?) throws -> Take? {
        guard liveLocks.withLock({ $0[take.id] != nil }) else {
            throw TapedeckError(.busy, "Take \"\(take.name)\" was not claimed for recovery by this process. Open the library again.")
        }
        let bundle = try bundleURL(for: take.sessionID, verify: true)
        guard let repaired else {
            try locked(bundle) {
                var manifest = try readSession(take.sessionID, in: bundle)
                manifest.takes.removeAll { $0.id == take.id && $0.state == .recording }
                try commit(manifest, in: bundle, "completeRecovery")
                // A take that never held audio: its companions (a chain begun) go with it.
                if let audio = try? member(take.file, in: bundle) { for companion in TakeCompanions.urls(of: audio) { try files.remove(companion) } }
            }
            try releaseLock(of: take.id, in: bundle)
            return nil
        }
        try repaired.format.validate()
        guard (0...Manifest.maxFrames).contains(repaired.frames) else {
            throw TapedeckError(.invalidArgument, "A take of \(repaired.frames) frames cannot be stored; the count must be 0 to 2^40.")
        }
        guard let entry = try readSession(take.sessionID, in: bundle).takes.first(where: { $0.id == take.id }) else {
            try releaseLock(of: take.id, in: bundle)
            throw TapedeckError(.busy, "Take \"\(take.name)\" was deleted while it was being recovered.")
        }
        let finalURL = try confined(entry.file, in: bundle)
        if let pendingName = entry.pendingFile, case let pendingURL = try confined(pendingName, in: bundle),
           FileManager.default.fileExists(atPath: pendingURL.path) {
            try files.syncFile(pendingURL)
            try files.moveIntoPlace(pendingURL, finalURL)
            try files.reached("completeRecovery", "audio moved into place")
        }
        let recovered = try locked(bundle) { () -> Take? in
            var manifest = try readSession(take.sessionID, in: bundle)
            guard let i = manifest.takes.firstIndex(where: { $0.id == take.id && $0.state == .recording }) else { return nil }
            manifest.takes[i].state = .recovered
            manifest.takes[i].frames = repaired.frames
            manifest.takes[i].format = repaired.format
            manifest.takes[i].pendingFile = nil
            try commit(manifest, in: bundle, "completeRecovery")
            return makeTake(manifest.takes[i], of: manifest, bundle: bundle)
        }
        try releaseLock(of: take.id, in: bundle)
        guard let recovered else {
            throw TapedeckError(.busy, "Take \"\(take.name)\" changed while it was being recovered; it was left as it is.")
        }
        return recovered
    }
}
