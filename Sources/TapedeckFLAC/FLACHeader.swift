import TapedeckCore

/// The metadata section of a native FLAC file: the `fLaC` marker, STREAMINFO and the other
/// blocks, parsed with bounds checks.
///
/// Reads only fixed, small pieces (4-byte block headers and the 34-byte STREAMINFO); other blocks
/// are skipped by their declared length, which must lie inside the real file. Nothing is ever
/// allocated from a header value.
struct FLACHeader {
    /// STREAMINFO's fields.
    struct StreamInfo: Equatable {
        var minBlockSize: Int
        var maxBlockSize: Int
        var minFrameSize: Int
        var maxFrameSize: Int
        var sampleRate: Int
        var channels: Int
        var bitsPerSample: Int
        var totalSamples: UInt64
        var md5: [UInt8]

        /// The 34 bytes of the block's payload.
        var bytes: [UInt8] {
            var b: [UInt8] = []
            b.reserveCapacity(34)
            func put(_ v: UInt64, _ n: Int) { for i in stride(from: n - 1, through: 0, by: -1) { b.append(UInt8(truncatingIfNeeded: v >> (8 * UInt64(i)))) } }
            put(UInt64(minBlockSize), 2)
            put(UInt64(maxBlockSize), 2)
            put(UInt64(minFrameSize), 3)
            put(UInt64(maxFrameSize), 3)
            let packed = UInt64(sampleRate) << 44 | UInt64(channels - 1) << 41 | UInt64(bitsPerSample - 1) << 36
                | (totalSamples & 0xF_FFFF_FFFF)
            put(packed, 8)
            b += md5
            return b
        }

        init(bytes b: [UInt8]) {
            func get(_ at: Int, _ n: Int) -> UInt64 { (0..<n).reduce(UInt64(0)) { $0 << 8 | UInt64(b[at + $1]) } }
            minBlockSize = Int(get(0, 2))
            maxBlockSize = Int(get(2, 2))
            minFrameSize = Int(get(4, 3))
            maxFrameSize = Int(get(7, 3))
            let packed = get(10, 8)
            sampleRate = Int(packed >> 44)
            channels = Int((packed >> 41) & 7) + 1
            bitsPerSample = Int((packed >> 36) & 31) + 1
            totalSamples = packed & 0xF_FFFF_FFFF
            md5 = Array(b[18..<34])
        }
    }

    /// Where STREAMINFO's 34-byte payload starts: after `fLaC` and its 4-byte block header.
    static let streamInfoOffset: Int64 = 8
    static let streamInfoLength = 34

    var streamInfo: StreamInfo
    /// Where the first audio frame starts (just past the last metadata block).
    var audioStart: Int64
    var fileLength: Int64
    /// The `WAVEFORMATEXTENSIBLE_CHANNEL_MASK` tag (as the `flac` tool and Tapedeck write it,
    /// `0x003F`, or decimal), if the first VORBIS_COMMENT block holds one.
    var channelMask: UInt32?

    /// The Tapedeck format the audio is delivered in: the depth widened (``deliveredFormat(bitsPerSample:)``),
    /// the layout from ``channelMask`` where it fits the channel count.
    var audioFormat: AudioFormat {
        AudioFormat(sampleRate: streamInfo.sampleRate, channels: streamInfo.channels,
                    sampleFormat: deliveredFormat(bitsPerSample: streamInfo.bitsPerSample),
                    layout: channelMask.flatMap { ChannelLayout(mask: $0, channels: streamInfo.channels) })
    }

    /// The tag name under which FLAC files carry a WAVE channel mask.
    static let channelMaskTag = "WAVEFORMATEXTENSIBLE_CHANNEL_MASK"

