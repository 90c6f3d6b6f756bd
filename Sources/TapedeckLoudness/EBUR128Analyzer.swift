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

    /// A meter for `format`. - Thread: any. Does not block.
    /// - Throws: `.unsupportedFormat` if libebur128 refuses the rate or channel count.
    public func makeMeter(for format: AudioFormat) throws -> any LoudnessMeter {
        try EBUR128Meter(format: format)
    }
}

/// One libebur128 state. Single owner, not `Sendable`: fed and read on one thread; never blocks.
final class EBUR128Meter: LoudnessMeter {
    private var state: UnsafeMutablePointer<ebur128_state>?
    private let format: AudioFormat
    /// Frames in one 100 ms step, at which momentary and short-term loudness are read.
    private let step: Int
    /// Frames added since the last step.
    private var inStep = 0
    /// Frames added in all.
    private var total = 0
    private var maxMomentary = -Double.infinity
    private var maxShortTerm = -Double.infinity
    /// 24-bit samples widened to 32 bits (libebur128 reads int, short, float and double).
    private var wide: [Int32] = []

    init(format: AudioFormat) throws {
        self.format = format
        step = max(1, format.sampleRate / 10)
        let mode = Int32(EBUR128_MODE_I.rawValue | EBUR128_MODE_LRA.rawValue | EBUR128_MODE_TRUE_PEAK.rawValue
                         | EBUR128_MODE_M.rawValue | EBUR128_MODE_S.rawValue | EBUR128_MODE_HISTOGRAM.rawValue)
        guard let state = ebur128_init(UInt32(format.channels), UInt(format.sampleRate), mode) else {
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
            feed(buffer + done * format.bytesPerFrame, frames: n)
            done += n
            inStep += n
            total += n
            if inStep == step {
                inStep = 0
                var value = -Double.infinity
                if total >= step * 4, ebur128_loudness_momentary(state, &value) == 0 { maxMomentary = max(maxMomentary, value) }
                if total >= step * 30, ebur128_loudness_shortterm(state, &value) == 0 { maxShortTerm = max(maxShortTerm, value) }
            }
        }
    }

    private func feed(_ pointer: UnsafeRawPointer, frames: Int) {
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

    func result() -> Loudness {
        var integrated = -Double.infinity, range = 0.0
        _ = ebur128_loudness_global(state, &integrated)
        _ = ebur128_loudness_range(state, &range)
        var peak = 0.0
        for c in 0..<format.channels {
            var p = 0.0
            if ebur128_true_peak(state, UInt32(c), &p) == 0 { peak = max(peak, p) }
        }
        return Loudness(integrated: integrated, range: range, truePeak: peak > 0 ? 20 * log10(peak) : nil,
                        maxMomentary: maxMomentary, maxShortTerm: maxShortTerm)
    }
}
