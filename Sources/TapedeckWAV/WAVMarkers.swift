import TapedeckCore
#if canImport(Glibc)
import Glibc
#endif

/// Markers in a WAV file: a `cue ` chunk (one cue point per marker, its sample offset in the
/// `data` chunk) and a `LIST`/`adtl` chunk of `labl` entries for the labels, after the audio,
/// where Sound Forge, Audacity, Reaper, sox and ffprobe look for them. Plain functions; any
/// thread; they block on disk I/O.
enum WAVMarkers {
    /// Replaces the file's `cue ` and `LIST adtl` chunks after the audio with `markers` (those
    /// beyond 2^32 frames cannot be named in a cue point and are left out), keeps every other
    /// chunk there, updates the RIFF (or RF64) size and syncs.
    static func write(_ markers: [TakeMarker], to file: RawFile) throws {
        var chunks: [UInt8] = []
        let placed = markers.filter { $0.frame >= 0 && $0.frame <= Int64(UInt32.max) }
        if !placed.isEmpty {
            var cue = LE.bytes32(UInt32(placed.count))
            var labels: [UInt8] = Array("adtl".utf8)
            for (i, m) in placed.enumerated() {
                let id = UInt32(i + 1)
                cue += LE.bytes32(id) + LE.bytes32(UInt32(m.frame)) + Array("data".utf8) + LE.bytes32(0) + LE.bytes32(0) + LE.bytes32(UInt32(m.frame))
                guard !m.label.isEmpty else { continue }
                var text = Array(m.label.utf8) + [0]
                let size = UInt32(4 + text.count)
                if text.count & 1 == 1 { text.append(0) }
                labels += Array("labl".utf8) + LE.bytes32(size) + LE.bytes32(id) + text
            }
            chunks += Array("cue ".utf8) + LE.bytes32(UInt32(cue.count)) + cue
            if labels.count > 4 { chunks += Array("LIST".utf8) + LE.bytes32(UInt32(labels.count)) + labels }
        }
        try replaceTail(of: file, with: chunks) { head in
            LE.isID(head, 0, "cue ") || (LE.isID(head, 0, "LIST") && head.count >= 12 && LE.isID(head, 8, "adtl"))
        }
    }

    /// Replaces the chunks after the audio that `replaced` picks (it sees each chunk's first 12
    /// bytes) with `chunks` (whole chunks, headers included), keeps every other chunk there byte
    /// for byte without reading it, updates the RIFF (or RF64) size and syncs (``WAVTail``).
    /// - Throws: `.corruptFile`, leaving the file as it was, when what follows the audio is not
    ///   a chain of whole chunks; an I/O error if writing fails.
    static func replaceTail(of file: RawFile, with chunks: [UInt8], replaced: ([UInt8]) -> Bool) throws {
        try WAVTail.read(from: file).replace(in: file, with: chunks, replacing: replaced)
    }
}
