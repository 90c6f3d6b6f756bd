import TapedeckCore

/// The chunks after a finished WAV file's audio, where Tapedeck writes its markers (`cue `,
/// `LIST adtl`) and, for a file that had none before its audio, its `bext` and iXML; where other
/// programs keep theirs (an `id3 ` tag with its cover, `LIST INFO`, an XMP `_PMX` packet).
///
/// Tapedeck's own chunks are replaced; every other chunk stays where it is, byte for byte, and
/// is never read (only its 12-byte header), whatever its size: nothing of it is loaded into memory,
/// and nothing of the audio moves. A chunk replaced that stands before one kept becomes `JUNK`
/// (its bytes zeroed), as repair retires a damaged chunk; those after the last one kept are cut.
/// A tail that is not a clean chain of whole chunks is refused before anything is written: the
/// file is left as it was.
///
/// Plain values and functions; any thread; those that take a file block on disk I/O.
struct WAVTail {
    /// A chunk after the audio: its header's first 12 bytes (fewer for a chunk under 4 bytes)
    /// and where it ends in the file (its pad byte included when the file has it).
    struct Entry {
        var chunk: WAVHeader.Chunk
        var head: [UInt8]
        var end: Int64
    }

    /// The most chunks after the audio Tapedeck walks; a file with more is left as it is.
    static let maxChunks = 4096
    /// The largest piece written at once when zeroing a retired chunk.
    static let pieceSize = 1 << 20

    let header: WAVHeader
    /// Where the audio ends: after its pad byte, or at the end of the file when that byte is missing.
    let audioEnd: Int64
    let length: Int64
    let entries: [Entry]
    /// Whether the file ends with an odd-sized chunk (the audio or the last entry) whose pad byte
    /// is missing: written before anything is appended.
    let padMissing: Bool

    /// Walks the chunks after the audio of the finished file behind `file`, reading only their
    /// headers. Changes nothing.
    /// - Throws: `.corruptFile` when the header says more audio than the file holds, or when the
    ///   bytes after the audio are not whole chunks (or more than ``maxChunks`` of them), each
    ///   saying the file was left as it was; an I/O error if reading fails.
    static func read(from file: RawFile) throws -> WAVTail {
        let header = try WAVHeader.read(from: file)
        let length = try file.length()
        var padMissing = false
        let audioEnd: Int64
        if let end = header.declaredAudioEnd {
            audioEnd = end
        } else if header.declaredDataSize & 1 == 1, header.declaredDataSize < UInt64(length),
                  header.dataStart + Int64(header.declaredDataSize) == length {
            audioEnd = length  // an odd-sized data chunk at the very end, without its pad byte
            padMissing = true
        } else {
            throw TapedeckError(.corruptFile, "\(file.path) holds less audio than its header says; run `tapedeck doctor --repair` first.")
        }
        var entries: [Entry] = []
        var offset = audioEnd
        while offset < length {
            guard offset + 8 <= length, entries.count < maxChunks else { throw untidy(file, from: offset, length: length, count: entries.count) }
            let head = try file.read(Int(min(12, length - offset)), at: offset)
            let chunk = WAVHeader.Chunk(offset: offset, size: LE.u32(head, 4))
            if chunk.next <= length {
                entries.append(Entry(chunk: chunk, head: head, end: chunk.next))
                offset = chunk.next
            } else if chunk.size & 1 == 1, chunk.next - 1 == length {
                entries.append(Entry(chunk: chunk, head: head, end: length))  // the last chunk, without its pad byte
                padMissing = true
                offset = length
            } else {
                throw untidy(file, from: offset, length: length, count: entries.count)
            }
        }
        return WAVTail(header: header, audioEnd: audioEnd, length: length, entries: entries, padMissing: padMissing)
    }

    /// Why a tail is left alone: what is at `offset`, and that nothing was changed.
    private static func untidy(_ file: RawFile, from offset: Int64, length: Int64, count: Int) -> TapedeckError {
        let what = count >= maxChunks
            ? "more than \(maxChunks) chunks after its audio"
            : "\(length - offset) bytes after its audio, from byte \(offset), that are not a whole RIFF chunk"
        return TapedeckError(.corruptFile,
            "\(file.path) has \(what), so Tapedeck left the file as it was rather than guess what they are (its audio is not affected). Run `tapedeck doctor` on the library to see whether it needs repair.")
    }

    /// Replaces the chunks `replaced` picks (it sees each chunk's first 12 bytes) with `chunks`
    /// (whole chunks, headers included, appended at the end), keeps every other chunk where it
    /// is, updates the RIFF (or RF64) size and syncs. The audio is never touched.
    /// - Throws: `.unsupportedFormat` when a RIFF file would pass 4 GiB (before anything is
    ///   written); an I/O error if writing fails.
    func replace(in file: RawFile, with chunks: [UInt8], replacing replaced: ([UInt8]) -> Bool) throws {
        let lastKept = entries.lastIndex { !replaced($0.head) }
        let cut = lastKept.map { entries[$0].end } ?? audioEnd
        // A chunk appended after one whose pad byte is missing would start at an odd offset.
        let pad: [UInt8] = padMissing && cut == length && !chunks.isEmpty ? [0] : []
        let newLength = cut + Int64(pad.count + chunks.count)
        if header.container == .riff && newLength - 8 > Int64(UInt32.max) {
            throw TapedeckError(.unsupportedFormat,
                "\(file.path) would grow past 4 GiB, the most a RIFF WAV file can hold, so Tapedeck left it as it was. Its metadata stays in the library.")
        }
        // Ours before one kept: retired in place (renamed first, so a crash leaves padding).
        for entry in entries.prefix(lastKept ?? 0) where replaced(entry.head) {
            try WAVHeader.retire(entry.chunk, in: file)
            try Self.zero(file, from: entry.chunk.payload, to: entry.end)
        }
        // Cut first, then written: a crash in between loses these chunks (the catalog keeps what
        // they say), never leaves bytes after the audio that are not whole chunks, which repair
        // would have to take for audio.
        if cut < length { try file.truncate(to: cut) }
        if !pad.isEmpty || !chunks.isEmpty { try file.write(pad + chunks, at: cut) }
        switch header.container {
        case .riff: try file.patch32(UInt32(newLength - 8), at: 4)
        case .rf64:
            if let ds64 = header.ds64 { try file.patch64(UInt64(newLength - 8), at: ds64.payload) }
        }
        try file.sync()
    }

    /// Writes zeros over `start..<end`, at most ``pieceSize`` bytes at a time.
    static func zero(_ file: RawFile, from start: Int64, to end: Int64) throws {
        guard start < end else { return }
        let zeros = [UInt8](repeating: 0, count: Int(min(Int64(pieceSize), end - start)))
        var offset = start
        while offset < end {
            let n = Int(min(Int64(zeros.count), end - offset))
            try zeros.withUnsafeBytes { raw in
                guard let base = raw.baseAddress else { return }
                try file.write(base, count: n, at: offset)
            }
            offset += Int64(n)
        }
    }
}
