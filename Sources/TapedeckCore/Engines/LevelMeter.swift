/// Per-channel peak levels of interleaved frames, from 0 (silence) to 1 (full scale).
public enum LevelMeter {
    /// Updates `peaks` (one entry per channel) with the peaks of `frames` frames at `buffer`.
    /// - Thread: any. Does not allocate when `peaks` already has `format.channels` entries.
    public static func accumulatePeaks(_ buffer: UnsafeRawPointer, frames: Int, format: AudioFormat, into peaks: inout [Float]) {
        let channels = format.channels
        if peaks.count != channels { peaks = Array(repeating: 0, count: channels) }
        // One pass per channel with a stride: no division or bounds check per sample.
        for c in 0..<channels {
            var i = c
            let end = frames &* channels
            var peak: Float = 0
            switch format.sampleFormat {
            case .s16:
                var m: Int32 = 0
                while i < end {
                    m = max(m, abs(Int32(Int16(littleEndian: buffer.loadUnaligned(fromByteOffset: i &* 2, as: Int16.self)))))
                    i &+= channels
                }
                peak = Float(m) / 32_768
            case .s24:
                var m: Int32 = 0
                while i < end {
                    m = max(m, abs(Sample24.load(buffer, index: i)))
                    i &+= channels
                }
                peak = Float(m) / 8_388_608
            case .s32:
                var m: Int64 = 0
                while i < end {
                    m = max(m, abs(Int64(Int32(littleEndian: buffer.loadUnaligned(fromByteOffset: i &* 4, as: Int32.self)))))
                    i &+= channels
                }
                peak = Float(m) / 2_147_483_648
            case .f32:
                while i < end {
                    let bits = UInt32(littleEndian: buffer.loadUnaligned(fromByteOffset: i &* 4, as: UInt32.self))
                    peak = max(peak, min(abs(Float(bitPattern: bits)), 1))
                    i &+= channels
                }
            }
            if peak > peaks[c] { peaks[c] = peak }
        }
    }
}

/// Reads and writes packed little-endian 24-bit samples.
public enum Sample24 {
    /// The sample at `index` (in samples, not bytes), sign-extended.
    @inline(__always)
    public static func load(_ buffer: UnsafeRawPointer, index: Int) -> Int32 {
        let p = buffer + index * 3
        let b0 = UInt32(p.load(fromByteOffset: 0, as: UInt8.self))
        let b1 = UInt32(p.load(fromByteOffset: 1, as: UInt8.self))
        let b2 = UInt32(p.load(fromByteOffset: 2, as: UInt8.self))
        return Int32(bitPattern: (b0 << 8) | (b1 << 16) | (b2 << 24)) >> 8
    }

    /// Stores `value` (only its low 24 bits) at sample `index`.
    @inline(__always)
    public static func store(_ value: Int32, _ buffer: UnsafeMutableRawPointer, index: Int) {
        let u = UInt32(bitPattern: value)
        let p = buffer + index * 3
        p.storeBytes(of: UInt8(truncatingIfNeeded: u), toByteOffset: 0, as: UInt8.self)
        p.storeBytes(of: UInt8(truncatingIfNeeded: u >> 8), toByteOffset: 1, as: UInt8.self)
        p.storeBytes(of: UInt8(truncatingIfNeeded: u >> 16), toByteOffset: 2, as: UInt8.self)
    }
}
