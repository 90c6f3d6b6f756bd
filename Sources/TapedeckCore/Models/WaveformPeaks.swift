/// A take's waveform overview: the lowest and highest sample of every block of
/// ``framesPerPoint`` frames, over all channels, as 16-bit values (−32768…32767), in the style
/// of BBC audiowaveform's peak files.
///
/// Stored as audiowaveform's binary `.dat` format, version 1, 16-bit (``datFile``), so its own
/// tools and peaks.js read it too. A plain value; any thread.
public struct WaveformPeaks: Sendable, Hashable {
    /// Sample rate of the take the peaks describe.
    public var sampleRate: Int
    /// Frames per point (audiowaveform's "samples per pixel").
    public var framesPerPoint: Int
    /// Per point: the lowest and highest sample.
    public var minimums: [Int16]
    public var maximums: [Int16]

    public init(sampleRate: Int, framesPerPoint: Int, minimums: [Int16], maximums: [Int16]) {
        self.sampleRate = sampleRate
        self.framesPerPoint = framesPerPoint
        self.minimums = minimums
        self.maximums = maximums
    }

    /// Number of points.
    public var count: Int { min(minimums.count, maximums.count) }

    /// The peaks as an audiowaveform `.dat` file (version 1, 16-bit, little-endian).
    public var datFile: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(20 + 4 * count)
        func put32(_ v: UInt32) { for i in 0..<4 { out.append(UInt8(truncatingIfNeeded: v >> (8 * UInt32(i)))) } }
        func put16(_ v: Int16) { let u = UInt16(bitPattern: v); out.append(UInt8(u & 0xFF)); out.append(UInt8(u >> 8)) }
        put32(1)  // version
        put32(0)  // flags: 16-bit
        put32(UInt32(clamping: sampleRate))
        put32(UInt32(clamping: framesPerPoint))
        put32(UInt32(count))
        for i in 0..<count {
            put16(minimums[i])
            put16(maximums[i])
        }
        return out
    }

    /// Reads an audiowaveform `.dat` file (version 1 or 2, one channel, 8 or 16 bit); `nil` for
    /// anything else (a damaged or foreign file is recomputed, never trusted). At most
    /// `maxPoints` points are accepted.
    public init?(datFile bytes: [UInt8], maxPoints: Int = 1 << 20) {
        func u32(_ at: Int) -> UInt32? {
            guard at + 4 <= bytes.count else { return nil }
            return (0..<4).reduce(UInt32(0)) { $0 | UInt32(bytes[at + $1]) << (8 * UInt32($1)) }
        }
        guard let version = u32(0), version == 1 || version == 2, let flags = u32(4), let rate = u32(8),
              let perPoint = u32(12), let length = u32(16), rate > 0, perPoint > 0, Int(length) <= maxPoints else { return nil }
        var offset = 20
        if version == 2 {
            guard let channels = u32(20), channels == 1 else { return nil }
            offset = 24
        }
        let eightBit = flags & 1 == 1
        let width = eightBit ? 1 : 2
        guard bytes.count == offset + Int(length) * 2 * width else { return nil }
        var mins: [Int16] = [], maxs: [Int16] = []
        mins.reserveCapacity(Int(length))
        maxs.reserveCapacity(Int(length))
        func value(_ at: Int) -> Int16 {
            eightBit ? Int16(Int8(bitPattern: bytes[at])) * 256 : Int16(bitPattern: UInt16(bytes[at]) | UInt16(bytes[at + 1]) << 8)
        }
        for i in 0..<Int(length) {
            let at = offset + i * 2 * width
            mins.append(value(at))
            maxs.append(value(at + width))
        }
        self.init(sampleRate: Int(rate), framesPerPoint: Int(perPoint), minimums: mins, maximums: maxs)
    }
}

/// Builds ``WaveformPeaks`` from float audio in one pass with memory that never grows: it
/// starts at ``initialFramesPerPoint`` and, each time the points reach ``capacity``, merges them
/// in pairs and doubles the frames per point. A take of any length ends with between
/// `capacity / 2` and `capacity` points (fewer only when it is short).
///
/// A plain value; use from one thread (the writer's, or the one decoding a take). Never
/// allocates after `init`.
public struct WaveformBuilder: Sendable {
    public static let initialFramesPerPoint = 32
    public let capacity: Int
    private let sampleRate: Int
    private var framesPerPoint: Int
    private var mins: [Int16]
    private var maxs: [Int16]
    private var count = 0
    private var blockMin: Float = .infinity
    private var blockMax: Float = -.infinity
    private var blockFrames = 0

