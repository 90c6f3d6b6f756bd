import TapedeckCore
import Foundation

/// Recovering one take left `recording` by a process that died: the one procedure both opening
/// the library and `tapedeck doctor --repair` use.
enum TakeRecovery {
    /// Repairs the take's file with the encoder that wrote it (its length is trusted, not its
    /// header) and marks it `recovered`; a take with no audio byte is removed, with its empty file.
    /// - Returns: the recovered take, or `nil` when it was removed.
    /// - Throws: ``TapedeckError`` when this build has no such encoder or the repair failed; the
    ///   take is then left as it is.
    /// - Thread: any except the main actor's. Blocks on disk I/O.
    static func recover(_ interrupted: InterruptedTake, storage: any TakeStorage, encoders: [any AudioEncoder]) throws -> Take? {
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
            } catch {
                throw TapedeckError(.corruptFile, "Could not repair \(url.path): \(error). It was left as it is; run `tapedeck doctor`.")
            }
        }
        return try storage.completeRecovery(of: interrupted.take, repaired: repaired)
    }
}
