import CEBUR128
import Foundation
public import TapedeckCore

/// EBU R128 / ITU-R BS.1770-4 loudness over libebur128: integrated loudness, loudness range,
/// true peak, and the highest momentary and short-term loudness.
///
/// Meters use libebur128's histogram mode, so their memory stays the same however long the take
/// (a take of a day keeps no list of its blocks). Channels are weighted by their speaker
/// position: LFE is left out, back and side channels count 1.41×, as BS.1770 says.
public struct EBUR128Analyzer: LoudnessAnalyzer {
    /// - Thread: any. Does not block.
    public init() {}

    /// The linked libebur128, e.g. `libebur128 1.2.6`. - Thread: any; never blocks.
    public static var library: String {
        var major: Int32 = 0, minor: Int32 = 0, patch: Int32 = 0
        ebur128_get_version(&major, &minor, &patch)
        return "libebur128 \(major).\(minor).\(patch)"
    }

    /// A meter for `format`, all its work on the caller's thread. - Thread: any. Does not block.
    /// - Throws: `.unsupportedFormat` if libebur128 refuses the rate or channel count.
    public func makeMeter(for format: AudioFormat) throws -> any LoudnessMeter {
        try EBUR128Meter(format: format, truePeak: true)
    }

    /// A meter whose work runs on threads of its own (the loudness on one, the true peak,
    /// libebur128's 4× oversampling and most of the work, on two: half the channels each), so
    /// that it spreads over the cores and leaves the caller free: the same figures as
    /// ``makeMeter(for:)``. - Thread: any. Does not block; the meter's `result()`
    /// waits for its threads.
    public func makeFastMeter(for format: AudioFormat) throws -> any LoudnessMeter {
        try EBUR128SplitMeter(format: format)
    }
}

/// The libebur128 state of the loudness (and, when asked, the true peak). Single owner, not
/// `Sendable`: fed and read on one thread; never blocks.
///
/// The highest momentary (400 ms) and short-term (3 s) loudness are read at every 100 ms step.
/// Asking libebur128 for them sums 400 ms and 3 s of samples each time; where a step is a whole
/// number of frames (every rate divisible by 10) they are made instead from the energies of the
/// last 4 and 30 steps (libebur128's own 100 ms windows): the same sums in another order.
final class EBUR128Meter: LoudnessMeter {
    private var state: UnsafeMutablePointer<ebur128_state>?
    private let format: AudioFormat
    private let truePeak: Bool
    var sampleRate: Int { format.sampleRate }
    /// Frames in one 100 ms step, at which momentary and short-term loudness are read.
    private let step: Int
    /// Whether the steps' energies make the momentary and short-term loudness (see above).
    private let fromSteps: Bool
    /// The last 30 steps' energies, a ring, and how many steps there were.
    private var energies = [Double](repeating: 0, count: 30)
    private var steps = 0
    /// Frames added since the last step.
    private var inStep = 0
    /// Frames added in all.
    private var total = 0
    private var maxMomentary = -Double.infinity
    private var maxShortTerm = -Double.infinity
    /// 24-bit samples widened to 32 bits (libebur128 reads int, short, float and double).
    private var wide: [Int32] = []

    /// `windowed`: the maxima from the steps' windows where the rate allows (`false`: libebur128
    /// asked for them at every step, as a reference).
    init(format: AudioFormat, truePeak: Bool, windowed: Bool = true) throws {
        self.format = format
        self.truePeak = truePeak
        step = max(1, format.sampleRate / 10)
        fromSteps = windowed && format.sampleRate % 10 == 0
        var mode = EBUR128_MODE_I.rawValue | EBUR128_MODE_LRA.rawValue | EBUR128_MODE_M.rawValue | EBUR128_MODE_S.rawValue | EBUR128_MODE_HISTOGRAM.rawValue
        if truePeak { mode |= EBUR128_MODE_TRUE_PEAK.rawValue }
        guard let state = ebur128_init(UInt32(format.channels), UInt(format.sampleRate), Int32(mode)) else {
            throw TapedeckError(.unsupportedFormat, "Loudness cannot be measured at \(format.sampleRate) Hz with \(format.channels) channels.")
        }
        self.state = state
        if format.channels > 1 {
            for (i, position) in Self.positions(format).enumerated() {
                _ = ebur128_set_channel(state, UInt32(i), Int32(position.rawValue))
            }
        }
    }

