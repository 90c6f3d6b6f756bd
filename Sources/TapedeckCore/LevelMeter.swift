/// Per-channel peak levels of interleaved frames, from 0 (silence) to 1 (full scale).
public enum LevelMeter {
    /// Updates `peaks` (one entry per channel) with the peaks of `frames` frames at `buffer`.
    /// - Thread: any. Does not allocate when `peaks` already has `format.channels` entries.
    public static func accumulatePeaks(_ buffer: UnsafeRawPointer, frames: Int, format: AudioFormat, into peaks: inout [Float]) {
        let channels = format.channels
        if peaks.count != channels { peaks = Array(repeating: 0, count: channels) }
        let samples = frames * channels
        switch format.sampleFormat {
        case .s16:
            for i in 0..<samples {
                let v = Int16(littleEndian: buffer.loadUnaligned(fromByteOffset: i * 2, as: Int16.self))
                let a = Float(abs(Int32(v))) / 32768
                if a > peaks[i % channels] { peaks[i % channels] = a }
            }
        case .s24:
            for i in 0..<samples {
                let v = Sample24.load(buffer, index: i)
                let a = Float(abs(v)) / 8_388_608
                if a > peaks[i % channels] { peaks[i % channels] = a }
            }
        case .s32:
            for i in 0..<samples {
                let v = Int32(littleEndian: buffer.loadUnaligned(fromByteOffset: i * 4, as: Int32.self))
                let a = Float(abs(Int64(v))) / 2_147_483_648
                if a > peaks[i % channels] { peaks[i % channels] = a }
            }
        case .f32:
            for i in 0..<samples {
                let bits = UInt32(littleEndian: buffer.loadUnaligned(fromByteOffset: i * 4, as: UInt32.self))
                let a = min(abs(Float(bitPattern: bits)), 1)
                if a > peaks[i % channels] { peaks[i % channels] = a }
            }
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