    /// - Parameters:
    ///   - sampleRate: the audio's frames per second, given to the peaks built.
    ///   - capacity: the most points kept (even; 4096 draws a phone-wide overview with
    ///     room to zoom twice).
    public init(sampleRate: Int, capacity: Int = 4096) {
        self.sampleRate = sampleRate
        self.capacity = max(2, capacity & ~1)
        framesPerPoint = Self.initialFramesPerPoint
        mins = [Int16](repeating: 0, count: self.capacity)
        maxs = mins
    }

    /// Adds `frames` frames of interleaved float audio (`channels` per frame).
    public mutating func add(_ samples: UnsafePointer<Float>, frames: Int, channels: Int) {
        guard channels > 0 else { return }
        var done = 0
        while done < frames {
            // The frames up to the end of the block, as one run of samples with two pairs of
            // running extremes (no compare waits for the one before it).
            let run = min(framesPerPoint - blockFrames, frames - done)
            let p = samples + done &* channels
            let n = run &* channels
            var (lo0, hi0, lo1, hi1) = (blockMin, blockMax, blockMin, blockMax)
            var k = 0
            while k &+ 1 < n {
                let a = p[k], b = p[k &+ 1]
                if a < lo0 { lo0 = a }
                if a > hi0 { hi0 = a }
                if b < lo1 { lo1 = b }
                if b > hi1 { hi1 = b }
                k &+= 2
            }
            if k < n {
                if p[k] < lo0 { lo0 = p[k] }
                if p[k] > hi0 { hi0 = p[k] }
            }
            blockMin = lo1 < lo0 ? lo1 : lo0
            blockMax = hi1 > hi0 ? hi1 : hi0
            blockFrames += run
            done += run
            if blockFrames == framesPerPoint { closeBlock() }
        }
    }

    /// Ends the block being filled; when that fills the points, they are halved at once, so the
    /// next block is filled at the new ``framesPerPoint`` and every point covers as many frames.
    private mutating func closeBlock() {
        mins[count] = Self.quantize(blockMin)
        maxs[count] = Self.quantize(blockMax)
        count += 1
        blockMin = .infinity
        blockMax = -.infinity
        blockFrames = 0
        if count == capacity { fold() }
    }

    /// Halves the points: each new one covers two old ones.
    private mutating func fold() {
        for j in 0..<(count / 2) {
            mins[j] = min(mins[2 * j], mins[2 * j + 1])
            maxs[j] = max(maxs[2 * j], maxs[2 * j + 1])
        }
        count /= 2
        framesPerPoint *= 2
    }

    private static func quantize(_ s: Float) -> Int16 {
        guard s.isFinite else { return s.isNaN ? 0 : (s > 0 ? .max : .min) }
        return Int16(max(-32768, min(32767, (s * 32768).rounded())))
    }

    /// The peaks so far; a last block shorter than the others counts as a point.
    public func peaks() -> WaveformPeaks {
        var copy = self
        if copy.blockFrames > 0 {
            copy.mins[copy.count] = Self.quantize(copy.blockMin)
            copy.maxs[copy.count] = Self.quantize(copy.blockMax)
            copy.count += 1
        }
        return WaveformPeaks(sampleRate: sampleRate, framesPerPoint: copy.framesPerPoint,
                             minimums: Array(copy.mins[0..<copy.count]), maximums: Array(copy.maxs[0..<copy.count]))
    }
}

/// A ``WaveformBuilder`` fed with audio in any of Tapedeck's sample formats: each block is
/// converted to float in a buffer allocated once, at `init`. Single owner (the writer thread, or
/// the thread decoding a take); never allocates after `init`, never blocks.
public final class WaveformTap {
    private var builder: WaveformBuilder
    private let converter: SampleConverter
    private let channels: Int
    private let scratch: UnsafeMutablePointer<Float>
    private let scratchFrames = 4096
    private let bytesPerFrame: Int

    public init(format: AudioFormat) {
        builder = WaveformBuilder(sampleRate: format.sampleRate)
        converter = SampleConverter(from: format, to: .f32)
        channels = format.channels
        bytesPerFrame = format.bytesPerFrame
        scratch = .allocate(capacity: scratchFrames * max(1, format.channels))
    }

    deinit { scratch.deallocate() }

    /// Adds `frames` frames in the tap's format.
    public func add(_ buffer: UnsafeRawPointer, frames: Int) {
        var done = 0
        while done < frames {
            let n = min(scratchFrames, frames - done)
            converter.convert(buffer + done * bytesPerFrame, into: UnsafeMutableRawPointer(scratch), frames: n)
            builder.add(scratch, frames: n, channels: channels)
            done += n
        }
    }

    /// The peaks of everything added.
    public func peaks() -> WaveformPeaks { builder.peaks() }
}