    deinit { ebur128_destroy(&state) }

    /// libebur128's channel for each of the format's channels, from the layout's speakers.
    static func positions(_ format: AudioFormat) -> [channel] {
        let speakers = format.layout.speakers
        return (0..<format.channels).map { i in
            guard i < speakers.count else { return format.layout == .discrete ? EBUR128_LEFT : EBUR128_UNUSED }
            switch speakers[i] {
            case .frontLeft: return EBUR128_LEFT
            case .frontRight: return EBUR128_RIGHT
            case .frontCenter: return EBUR128_CENTER
            case .lowFrequency: return EBUR128_UNUSED
            case .backLeft, .sideLeft: return EBUR128_LEFT_SURROUND
            case .backRight, .sideRight: return EBUR128_RIGHT_SURROUND
            case .frontLeftOfCenter: return EBUR128_Mp030
            case .frontRightOfCenter: return EBUR128_Mm030
            case .backCenter: return EBUR128_Mp180
            case .topCenter: return EBUR128_Tp000
            case .topFrontLeft: return EBUR128_Up030
            case .topFrontCenter: return EBUR128_Up000
            case .topFrontRight: return EBUR128_Um030
            case .topBackLeft: return EBUR128_Up135
            case .topBackCenter: return EBUR128_Up180
            case .topBackRight: return EBUR128_Um135
            }
        }
    }

    func add(_ buffer: UnsafeRawPointer, frames: Int) {
        var done = 0
        while done < frames {
            // Up to the next 100 ms step, so that momentary and short-term loudness are read at
            // every step, as BS.1770 slides its windows.
            let n = min(frames - done, step - inStep)
            Self.feed(state, format: format, buffer + done * format.bytesPerFrame, frames: n, wide: &wide)
            done += n
            inStep += n
            total += n
            if inStep == step {
                inStep = 0
                stepped()
            }
        }
    }

    /// A 100 ms step ended: the momentary and short-term loudness now.
    private func stepped() {
        var value = -Double.infinity
        guard fromSteps else {
            if total >= step * 4, ebur128_loudness_momentary(state, &value) == 0 { maxMomentary = max(maxMomentary, value) }
            if total >= step * 30, ebur128_loudness_shortterm(state, &value) == 0 { maxShortTerm = max(maxShortTerm, value) }
            return
        }
        guard ebur128_loudness_window(state, 100, &value) == 0 else { return }
        energies[steps % 30] = value == -.infinity ? 0 : pow(10, (value + 0.691) / 10)
        steps += 1
        if steps >= 4 { maxMomentary = max(maxMomentary, Self.loudness(ofLast: 4, energies, steps: steps)) }
        if steps >= 30 { maxShortTerm = max(maxShortTerm, Self.loudness(ofLast: 30, energies, steps: steps)) }
    }

    /// The loudness of the mean energy of the last `n` steps (BS.1770: −0.691 + 10 log10).
    private static func loudness(ofLast n: Int, _ energies: [Double], steps: Int) -> Double {
        var sum = 0.0
        for i in (steps - n)..<steps { sum += energies[i % 30] }
        return sum > 0 ? -0.691 + 10 * log10(sum / Double(n)) : -.infinity
    }

    /// Feeds `frames` interleaved frames of `format` to `state`.
    static func feed(_ state: UnsafeMutablePointer<ebur128_state>?, format: AudioFormat, _ pointer: UnsafeRawPointer, frames: Int, wide: inout [Int32]) {
        guard frames > 0 else { return }
        let samples = frames * format.channels
        switch format.sampleFormat {
        case .s16: _ = ebur128_add_frames_short(state, pointer.assumingMemoryBound(to: Int16.self), frames)
        case .s32: _ = ebur128_add_frames_int(state, pointer.assumingMemoryBound(to: Int32.self), frames)
        case .f32: _ = ebur128_add_frames_float(state, pointer.assumingMemoryBound(to: Float.self), frames)
        case .s24:
            if wide.count < samples { wide = Array(repeating: 0, count: samples) }
            let bytes = pointer.assumingMemoryBound(to: UInt8.self)
            wide.withUnsafeMutableBufferPointer { out in
                for i in 0..<samples {
                    let b = bytes + i * 3
                    out[i] = Int32(bitPattern: UInt32(b[0]) << 8 | UInt32(b[1]) << 16 | UInt32(b[2]) << 24)
                }
                _ = ebur128_add_frames_int(state, out.baseAddress, frames)
            }
        }
    }

