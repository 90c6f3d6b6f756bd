import Foundation
import Logging
import TapedeckCore

/// How a recorder makes each take's writer: the encoder's, sealed into the take's signed chain
/// when the machine signs (`provenance.sign`: innermost, so the chain covers exactly the frames
/// the encoder is given, and a checkpoint makes the audio durable before the chain names it),
/// then measured (loudness, the waveform overview). A plain value; any thread.
struct TakeWriting: Sendable {
    let encoder: any AudioEncoder
    let analyzer: (any LoudnessAnalyzer)?
    let waveform: Bool
    let sealer: (any TakeSealing)?
    let logger: Logger

    /// The tags each take written this way starts with (`SIGNED=` when sealed).
    var tags: [String: String] { TakeCompanions.tags(sealedBy: sealer) }

    /// The writer of take `takeID`, writing `url` (its pending file), kept at `audioURL` once
    /// finished. Blocks on disk I/O: the file (and its chain) are created and their folder synced.
    /// - Throws: the encoder's failures; the sealer's, after removing the new file.
    func make(at url: URL, audioURL: URL, takeID: String, format: AudioFormat, metadata: TakeMetadata,
              notes: WriterNotes) throws -> any TakeWriter {
        var writer = try encoder.makeWriter(at: url, format: format, metadata: metadata)
        if let sealer {
            do {
                writer = try sealer.seal(writer, takeID: takeID, format: format, audioURL: audioURL)
            } catch {
                writer.abandon()
                try? FileManager.default.removeItem(at: url)
                throw error
            }
        }
        let measured = LoudnessMeasuring.wrap(writer, format: format, analyzer: analyzer, waveform: waveform, into: notes, logger: logger)
        // The new files' names must survive a power cut as surely as their checkpoints.
        let files = DurableFiles()
        try files.syncDirectory(url.deletingLastPathComponent())
        if sealer != nil, audioURL.deletingLastPathComponent() != url.deletingLastPathComponent() {
            try files.syncDirectory(audioURL.deletingLastPathComponent())
        }
        return measured
    }
}
