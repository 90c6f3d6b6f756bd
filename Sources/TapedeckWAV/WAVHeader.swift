import TapedeckCore

/// A parsed RIFF or RF64 WAVE header.
///
/// The parser never trusts a size: it walks chunks only while their headers lie inside the real
/// file, reads a fixed, small number of bytes from each, and never allocates from a header value.
/// The data chunk's declared size is recorded but not relied on — ``WAVRepair`` decides how much
/// audio the file really holds.
///
/// Header normalization rule (``normalize(in:)``): WAVE_FORMAT_EXTENSIBLE is kept only where the
/// format needs it, i.e. when there are more than 2 channels, or the channel mask is not the
/// conventional one (front centre for mono, FL FR for stereo), or the valid bits differ from the
/// container bits, or the sub-format is neither integer PCM nor IEEE float. Mono and stereo integer
/// PCM of any width (16, 24 or 32 bits) get a plain 16-byte `fmt ` (tag 1), as libsndfile's plain WAV
/// and most tools write it; mono and stereo 32-bit float get an 18-byte `fmt ` (tag 3, cbSize 0).
/// The bytes freed become a `JUNK` chunk, so no offset in the file moves. And a RIFF file's size
/// field covers at least its whole `data` chunk: libsndfile leaves the size of the header it first
/// wrote when no audio was ever written, which readers such as python's `wave` then take as the end
/// of the file, before the `data` chunk.
struct WAVHeader {
    /// The RIFF flavour.
    enum Container { case riff, rf64 }

    /// A chunk: where its 8-byte header starts and the 32-bit size it declares.
    struct Chunk {
        var offset: Int64
        var size: UInt32
        /// Where the chunk's payload starts.
        var payload: Int64 { offset + 8 }
        /// Where the next chunk starts (sizes are padded to even).
        var next: Int64 { offset + 8 + Int64(size) + Int64(size & 1) }
    }

    /// The fields of a `fmt ` chunk that matter to Tapedeck.
    struct Fmt {
        /// 1 (integer PCM) or 3 (IEEE float), taken from the sub-format GUID for EXTENSIBLE.
        var tag: UInt16
        var isExtensible: Bool
        var channels: Int
        var sampleRate: Int
        var blockAlign: Int
        var bitsPerSample: Int
        var validBits: Int
        /// `dwChannelMask` of a WAVE_FORMAT_EXTENSIBLE `fmt `; `nil` for a plain one.
        var channelMask: UInt32?
    }

    static let extensibleTag: UInt16 = 0xFFFE
    /// The 14 bytes that follow the 2-byte format tag in KSDATAFORMAT_SUBTYPE_PCM / _IEEE_FLOAT.
    static let guidTail: [UInt8] = [0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xAA, 0x00, 0x38, 0x9B, 0x71]

    var container: Container
    var fileLength: Int64
    /// The first chunk after `WAVE`, if it is a `JUNK` chunk (space reserved for `ds64`).
    var junk: Chunk?
    /// The `ds64` chunk of an RF64 file.
    var ds64: Chunk?
    var fmtChunk: Chunk
    var fmt: Fmt
    var fact: Chunk?
    /// A `PEAK` chunk before the audio, if any.
    var peak: Chunk?
    var dataChunk: Chunk
    /// The data size the header claims (from `ds64` for RF64), not yet checked against the file.
    var declaredDataSize: UInt64

    /// Where the audio starts.
    var dataStart: Int64 { dataChunk.payload }

    /// Where the audio ends (its pad byte included) as the header says, when that lies inside
    /// the file; `nil` for a size past the end (a killed writer, a placeholder, a hostile value).
    var declaredAudioEnd: Int64? {
        guard declaredDataSize < UInt64(fileLength) else { return nil }
        let end = dataStart + Int64(declaredDataSize) + Int64(declaredDataSize & 1)
        return end <= fileLength ? end : nil
    }