    /// The loudness; `truePeak` from this state when it measures it, else the one given (linear).
    func result(truePeak given: Double? = nil) -> Loudness {
        var integrated = -Double.infinity, range = 0.0
        _ = ebur128_loudness_global(state, &integrated)
        _ = ebur128_loudness_range(state, &range)
        let peak = truePeak ? TruePeakMeter.peak(of: state, channels: format.channels) : given ?? 0
        return Loudness(integrated: integrated, range: range, truePeak: peak > 0 ? 20 * log10(peak) : nil,
                        maxMomentary: maxMomentary, maxShortTerm: maxShortTerm)
    }

    func result() -> Loudness { result(truePeak: nil) }
}

/// The true peak of some of a format's channels: a libebur128 state of those channels alone in
/// true-peak mode (each channel's oversampling is its own, so the peak is the one a state of all
/// the channels finds). Single owner; never blocks.
final class TruePeakMeter {
    private var state: UnsafeMutablePointer<ebur128_state>?
    private let format: AudioFormat
    private let channels: [Int]
    private var picked: [Int32] = []
    private var pickedFloat: [Float] = []

    init(format: AudioFormat, channels: [Int]) throws {
        self.format = format
        self.channels = channels
        guard let state = ebur128_init(UInt32(channels.count), UInt(format.sampleRate), Int32(EBUR128_MODE_TRUE_PEAK.rawValue)) else {
            throw TapedeckError(.unsupportedFormat, "Loudness cannot be measured at \(format.sampleRate) Hz with \(format.channels) channels.")
        }
        self.state = state
    }

    deinit { ebur128_destroy(&state) }

    /// Adds `frames` interleaved frames of the whole format: this meter's channels are taken out.
    func add(_ buffer: UnsafeRawPointer, frames: Int) {
        guard frames > 0 else { return }
        let (all, mine) = (format.channels, channels.count)
        if format.sampleFormat == .f32 {
            if pickedFloat.count < frames * mine { pickedFloat = Array(repeating: 0, count: frames * mine) }
            let input = buffer.assumingMemoryBound(to: Float.self)
            pickedFloat.withUnsafeMutableBufferPointer { out in
                for f in 0..<frames { for (j, c) in channels.enumerated() { out[f * mine + j] = input[f * all + c] } }
                _ = ebur128_add_frames_float(state, out.baseAddress, frames)
            }
            return
        }
        if picked.count < frames * mine { picked = Array(repeating: 0, count: frames * mine) }
        picked.withUnsafeMutableBufferPointer { out in
            // Every integer format as 32 bits, full scale at 2³¹ (libebur128 scales short and int alike).
            switch format.sampleFormat {
            case .s16:
                let input = buffer.assumingMemoryBound(to: Int16.self)
                for f in 0..<frames { for (j, c) in channels.enumerated() { out[f * mine + j] = Int32(input[f * all + c]) << 16 } }
            case .s24:
                let bytes = buffer.assumingMemoryBound(to: UInt8.self)
                for f in 0..<frames {
                    for (j, c) in channels.enumerated() {
                        let b = bytes + (f * all + c) * 3
                        out[f * mine + j] = Int32(bitPattern: UInt32(b[0]) << 8 | UInt32(b[1]) << 16 | UInt32(b[2]) << 24)
                    }
                }
            default:
                let input = buffer.assumingMemoryBound(to: Int32.self)
                for f in 0..<frames { for (j, c) in channels.enumerated() { out[f * mine + j] = input[f * all + c] } }
            }
            _ = ebur128_add_frames_int(state, out.baseAddress, frames)
        }
    }

    /// The highest true peak of this meter's channels (linear, 1 = full scale).
    var peak: Double { Self.peak(of: state, channels: channels.count) }

    static func peak(of state: UnsafeMutablePointer<ebur128_state>?, channels: Int) -> Double {
        var peak = 0.0
        for c in 0..<channels {
            var p = 0.0
            if ebur128_true_peak(state, UInt32(c), &p) == 0 { peak = max(peak, p) }
        }
        return peak
    }
}

