/// Float samples that no sound makes: NaN, the infinities, and magnitudes past ``limit``
/// (+40 dBFS). A damaged or hostile float file, or a float device with a broken driver, can
/// hold them; the C libraries behind the encoders and analysers cannot take them (LAME asserts
/// and aborts the process on a NaN, an infinity, or noise at about +60 dBFS at its lowest bit
/// rates; libsoxr and libebur128 spread one NaN over everything after it). Tapedeck replaces
/// them once, where frames are read (``SanitizedTakeReader``) or captured: NaN becomes silence
/// (0), everything else full scale with its sign (+1 or −1). Integer samples are always valid.
public enum InvalidSamples {
    /// The largest magnitude kept as it is: 100 (+40 dBFS), far past any real float audio and
    /// far below what LAME's assertions trip on.
    public static let limit: Float = 100

    /// Replaces the invalid samples among `count` packed little-endian 32-bit float samples at
    /// `samples`, in place.
    /// - Returns: how many it replaced.
    /// - Thread: any. Never allocates or blocks.
    public static func replace(in samples: UnsafeMutableRawPointer, count: Int) -> Int {
        var replaced = 0
        var i = 0
        while i < count {
            let x = Float(bitPattern: UInt32(littleEndian: samples.loadUnaligned(fromByteOffset: i &* 4, as: UInt32.self)))
            // False for NaN as well as for a magnitude past the limit (infinities included).
            if !(abs(x) <= limit) {
                let y: Float = x.isNaN ? 0 : (x.sign == .minus ? -1 : 1)
                samples.storeBytes(of: y.bitPattern.littleEndian, toByteOffset: i &* 4, as: UInt32.self)
                replaced &+= 1
            }
            i &+= 1
        }
        return replaced
    }

    /// `1 sample that is NaN, infinite or past +40 dBFS (damaged float audio), taken as silence
    /// where NaN and as full scale otherwise`: what was found and done, for a warning that
    /// names the take and the command's own verb before it.
    /// - Thread: any. Never blocks.
    public static func summary(_ count: Int64) -> String {
        "\(count == 1 ? "1 sample that is" : "\(count) samples that are") NaN, infinite or past +40 dBFS (damaged float audio), "
            + "taken as silence where NaN and as full scale otherwise"
    }
}

/// Delivers another reader's frames with ``InvalidSamples`` replaced, and counts them; frames
/// in an integer format pass through untouched. Every path that reads a take's samples for an
/// encoder, a resampler, an analyser or a device opens it through one of these. Single owner,
/// not `Sendable`, like the reader it wraps.
public final class SanitizedTakeReader: TakeReader {
    /// The reader whose frames this delivers.
    public let base: any TakeReader
    /// Samples replaced so far. - Thread: the owning thread; never blocks.
    public private(set) var replacedSamples: Int64 = 0
    private let floats: Bool

    /// Wraps `base`. - Thread: the owning thread. Never blocks.
    public init(_ base: any TakeReader) {
        self.base = base
        floats = base.format.sampleFormat.isFloat
    }

    public var format: AudioFormat { base.format }
    public var frameCount: Int64 { base.frameCount }
    public var sourceEncoding: String? { base.sourceEncoding }

    /// Reads as the wrapped reader does, then replaces invalid float samples in what it read.
    /// - Thread: the owning thread. Blocks on disk I/O.
    public func read(into buffer: UnsafeMutableRawPointer, maxFrames: Int) throws -> Int {
        let n = try base.read(into: buffer, maxFrames: maxFrames)
        if floats && n > 0 {
            replacedSamples += Int64(InvalidSamples.replace(in: buffer, count: n * base.format.channels))
        }
        return n
    }

    /// Closes the wrapped reader. - Thread: the owning thread. Never blocks for long.
    public func close() { base.close() }
}