    /// Parses the metadata of the file behind `file`.
    /// - Throws: `.corruptFile` naming the file if it is not FLAC, its STREAMINFO is missing or
    ///   malformed, or a metadata block runs past the end of the file.
    static func read(from file: FLACFile) throws -> FLACHeader {
        let length = try file.length()
        func corrupt(_ why: String) -> TapedeckError {
            TapedeckError(.corruptFile, "\(file.path) is not a usable FLAC file: \(why). It cannot be read or repaired.")
        }
        guard length >= 8 + 34 else { throw corrupt("it is only \(length) bytes long, too short to hold a FLAC header") }
        let head = try file.read(8, at: 0)
        guard head[0..<4].elementsEqual("fLaC".utf8) else { throw corrupt("it does not start with fLaC") }
        guard head[4] & 0x7F == 0 else { throw corrupt("its first metadata block is not STREAMINFO") }
        let declared = Int(head[5]) << 16 | Int(head[6]) << 8 | Int(head[7])
        guard declared == streamInfoLength else { throw corrupt("its STREAMINFO block claims \(declared) bytes instead of 34") }
        let info = StreamInfo(bytes: try file.read(34, at: streamInfoOffset))
        guard info.sampleRate > 0, info.minBlockSize >= 16 || info.minBlockSize == info.maxBlockSize,
              info.maxBlockSize >= 16, info.bitsPerSample >= 4 else {
            throw corrupt("its STREAMINFO is malformed (\(info.sampleRate) Hz, block size \(info.minBlockSize)–\(info.maxBlockSize), \(info.bitsPerSample) bits)")
        }
        var last = head[4] & 0x80 != 0
        var offset = streamInfoOffset + 34
        var blocks = 1
        var mask: UInt32?
        var sawComment = false
        while !last {
            guard offset + 4 <= length else { throw corrupt("its metadata ends before the audio starts") }
            guard blocks < 4096 else { throw corrupt("it has more than 4096 metadata blocks") }
            let h = try file.read(4, at: offset)
            guard h[0] & 0x7F != 127 else { throw corrupt("it has an invalid metadata block type") }
            let size = Int64(h[1]) << 16 | Int64(h[2]) << 8 | Int64(h[3])
            guard offset + 4 + size <= length else {
                throw corrupt("a metadata block at byte \(offset) claims \(size) bytes, past the end of the file")
            }
            if h[0] & 0x7F == 4 && !sawComment {
                sawComment = true
                // Tags are small; a comment block too large to read in one piece is not searched.
                if size <= 1 << 20 { mask = channelMask(inComment: try file.read(Int(size), at: offset + 4)) }
            }
            last = h[0] & 0x80 != 0
            offset += 4 + size
            blocks += 1
        }
        return FLACHeader(streamInfo: info, audioStart: offset, fileLength: length, channelMask: mask)
    }

    /// The channel mask tag's value in a VORBIS_COMMENT payload (little-endian lengths, each
    /// checked against the payload); `nil` if absent, unparsable or the block is malformed.
    static func channelMask(inComment b: [UInt8]) -> UInt32? {
        func u32(_ at: Int) -> Int? {
            guard at >= 0, at + 4 <= b.count else { return nil }
            return Int(b[at]) | Int(b[at + 1]) << 8 | Int(b[at + 2]) << 16 | Int(b[at + 3]) << 24
        }
        guard let vendor = u32(0), let count = u32(4 + vendor) else { return nil }
        var at = 8 + vendor
        let prefix = Array((channelMaskTag + "=").utf8)
        for _ in 0..<min(count, 65_536) {
            guard let length = u32(at), at + 4 + length <= b.count else { return nil }
            let entry = b[(at + 4)..<(at + 4 + length)]
            if entry.count > prefix.count,
               entry.prefix(prefix.count).map({ $0 >= 0x61 && $0 <= 0x7A ? $0 - 0x20 : $0 }) == prefix {
                let text = String(decoding: entry.dropFirst(prefix.count), as: UTF8.self).filter { $0 != " " }
                let lower = text.lowercased()
                return lower.hasPrefix("0x") ? UInt32(lower.dropFirst(2), radix: 16) : UInt32(lower)
            }
            at += 4 + length
        }
        return nil
    }
}

/// The Tapedeck sample format FLAC audio of `bitsPerSample` bits is delivered in: 16, 24 and 32
/// bits as themselves; narrower depths shifted up to the next of 16 (4–15 bits), 24 (17–23) or
/// 32 (25–31) bits, so full scale stays full scale.
func deliveredFormat(bitsPerSample bits: Int) -> SampleFormat {
    bits <= 16 ? .s16 : bits <= 24 ? .s24 : .s32
}
