import TapedeckCore

/// Repairs WAV files whose writer died: trusts the file's length, not its header.
enum WAVRepair {
    /// Largest size a 32-bit RIFF field can hold.
    static let max32 = Int64(UInt32.max)

    /// Repairs the open file behind `file` in place and syncs it.
    ///
    /// If the header is consistent with the file (the data chunk fits and whatever follows it is a
    /// clean chain of chunks ending at end of file), the audio is kept as declared. Otherwise the
    /// audio runs to the end of the file, rounded down to whole frames; a partial last frame is cut
    /// off. Then the RIFF/`ds64`/`data`/`fact` sizes are patched, a RIFF file whose audio no longer
    /// fits 32-bit sizes becomes RF64 (if there is room for a `ds64` chunk), and the `fmt ` chunk
    /// is normalized. - Thread: any. Blocks on disk I/O.
    static func repair(_ file: RawFile) throws -> RepairResult {
        var header = try WAVHeader.read(from: file)
        let format = try header.audioFormat(path: file.path)
        let frameBytes = Int64(format.bytesPerFrame)
        let length = header.fileLength
        let available = max(0, length - header.dataStart)
        var changed = false

        var payload: Int64
        var newLength: Int64
        let consistent = try isConsistent(header, file: file, frameBytes: frameBytes)
        if consistent {
            payload = Int64(header.declaredDataSize)
            newLength = length
        } else {
            payload = available - available % frameBytes
            newLength = header.dataStart + payload
            if newLength != length { try file.truncate(to: newLength); changed = true }
            if payload & 1 == 1 {  // RIFF chunks are padded to even sizes
                try file.truncate(to: newLength + 1)
                newLength += 1
            }
        }

        if header.container == .riff && newLength - 8 > max32 {
            if try convertToRF64(&header, file: file) {
                changed = true
            } else {
                // No room for a ds64 chunk: describe as much whole-frame audio as 32-bit sizes allow.
                payload = (max32 + 8 - header.dataStart) / (2 * frameBytes) * (2 * frameBytes)
                newLength = header.dataStart + payload
            }
        }

        let frames = payload / frameBytes
        let frames32 = UInt32(clamping: frames)
        switch header.container {
        case .riff:
            changed = try file.patch32(UInt32(newLength - 8), at: 4) || changed
            changed = try file.patch32(UInt32(payload), at: header.dataChunk.offset + 4) || changed
            if let fact = header.fact { changed = try file.patch32(frames32, at: fact.payload) || changed }
        case .rf64:
            guard let ds64 = header.ds64 else { throw TapedeckError(.internalError, "RF64 header without ds64.") }
            changed = try file.patch32(UInt32.max, at: 4) || changed
            changed = try file.patch64(UInt64(newLength - 8), at: ds64.payload) || changed
            changed = try file.patch64(UInt64(payload), at: ds64.payload + 8) || changed
            changed = try file.patch64(UInt64(frames), at: ds64.payload + 16) || changed
            changed = try file.patch32(UInt32.max, at: header.dataChunk.offset + 4) || changed
            if let fact = header.fact { changed = try file.patch32(frames32, at: fact.payload) || changed }
        }
        // An interrupted file's PEAK chunk (if any) describes audio that is not what the file holds.
        changed = try header.normalize(in: file, retiringPeak: !consistent) || changed
        // Damaged LIST chunks, which libsndfile cannot open, become JUNK.
        for list in try retirableLists(header, file: file, audioBytes: payload, fileEnd: newLength) {
            try WAVHeader.retire(list, in: file)
            changed = true
        }
        try file.sync()
        return RepairResult(frames: frames, format: format, headerRepaired: changed)
    }

