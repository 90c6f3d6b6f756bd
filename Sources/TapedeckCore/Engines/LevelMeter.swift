/// Per-channel peak levels of interleaved frames, from 0 (silence) to 1 (full scale).
public enum LevelMeter {
    /// Updates `peaks` (one entry per channel) with the peaks of `frames` frames at `buffer`, and
    /// adds to `clipped` the samples at full scale (the largest or smallest integer; ±1.0 or
    /// beyond for float), which is where a converter that clipped leaves them.
    /// - Thread: any. Does not allocate when `peaks` already has `format.channels` entries.
    public static func accumulatePeaks(_ buffer: UnsafeRawPointer, frames: Int, format: AudioFormat, into peaks: inout [Float]) {
        var clipped: Int64 = 0
        accumulatePeaks(buffer, frames: frames, format: format, into: &peaks, clipped: &clipped)
    }

    /// As above, counting full-scale samples into `clipped`.
    public static func accumulatePeaks(_ buffer: UnsafeRawPointer, frames: Int, format: AudioFormat, into peaks: inout [Float],
                                       clipped: inout Int64) {
        accumulate(buffer, frames: frames, format: format, into: &peaks, clipped: &clipped, squares: nil)
    }

    /// As above, adding each channel's sum of squared samples (full scale 1) to `squares` (one
    /// entry per channel; made so when it has another count), for the RMS level.
    public static func accumulatePeaks(_ buffer: UnsafeRawPointer, frames: Int, format: AudioFormat, into peaks: inout [Float],
                                       clipped: inout Int64, squares: inout [Double]) {
        if squares.count != format.channels { squares = Array(repeating: 0, count: format.channels) }
        squares.withUnsafeMutableBufferPointer { sums in
            accumulate(buffer, frames: frames, format: format, into: &peaks, clipped: &clipped, squares: sums.baseAddress)
        }
    }

    private static func accumulate(_ buffer: UnsafeRawPointer, frames: Int, format: AudioFormat, into peaks: inout [Float],
                                   clipped: inout Int64, squares: UnsafeMutablePointer<Double>?) {
        var clips: Int64 = 0
        let channels = format.channels
        if peaks.count != channels { peaks = Array(repeating: 0, count: channels) }
        // One pass per channel with a stride: no division or bounds check per sample.
        for c in 0..<channels {
            var i = c
            let end = frames &* channels
            var peak: Float = 0
            // The sum of squares in the sample's own scale, brought to full scale 1 after the loop.
            var sum: Double = 0
            var scale: Double = 1
            switch format.sampleFormat {
            case .s16:
                // Squares summed as integers (each at most 2^30: no overflow before 2^33 samples),
                // so no floating-point add waits for the one before it.
                var m: Int32 = 0
                var integerSum: Int64 = 0
                var clipCount: Int64 = 0
                while i < end {
                    let v = Int32(Int16(littleEndian: buffer.loadUnaligned(fromByteOffset: i &* 2, as: Int16.self)))
                    m = max(m, abs(v))
                    integerSum &+= Int64(v &* v)
                    clipCount &+= (v >= 32_767 || v <= -32_768) ? 1 : 0
                    i &+= channels
                }
                sum = Double(integerSum)
                clips &+= clipCount
                peak = Float(m) / 32_768
                scale = 32_768 * 32_768
            case .s24:
                var m: Int32 = 0
                while i < end {
                    let v = Sample24.load(buffer, index: i)
                    m = max(m, abs(v))
                    sum += Double(v) * Double(v)
                    if v >= 8_388_607 || v <= -8_388_608 { clips &+= 1 }
                    i &+= channels
                }
                peak = Float(m) / 8_388_608
                scale = 8_388_608 * 8_388_608
            case .s32:
                var m: Int64 = 0
                while i < end {
                    let v = Int64(Int32(littleEndian: buffer.loadUnaligned(fromByteOffset: i &* 4, as: Int32.self)))
                    m = max(m, abs(v))
                    sum += Double(v) * Double(v)
                    if v >= 2_147_483_647 || v <= -2_147_483_648 { clips &+= 1 }
                    i &+= channels
                }
                peak = Float(m) / 2_147_483_648
                scale = 2_147_483_648 * 2_147_483_648
            case .f32:
                while i < end {
                    let bits = UInt32(littleEndian: buffer.loadUnaligned(fromByteOffset: i &* 4, as: UInt32.self))
                    let a = abs(Float(bitPattern: bits))
                    peak = max(peak, min(a, 1))
                    if a.isFinite { sum += Double(a) * Double(a) }
                    if a >= 1 { clips &+= 1 }
                    i &+= channels
                }
            }
            if peak > peaks[c] { peaks[c] = peak }
            squares?[c] += sum / scale
        }
        clipped &+= clips
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