    /// Parses the header of the file behind `file`.
    /// - Throws: `.corruptFile` naming the file if it is too short, not a WAVE file, or lacks a
    ///   `fmt ` or `data` chunk; an I/O error if reading fails.
    static func read(from file: RawFile) throws -> WAVHeader {
        let length = try file.length()
        func corrupt(_ why: String) -> TapedeckError {
            TapedeckError(.corruptFile, "\(file.path) is not a usable WAV file: \(why). It cannot be read or repaired.")
        }
        guard length >= 12 else { throw corrupt("it is only \(length) bytes long, too short to hold a WAV header") }
        let riff = try file.read(12, at: 0)
        let container: Container
        if LE.isID(riff, 0, "RIFF") { container = .riff } else if LE.isID(riff, 0, "RF64") { container = .rf64 } else {
            throw corrupt("it does not start with RIFF or RF64")
        }
        guard LE.isID(riff, 8, "WAVE") else { throw corrupt("it is a RIFF file but not WAVE audio") }

        var junk: Chunk?, ds64: Chunk?, fmtChunk: Chunk?, fact: Chunk?, peak: Chunk?, data: Chunk?
        try forEachChunk(in: file, from: 12, end: length) { head, chunk in
            if LE.isID(head, 0, "data") { data = chunk; return false }
            if chunk.next > length { return false }  // a chunk before the audio runs past the end
            if LE.isID(head, 0, "fmt ") && fmtChunk == nil { fmtChunk = chunk }
            if LE.isID(head, 0, "fact") && fact == nil && chunk.size >= 4 { fact = chunk }
            if LE.isID(head, 0, "ds64") && chunk.offset == 12 && chunk.size >= 24 { ds64 = chunk }
            if LE.isID(head, 0, "JUNK") && chunk.offset == 12 { junk = chunk }
            if LE.isID(head, 0, "PEAK") && peak == nil { peak = chunk }
            return true
        }
        guard let fmtChunk else { throw corrupt("it has no complete 'fmt ' chunk before its audio") }
        guard let data else { throw corrupt("it has no 'data' chunk") }
        guard fmtChunk.size >= 16 else { throw corrupt("its 'fmt ' chunk is only \(fmtChunk.size) bytes") }
        let fmt = try parseFmt(try file.read(Int(min(fmtChunk.size, 40)), at: fmtChunk.payload))

        var declared = UInt64(data.size)
        if container == .rf64 {
            guard let ds64 else { throw corrupt("it is RF64 but has no 'ds64' chunk") }
            if data.size == 0xFFFF_FFFF { declared = LE.u64(try file.read(24, at: ds64.payload), 8) }
        }
        return WAVHeader(container: container, fileLength: length, junk: junk, ds64: ds64, fmtChunk: fmtChunk,
                         fmt: fmt, fact: fact, peak: peak, dataChunk: data, declaredDataSize: declared)
    }

    /// `LIST` chunks whose entries claim more bytes than the chunk holds, in the top-level chain
    /// walked as libsndfile walks it: through a RIFF `data` chunk to the end of the file, but not
    /// past an RF64 `data` chunk whose size is the placeholder (libsndfile reads no chunk after it,
    /// and a 32-bit step would land inside the audio). libsndfile 1.2 can loop forever in `sf_open` on such a chunk (libsndfile issue
    /// #1118), so the reader refuses these files and ``WAVRepair`` retires the chunk. Needs no
    /// complete header; returns nothing for a file that is not RIFF/RF64 WAVE.
    /// - Thread: any. Blocks on disk I/O (one 8-byte read per chunk and per list entry).
    static func damagedLists(in file: RawFile) throws -> [Chunk] {
        let length = try file.length()
        guard length >= 12 else { return [] }
        let riff = try file.read(12, at: 0)
        guard LE.isID(riff, 0, "RIFF") || LE.isID(riff, 0, "RF64"), LE.isID(riff, 8, "WAVE") else { return [] }
        var found: [Chunk] = []
        try forEachChunk(in: file, from: 12, end: length) { head, chunk in
            if LE.isID(head, 0, "LIST"), try listIsDamaged(chunk, in: file, length: length) { found.append(chunk) }
            return !(LE.isID(head, 0, "data") && chunk.size == UInt32.max && LE.isID(riff, 0, "RF64"))
        }
        return found
    }