/// ``EBUR128Analyzer/makeFastMeter(for:)``: threads of its own measure what the caller hands
/// over, one the loudness (K-weighting, gating blocks, momentary and short-term) and two the true
/// peak of half the channels each (one for mono). The caller only copies each block once (the
/// threads share the copy), so it is free for its own work (decoding, converting, writing an
/// export) and the operating system spreads the threads over the cores. Each thread's queue is
/// short: the caller waits when one is full, so memory stays a few blocks.
/// ``result()`` waits for the threads' last blocks. Single owner (the caller), not `Sendable`.
final class EBUR128SplitMeter: LoudnessMeter {
    private let loudness: EBUR128Meter
    private let peaks: [TruePeakMeter]
    private let workers: [BlockWorker]
    private let bytesPerFrame: Int

    init(format: AudioFormat) throws {
        let loudness = try EBUR128Meter(format: format, truePeak: false)
        let half = format.channels / 2
        let groups = half > 0 ? [Array(0..<half), Array(half..<format.channels)] : [Array(0..<format.channels)]
        let peaks = try groups.map { try TruePeakMeter(format: format, channels: $0) }
        self.loudness = loudness
        self.peaks = peaks
        bytesPerFrame = format.bytesPerFrame
        workers = [BlockWorker(name: "tapedeck-lufs", Unchecked(loudness.add))]
            + peaks.map { BlockWorker(name: "tapedeck-peak", Unchecked($0.add)) }
    }

    deinit { for worker in workers { worker.finish() } }

    /// Frames gathered for the next hand-over (blocks of about 250 ms: fewer wake-ups than the
    /// decoder's small blocks would make).
    private var pending = Data()
    private var pendingFrames = 0
    private lazy var handOverFrames = max(1024, loudness.sampleRate / 4)

    func add(_ buffer: UnsafeRawPointer, frames: Int) {
        guard frames > 0 else { return }
        pending.append(buffer.assumingMemoryBound(to: UInt8.self), count: frames * bytesPerFrame)
        pendingFrames += frames
        if pendingFrames >= handOverFrames { handOver() }
    }

    private func handOver() {
        guard pendingFrames > 0 else { return }
        for worker in workers { worker.hand(pending, frames: pendingFrames) }
        pending = Data(capacity: (handOverFrames + 8192) * bytesPerFrame)
        pendingFrames = 0
    }

    func result() -> Loudness {
        handOver()
        for worker in workers { worker.finish() }
        return loudness.result(truePeak: peaks.map(\.peak).max() ?? 0)
    }
}

/// A function that is only ever called on one thread at a time (a meter's `add`, handed to the
/// thread that owns the meter until ``BlockWorker/finish()``).
struct Unchecked<Function>: @unchecked Sendable {
    let function: Function
    init(_ function: Function) { self.function = function }
}

/// A thread that runs a function on the blocks handed to it, in order.
/// - Thread: ``hand(_:frames:)`` and ``finish()`` from the meter's owner; blocks while the queue
///   is full (``hand``) or until the last block is done (``finish``).
final class BlockWorker: @unchecked Sendable {
    private let condition = NSCondition()
    private var queue: [(Data, Int)] = []
    private var closed = false
    private var done = false
    private static let depth = 8

    /// `name`: the thread's, at most 15 characters (what Linux keeps).
    init(name: String, _ work: Unchecked<(UnsafeRawPointer, Int) -> Void>) {
        let thread = Thread { [self] in run(work.function) }
        thread.name = name
        thread.start()
    }

    func hand(_ block: Data, frames: Int) {
        condition.lock()
        while queue.count >= Self.depth { condition.wait() }
        queue.append((block, frames))
        condition.broadcast()
        condition.unlock()
    }

    /// Waits for every block handed over to be done; then the thread ends. Idempotent.
    func finish() {
        condition.lock()
        defer { condition.unlock() }
        closed = true
        condition.broadcast()
        while !done { condition.wait() }
    }

    private func run(_ work: (UnsafeRawPointer, Int) -> Void) {
        while true {
            condition.lock()
            while queue.isEmpty && !closed { condition.wait() }
            if queue.isEmpty {
                done = true
                condition.broadcast()
                condition.unlock()
                return
            }
            let (block, frames) = queue.removeFirst()
            condition.broadcast()
            condition.unlock()
            block.withUnsafeBytes { work($0.baseAddress!, frames) }
        }
    }
}
