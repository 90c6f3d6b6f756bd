package import TapedeckCore

/// WAV (RIFF or RF64) sent as a stream: the header's `fmt ` chunk, then the `data` chunk's
/// samples as they arrive (a live stream's sizes are 0 or 0xFFFFFFFF and are not trusted).
/// 8-, 16-, 24- and 32-bit integer and 32-bit float PCM, extensible or not.
package final class WAVStreamDecoder: StreamDecoder {
    package let codec = "WAV"
    package let sampleRate: Int
    package let channels: Int
    package let nativeFormat: SampleFormat?
    private let bytes: StreamBytes
    private let sample: PCMSample
    private var raw: [UInt8] = []
    /// Bytes of an incomplete frame left from the last read.
    private var carry = 0

    package init(_ bytes: StreamBytes) throws {
        self.bytes = bytes
        var header = [UInt8](repeating: 0, count: 12)
        guard Self.readFully(bytes, &header, 12) else { throw bytes.end ?? StreamEnd(reason: "ended inside its WAV header") }
        var fmt: (tag: Int, channels: Int, rate: Int, bits: Int)?
        while true {
            var chunk = [UInt8](repeating: 0, count: 8)
            guard Self.readFully(bytes, &chunk, 8) else { throw bytes.end ?? StreamEnd(reason: "ended inside its WAV header") }
            let id = String(decoding: chunk[0..<4], as: UTF8.self)
            let size = Int(UInt32(chunk[4]) | UInt32(chunk[5]) << 8 | UInt32(chunk[6]) << 16 | UInt32(chunk[7]) << 24)
            if id == "data" { break }
            guard size <= 1 << 16 else { throw StreamEnd(reason: "sent a WAV header with a \(size)-byte \(id) chunk") }
            var body = [UInt8](repeating: 0, count: size + (size & 1))
            guard Self.readFully(bytes, &body, body.count) else { throw bytes.end ?? StreamEnd(reason: "ended inside its WAV header") }
            if id == "fmt ", size >= 16 {
                func u16(_ i: Int) -> Int { Int(body[i]) | Int(body[i + 1]) << 8 }
                var tag = u16(0)
                if tag == 0xFFFE, size >= 26 { tag = u16(24) }  // WAVE_FORMAT_EXTENSIBLE: the subformat's first two bytes
                fmt = (tag, u16(2), u16(4) | u16(6) << 16, u16(14))
            }
        }
        guard let fmt else { throw StreamEnd(reason: "sent a WAV stream without a fmt chunk") }
        guard let sample = PCMSample(bits: fmt.bits, float: fmt.tag == 3, bigEndian: false), fmt.tag == 1 || fmt.tag == 3,
              AudioFormat.channelRange.contains(fmt.channels), AudioFormat.sampleRateRange.contains(fmt.rate) else {
            throw StreamEnd(reason: "sent WAV audio Tapedeck does not record (format \(fmt.tag), \(fmt.bits)-bit, \(fmt.channels) channels, \(fmt.rate) Hz)")
        }
        self.sample = sample
        sampleRate = fmt.rate
        channels = fmt.channels
        nativeFormat = sample.nativeFormat
    }

    private static func readFully(_ bytes: StreamBytes, _ buffer: inout [UInt8], _ count: Int) -> Bool {
        var got = 0
        while got < count {
            let n = buffer.withUnsafeMutableBytes { bytes.read(into: $0.baseAddress! + got, count: count - got) }
            if n == 0 { return false }
            got += n
        }
        return true
    }

    package func decode(into buffer: UnsafeMutablePointer<Float>, maxFrames: Int) -> Int {
        let frameBytes = sample.bytes * channels
        let want = maxFrames * frameBytes
        if raw.count < want { raw += [UInt8](repeating: 0, count: want - raw.count) }
        var have = carry
        while have < frameBytes {
            let n = raw.withUnsafeMutableBytes { bytes.read(into: $0.baseAddress! + have, count: want - have) }
            if n == 0 { return 0 }
            have += n
        }
        let frames = have / frameBytes
        raw.withUnsafeBytes { sample.convert($0.baseAddress!, count: frames * channels, into: buffer) }
        carry = have - frames * frameBytes
        if carry > 0 { raw.withUnsafeMutableBytes { $0.baseAddress!.copyMemory(from: $0.baseAddress! + frames * frameBytes, byteCount: carry) } }
        return frames
    }

    package func close() {}
}

/// One PCM sample layout on the wire (WAV's little-endian, RTP's big-endian L16/L24) and its
/// conversion to float. A plain value; any thread; never allocates.
package struct PCMSample: Sendable, Hashable {
    package let bytes: Int
    package let float: Bool
    package let bigEndian: Bool

    package init?(bits: Int, float: Bool, bigEndian: Bool) {
        guard float ? bits == 32 : [8, 16, 24, 32].contains(bits) else { return nil }
        bytes = bits / 8
        self.float = float
        self.bigEndian = bigEndian
    }

    /// The take's sample format that keeps every bit.
    package var nativeFormat: SampleFormat { float ? .f32 : bytes <= 2 ? .s16 : bytes == 3 ? .s24 : .s32 }

    /// Converts `count` samples at `source` into floats.
    package func convert(_ source: UnsafeRawPointer, count: Int, into output: UnsafeMutablePointer<Float>) {
        let p = source.assumingMemoryBound(to: UInt8.self)
        for i in 0..<count {
            let s = p + i * bytes
            var u: UInt32 = 0
            for k in 0..<bytes { u |= UInt32(s[bigEndian ? k : bytes - 1 - k]) << (8 * (bytes - 1 - k)) }
            if float {
                output[i] = Float(bitPattern: u)
            } else if bytes == 1 {
                output[i] = (Float(u) - 128) / 128  // WAV's 8-bit samples are unsigned
            } else {
                let shifted = Int32(bitPattern: u << (32 - 8 * UInt32(bytes)))
                output[i] = Float(shifted) / 2_147_483_648
            }
        }
    }
}