    /// Visits the chunks that start at `from` while each chunk's 8-byte header lies before `end`,
    /// at most `limit` of them; `visit` gets the header and returns whether to go on.
    /// - Returns: where the walk stopped (the offset after the last chunk visited in full).
    @discardableResult
    static func forEachChunk(in file: RawFile, from start: Int64, end: Int64, limit: Int = 1024,
                             _ visit: (_ head: [UInt8], _ chunk: Chunk) throws -> Bool) throws -> Int64 {
        var offset = start
        var walked = 0
        while offset + 8 <= end && walked < limit {
            let head = try file.read(8, at: offset)
            let chunk = Chunk(offset: offset, size: LE.u32(head, 4))
            walked += 1
            guard try visit(head, chunk) else { return offset }
            offset = chunk.next
        }
        return offset
    }

    /// Whether a `LIST` chunk's list type and entries fail to fit inside it (and the file). Walks
    /// at most 65 536 entries; a list longer than that is taken as sound.
    static func listIsDamaged(_ list: Chunk, in file: RawFile, length: Int64) throws -> Bool {
        guard list.size >= 4 else { return true }
        let end = min(list.payload + Int64(list.size), length)
        var damaged = false
        try forEachChunk(in: file, from: list.payload + 4, end: end, limit: 65_536) { _, entry in
            damaged = entry.payload + Int64(entry.size) > end
            return !damaged
        }
        return damaged
    }

    /// Renames `chunk` to `JUNK`: its bytes stay where they are, and every reader skips them.
    /// Does not sync.
    static func retire(_ chunk: Chunk, in file: RawFile) throws {
        try file.write(Array("JUNK".utf8), at: chunk.offset)
    }

    private static func parseFmt(_ b: [UInt8]) throws -> Fmt {
        var tag = LE.u16(b, 0)
        let bits = Int(LE.u16(b, 14))
        var validBits = bits
        var mask: UInt32?
        let extensible = tag == extensibleTag
        if extensible && b.count >= 40 && Array(b[26..<40]) == guidTail {
            tag = LE.u16(b, 24)
            validBits = Int(LE.u16(b, 18))
            mask = LE.u32(b, 20)
        }
        return Fmt(tag: tag, isExtensible: extensible, channels: Int(LE.u16(b, 2)), sampleRate: Int(LE.u32(b, 4)),
                   blockAlign: Int(LE.u16(b, 12)), bitsPerSample: bits, validBits: validBits, channelMask: mask)
    }

    /// The Tapedeck format of the audio, for files Tapedeck can repair.
    /// - Throws: `.unsupportedFormat` for encodings other than 16/24/32-bit PCM and 32-bit float;
    ///   `.corruptFile` if the fields contradict each other.
    func audioFormat(path: String) throws -> AudioFormat {
        let sampleFormat: SampleFormat
        switch (fmt.tag, fmt.bitsPerSample) {
        case (1, 16): sampleFormat = .s16
        case (1, 24): sampleFormat = .s24
        case (1, 32): sampleFormat = .s32
        case (3, 32): sampleFormat = .f32
        default:
            throw TapedeckError(.unsupportedFormat,
                "\(path) holds audio with format tag \(fmt.tag) and \(fmt.bitsPerSample) bits per sample. "
                + "Tapedeck can repair only 16-, 24- and 32-bit integer PCM and 32-bit float WAV files.")
        }
        let format = AudioFormat(sampleRate: fmt.sampleRate, channels: fmt.channels, sampleFormat: sampleFormat,
                                 layout: Self.layout(mask: fmt.channelMask, channels: fmt.channels))
        guard AudioFormat.sampleRateRange.contains(fmt.sampleRate), AudioFormat.channelRange.contains(fmt.channels),
              fmt.blockAlign == format.bytesPerFrame else {
            throw TapedeckError(.corruptFile,
                "\(path) has a contradictory 'fmt ' chunk (\(fmt.channels) channels, block size \(fmt.blockAlign)). "
                + "The file is damaged; it cannot be repaired.")
        }
        return format
    }

