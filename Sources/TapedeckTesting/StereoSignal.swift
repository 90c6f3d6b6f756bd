import Foundation

/// Interleaved 16-bit stereo test signals for loopback tests through a sound server, and the
/// check that a recording holds such a signal unchanged. Plain functions; any thread.
public enum StereoSignal {
    /// Interleaved s16 stereo sine, the right channel at half the left's level.
    public static func sine(frequency: Double, level: Double, seconds: Double, sampleRate: Int = 48_000) -> [UInt8] {
        let frames = Int(seconds * Double(sampleRate))
        var bytes = [UInt8](repeating: 0, count: frames * 4)
        bytes.withUnsafeMutableBytes { raw in
            for i in 0..<frames {
                let x = level * sin(2 * .pi * frequency * Double(i) / Double(sampleRate))
                raw.storeBytes(of: Int16((x * 32767).rounded()).littleEndian, toByteOffset: i * 4, as: Int16.self)
                raw.storeBytes(of: Int16((x * 16383).rounded()).littleEndian, toByteOffset: i * 4 + 2, as: Int16.self)
            }
        }
        return bytes
    }

    /// Interleaved s16 stereo white noise at half scale, the same every time (an LCG), with no
    /// silent frame.
    public static func noise(seconds: Double, sampleRate: Int = 48_000) -> [UInt8] {
        let frames = Int(seconds * Double(sampleRate))
        var state: UInt32 = 0x1234_5678
        var bytes = [UInt8](repeating: 0, count: frames * 4)
        bytes.withUnsafeMutableBytes { raw in
            for i in 0..<(frames * 2) {
                state = state &* 1_664_525 &+ 1_013_904_223
                var sample = Int16(truncatingIfNeeded: Int32(bitPattern: state) >> 17)
                if sample == 0 { sample = 1 }
                raw.storeBytes(of: sample.littleEndian, toByteOffset: i * 2, as: Int16.self)
            }
        }
        return bytes
    }

    /// How `recorded` holds `signal` (noise: no frame is silent, and few repeat): `matched`
    /// frames continue a run of the signal's frames exactly; `stray` frames are neither silence
    /// nor part of such a run.
    public static func copiedRuns(_ recorded: [(Int16, Int16)], of signal: [(Int16, Int16)]) -> (matched: Int, stray: Int) {
        func key(_ f: (Int16, Int16)) -> UInt32 { UInt32(UInt16(bitPattern: f.0)) << 16 | UInt32(UInt16(bitPattern: f.1)) }
        var first: [UInt32: Int] = [:]
        for (i, f) in signal.enumerated() where first[key(f)] == nil { first[key(f)] = i }
        var matched = 0, stray = 0, i = 0
        var at: Int?
        while i < recorded.count {
            let f = recorded[i]
            if f == (0, 0) { at = nil; i += 1; continue }
            if let p = at, p < signal.count, signal[p] == f {
                matched += 1
                at = p + 1
                i += 1
                continue
            }
            let check = min(8, recorded.count - i)
            if let p = first[key(f)], p + check <= signal.count, (0..<check).allSatisfy({ signal[p + $0] == recorded[i + $0] }) {
                at = p
                continue
            }
            stray += 1
            at = nil
            i += 1
        }
        return (matched, stray)
    }

    /// Frames of interleaved s16 stereo as (left, right) pairs.
    public static func frames(_ bytes: [UInt8]) -> [(Int16, Int16)] {
        bytes.withUnsafeBytes { raw in
            (0..<(raw.count / 4)).map {
                (Int16(littleEndian: raw.load(fromByteOffset: $0 * 4, as: Int16.self)),
                 Int16(littleEndian: raw.load(fromByteOffset: $0 * 4 + 2, as: Int16.self)))
            }
        }
    }
}
