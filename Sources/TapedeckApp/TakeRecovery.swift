import TapedeckCore
import Foundation

/// Recovering one take left `recording` by a process that died: the one procedure both opening
/// the library and `tapedeck doctor --repair` use.
enum TakeRecovery {
    /// What became of an interrupted take.
    enum Outcome {
        /// Its file was repaired; the take is `recovered`.
        case recovered(Take)
        /// No audio byte was ever written; the entry (and its empty file) is gone.
        case removed
        /// Its file cannot be read as audio of its kind (after a power loss, a header that never
        /// reached the disk): the file was moved to `path` in the quarantine, bytes intact, and
        /// the entry removed, so no entry is left without audio.
        case quarantined(Take, path: String, reason: String)
    }

    /// Repairs the take's file with the encoder that wrote it (its length is trusted, not its
    /// header) and marks it `recovered`; a take with no audio byte is removed, with its empty file;
    /// a file the encoder finds unrepairable is quarantined (never deleted) and the entry removed.
    /// - Throws: ``TapedeckError`` when this build has no such encoder or the repair failed for
    ///   another reason (an I/O error); the take is then left as it is.
    /// - Thread: any except the main actor's. Blocks on disk I/O.
    static func recover(_ interrupted: InterruptedTake, storage: any TakeStorage, encoders: [any AudioEncoder]) throws -> Outcome {
        var repaired: RepairResult?
        let size = interrupted.fileURL.flatMap { try? FileManager.default.attributesOfItem(atPath: $0.path)[.size] as? Int } ?? 0
        if let url = interrupted.fileURL, size == 0 {
            // Created but never written: there is no audio to keep.
            try? FileManager.default.removeItem(at: url)
        } else if let url = interrupted.fileURL {
            guard let encoder = encoders.first(where: { $0.name == interrupted.take.encoding }) else {
                throw TapedeckError(.unsupportedFormat,
                    "Take \"\(interrupted.take.name)\" was written by the \(interrupted.take.encoding) encoder, which this build does not have; it was left as it is.")
            }
            do {
                repaired = try encoder.repair(fileAt: url)
            } catch let error as TapedeckError where error.code == .corruptFile || error.code == .unsupportedFormat {
                guard let maintenance = storage as? any LibraryMaintenance,
                      let relative = storage.relativePath(of: url) else {
                    throw TapedeckError(.corruptFile, "Could not repair \(url.path): \(error.message) It was left as it is; run `tapedeck doctor`.")
                }
                // Quarantined first: a crash in between leaves an entry whose file is gone, which
                // the next recovery removes (no audio) instead of a file without an entry.
                let moved = try maintenance.quarantine(relative)
                _ = try storage.completeRecovery(of: interrupted.take, repaired: nil)
                return .quarantined(interrupted.take, path: moved, reason: error.message)
            } catch {
                throw TapedeckError(.corruptFile, "Could not repair \(url.path): \(error). It was left as it is; run `tapedeck doctor`.")
            }
        }
        if let repaired, repaired.frames == 0, let url = interrupted.fileURL, let run = interrupted.take.run, run.offset == nil {
            // A take a split run made ready for its next boundary, and never began: no audio, no take.
            try? FileManager.default.removeItem(at: url)
            _ = try storage.completeRecovery(of: interrupted.take, repaired: nil)
            return .removed
        }
        guard let take = try storage.completeRecovery(of: interrupted.take, repaired: repaired) else { return .removed }
        return .recovered(take)
    }

}