    /// What ``repair(_:)`` would find, without writing: the frames present and whether the
    /// header disagrees with them. - Thread: any. Blocks on disk I/O.
    static func inspect(_ file: RawFile) throws -> RepairResult {
        let header = try WAVHeader.read(from: file)
        let format = try header.audioFormat(path: file.path)
        let frameBytes = Int64(format.bytesPerFrame)
        if try isConsistent(header, file: file, frameBytes: frameBytes) {
            let audioBytes = Int64(header.declaredDataSize)
            let lists = try retirableLists(header, file: file, audioBytes: audioBytes, fileEnd: header.fileLength)
            return RepairResult(frames: audioBytes / frameBytes, format: format, headerRepaired: !lists.isEmpty)
        }
        let available = max(0, header.fileLength - header.dataStart)
        return RepairResult(frames: available / frameBytes, format: format, headerRepaired: true)
    }

    /// Whether the declared data size is believable: whole frames, inside the file, and followed
    /// only by well-formed chunks (printable ids) that end exactly at end of file.
    static func isConsistent(_ header: WAVHeader, file: RawFile, frameBytes: Int64) throws -> Bool {
        let declared = header.declaredDataSize
        let length = header.fileLength
        guard declared <= UInt64(max(0, length - header.dataStart)), Int64(declared) % frameBytes == 0 else {
            return false
        }
        let audioEnd = header.dataStart + Int64(declared)
        if let covering = header.riffSizeCoveringData(), LE.u32(try file.read(4, at: 4), 0) < covering { return false }
        if audioEnd == length { return true }  // a missing pad byte at the very end is tolerated
        var printable = true
        let stop = try WAVHeader.forEachChunk(in: file, from: audioEnd + Int64(declared & 1), end: length, limit: 64) { head, _ in
            printable = head[0..<4].allSatisfy { $0 >= 0x20 && $0 <= 0x7E }
            return printable
        }
        return printable && (stop == length || stop == length + 1)
    }

    /// The damaged `LIST` chunks repair renames: those outside the `audioBytes` of audio kept
    /// (bytes of audio that happen to spell LIST stay audio) and inside the first `fileEnd` bytes.
    static func retirableLists(_ header: WAVHeader, file: RawFile, audioBytes: Int64, fileEnd: Int64) throws -> [WAVHeader.Chunk] {
        try WAVHeader.damagedLists(in: file).filter {
            $0.offset + 8 <= fileEnd && ($0.offset < header.dataStart || $0.offset >= header.dataStart + audioBytes)
        }
    }

    /// Turns a RIFF header into RF64 by laying out `ds64`, the `fmt ` chunk and a `JUNK` filler in
    /// the space between `WAVE` and `data`. Needs a leading `JUNK` chunk (space reserved by the
    /// writer) and room for `ds64` (36 bytes) plus `fmt `; drops other chunks before the audio.
    /// Patches only the container; the caller writes the sizes.
    /// - Returns: whether the file was converted.
    static func convertToRF64(_ header: inout WAVHeader, file: RawFile) throws -> Bool {
        if header.ds64 != nil {
            // A conversion interrupted after `ds64` was laid out but before the magic changed.
            try file.write(Array("RF64".utf8), at: 0)
            header = try WAVHeader.read(from: file)
            return header.container == .rf64
        }
        guard header.junk != nil, header.fmtChunk.size <= 256 else { return false }
        let fmtTotal = Int64(8 + header.fmtChunk.size + (header.fmtChunk.size & 1))
        let room = header.dataChunk.offset - 12 - 36 - fmtTotal
        guard room == 0 || room >= 8 else { return false }
        let fmtBytes = try file.read(Int(fmtTotal), at: header.fmtChunk.offset)
        var bytes: [UInt8] = Array("ds64".utf8) + LE.bytes32(28) + [UInt8](repeating: 0, count: 28)
        bytes += fmtBytes
        if room >= 8 { bytes += Array("JUNK".utf8) + LE.bytes32(UInt32(room - 8)) }
        try file.write(bytes, at: 12)
        try file.write(Array("RF64".utf8), at: 0)
        header = try WAVHeader.read(from: file)
        return header.container == .rf64 && header.ds64 != nil
    }
}