    /// The layout a `dwChannelMask` states for `channels` channels: `nil` (the conventional one)
    /// for a plain `fmt `, or a mask with a bit count other than the channel count (as ffmpeg
    /// ignores such a mask); mask 0 is discrete channels.
    static func layout(mask: UInt32?, channels: Int) -> ChannelLayout? {
        mask.flatMap { ChannelLayout(mask: $0, channels: channels) }
    }

    /// The bytes that replace the `fmt ` chunk (header included) when normalization applies.
    func normalizedFmtChunk() -> [UInt8]? {
        let conventional = ChannelLayout.conventional(channels: fmt.channels).mask
        guard container == .riff, fmt.isExtensible, fmt.channels >= 1, fmt.channels <= 2,
              fmt.channelMask == nil || fmt.channelMask == conventional,
              fmt.validBits == fmt.bitsPerSample, fmt.tag == 1 || (fmt.tag == 3 && fmt.bitsPerSample == 32)
        else { return nil }
        let newSize: UInt32 = fmt.tag == 1 ? 16 : 18
        guard fmtChunk.size >= newSize + 8 else { return nil }
        var b: [UInt8] = Array("fmt ".utf8) + LE.bytes32(newSize)
        b += LE.bytes16(fmt.tag) + LE.bytes16(UInt16(fmt.channels)) + LE.bytes32(UInt32(fmt.sampleRate))
        b += LE.bytes32(UInt32(fmt.sampleRate) &* UInt32(fmt.blockAlign))
        b += LE.bytes16(UInt16(fmt.blockAlign)) + LE.bytes16(UInt16(fmt.bitsPerSample))
        if fmt.tag == 3 { b += LE.bytes16(0) }
        let junkSize = fmtChunk.size - newSize - 8
        b += Array("JUNK".utf8) + LE.bytes32(junkSize)
        b += [UInt8](repeating: 0, count: Int(min(junkSize, 64)))  // tidy; JUNK contents are ignored
        return b
    }

    /// Rewrites an unneeded WAVE_FORMAT_EXTENSIBLE `fmt ` chunk of a RIFF file in place as a plain
    /// one followed by `JUNK` (see the rule above). Does not sync.
    /// - Returns: whether the file changed.
    /// With `retiringPeak`, also renames a `PEAK` chunk to `JUNK`: libsndfile writes one for float
    /// files even when asked not to, and raw writes leave its peaks at zero, so it would lie.
    /// - Returns: whether the file changed.
    /// With `layout`, first writes its mask into a WAVE_FORMAT_EXTENSIBLE `fmt ` (libsndfile
    /// writes a default mask of its own), so the rule above keeps EXTENSIBLE where the layout
    /// needs it.
    @discardableResult
    func normalize(in file: RawFile, retiringPeak: Bool = false, layout: ChannelLayout? = nil) throws -> Bool {
        var changed = false
        var header = self
        if let layout, fmt.isExtensible, fmtChunk.size >= 24, fmt.channelMask != layout.mask {
            try file.write(LE.bytes32(layout.mask), at: fmtChunk.payload + 20)
            header.fmt.channelMask = layout.mask
            changed = true
        }
        if let bytes = header.normalizedFmtChunk() {
            try file.write(bytes, at: fmtChunk.offset)
            changed = true
        }
        if retiringPeak, let peak {
            try Self.retire(peak, in: file)
            changed = true
        }
        if let size = riffSizeCoveringData(), try LE.u32(file.read(4, at: 4), 0) < size {
            changed = try file.patch32(size, at: 4) || changed
        }
        return changed
    }

    /// The RIFF size that ends exactly after the `data` chunk, for a RIFF file whose `data` chunk
    /// lies whole inside the file; `nil` otherwise (RF64, or a size only repair can decide).
    func riffSizeCoveringData() -> UInt32? {
        guard container == .riff, dataChunk.payload + Int64(declaredDataSize) <= fileLength else { return nil }
        return UInt32(exactly: min(dataChunk.next, fileLength) - 8)
    }
}
