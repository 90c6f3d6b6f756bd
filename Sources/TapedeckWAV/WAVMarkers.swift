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
    /// bytes) with `chunks` (whole chunks, headers included), keeps every other chunk there,
    /// updates the RIFF (or RF64) size and syncs.
    static func replaceTail(of file: RawFile, with chunks: [UInt8], replaced: ([UInt8]) -> Bool) throws {
        let header = try WAVHeader.read(from: file)
        let length = try file.length()
        guard let audioEnd = header.declaredAudioEnd else {
            throw TapedeckError(.corruptFile, "\(file.path) holds less audio than its header says; run `tapedeck doctor --repair` first.")
        }
        // The chunks after the audio, but those replaced.
        var kept: [UInt8] = []
        var offset = audioEnd
        while offset + 8 <= length {
            let head = try file.read(12, at: offset)
            let size = Int64(LE.u32(head, 4))
            let next = offset + 8 + size + (size & 1)
            guard next <= length, size <= 16 << 20 else { break }  // a damaged tail is not carried on
            if !replaced(head) { kept += try file.read(Int(next - offset), at: offset) }
            offset = next
        }
        let tail = kept + chunks
        // Cut first, then written: a crash in between loses these chunks (the catalog keeps what
        // they say), never leaves bytes after the audio that are not whole chunks, which repair
        // would have to take for audio.
        try file.truncate(to: audioEnd)
        if !tail.isEmpty { try file.write(tail, at: audioEnd) }
        let newLength = audioEnd + Int64(tail.count)
        switch header.container {
        case .riff: try file.patch32(UInt32(clamping: newLength - 8), at: 4)
        case .rf64:
            if let ds64 = header.ds64 { try file.patch64(UInt64(newLength - 8), at: ds64.payload) }
        }
        try file.sync()
    }
}
