/// Builds one FLAC frame whose subframes are VERBATIM (samples stored as they are), as repair
/// appends for the frames a checkpoint saved but libFLAC never encoded.
///
/// Layout (FLAC format, RFC 9639 §9): a fixed-block-size frame header (sync `0xFFF8`, block-size
/// code 6/7 with the size at the end of the header, the sample-rate code or an explicit rate,
/// independent channels, the sample-size code, the frame number UTF-8-coded, CRC-8), then per
/// channel one subframe header byte `0x02` followed by the samples big-endian in
/// `bitsPerSample` bits, then CRC-16. Only byte-multiple depths (8, 16, 24, 32) are built.
/// Thread: any; pure computation.
enum FLACVerbatimFrame {
    /// The frame for `frames` interleaved frames of `samples`, or nil if the depth is not a byte multiple.
    static func make(samples: [Int32], frames: Int, channels: Int, bitsPerSample: Int, sampleRate: Int,
                     frameNumber: UInt64) -> [UInt8]? {
        guard bitsPerSample % 8 == 0, (1...65_536).contains(frames), (1...8).contains(channels),
              samples.count >= frames * channels, frameNumber < 1 << 31 else { return nil }
        var out: [UInt8] = [0xFF, 0xF8]
        let (rateCode, rateExtra) = sampleRateCode(sampleRate)
        out.append((frames <= 256 ? 0x60 : 0x70) | rateCode)
        let sizeCode: UInt8 = switch bitsPerSample { case 8: 1; case 16: 4; case 24: 6; case 32: 7; default: 0 }
        out.append(UInt8(channels - 1) << 4 | sizeCode << 1)
        out += utf8Coded(frameNumber)
        if frames <= 256 {
            out.append(UInt8(frames - 1))
        } else {
            out.append(UInt8((frames - 1) >> 8))
            out.append(UInt8((frames - 1) & 0xFF))
        }
        out += rateExtra
        out.append(crc8(out))
        let bytes = bitsPerSample / 8
        out.reserveCapacity(out.count + channels * (1 + frames * bytes) + 2)
        for c in 0..<channels {
            out.append(0x02)  // zero bit, type 000001 (VERBATIM), no wasted bits
            for i in 0..<frames {
                let v = UInt32(bitPattern: samples[i * channels + c])
                for b in stride(from: bytes - 1, through: 0, by: -1) { out.append(UInt8(truncatingIfNeeded: v >> (8 * UInt32(b)))) }
            }
        }
        let crc = crc16(out)
        out.append(UInt8(crc >> 8))
        out.append(UInt8(crc & 0xFF))
        return out
    }

    /// The 4-bit sample-rate code and the bytes that follow the header for explicit rates.
    static func sampleRateCode(_ rate: Int) -> (UInt8, [UInt8]) {
        let table: [Int: UInt8] = [88_200: 1, 176_400: 2, 192_000: 3, 8_000: 4, 16_000: 5, 22_050: 6, 24_000: 7,
                                   32_000: 8, 44_100: 9, 48_000: 10, 96_000: 11]
        if let code = table[rate] { return (code, []) }
        if rate % 1000 == 0 && rate / 1000 <= 255 { return (12, [UInt8(rate / 1000)]) }
        if rate <= 65_535 { return (13, [UInt8(rate >> 8), UInt8(rate & 0xFF)]) }
        if rate % 10 == 0 && rate / 10 <= 65_535 { return (14, [UInt8(rate / 10 >> 8), UInt8(rate / 10 & 0xFF)]) }
        return (0, [])  // take it from STREAMINFO
    }

    /// FLAC's "UTF-8" coding of a frame or sample number (up to 36 bits).
    static func utf8Coded(_ value: UInt64) -> [UInt8] {
        if value < 0x80 { return [UInt8(value)] }
        let (count, lead): (Int, UInt8) = value < 0x800 ? (2, 0xC0) : value < 0x1_0000 ? (3, 0xE0)
            : value < 0x20_0000 ? (4, 0xF0) : value < 0x400_0000 ? (5, 0xF8) : value < 0x8000_0000 ? (6, 0xFC) : (7, 0xFE)
        var out = [lead | UInt8(truncatingIfNeeded: value >> (6 * UInt64(count - 1)))]
        for i in stride(from: count - 2, through: 0, by: -1) {
            out.append(0x80 | UInt8(truncatingIfNeeded: (value >> (6 * UInt64(i))) & 0x3F))
        }
        return out
    }

    /// CRC-8, polynomial x^8 + x^2 + x + 1, initial 0 (frame headers).
    static func crc8(_ bytes: [UInt8]) -> UInt8 {
        var crc: UInt8 = 0
        for byte in bytes {
            crc ^= byte
            for _ in 0..<8 { crc = crc & 0x80 != 0 ? (crc << 1) ^ 0x07 : crc << 1 }
        }
        return crc
    }

    /// CRC-16, polynomial x^16 + x^15 + x^2 + 1, initial 0 (whole frames).
    static func crc16(_ bytes: [UInt8]) -> UInt16 {
        var crc: UInt16 = 0
        for byte in bytes {
            crc ^= UInt16(byte) << 8
            for _ in 0..<8 { crc = crc & 0x8000 != 0 ? (crc << 1) ^ 0x8005 : crc << 1 }
        }
        return crc
    }
}
