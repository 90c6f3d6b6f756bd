import Foundation

/// The ballistics of a level meter: what a display shows from the peaks measured between
/// redraws. A plain value; use from one thread (the one that draws).
///
/// Peak-programme style as IEC 60268-18 describes for digital meters: the reading rises at once
/// to a new peak and falls back at 20 dB per 1.7 s (about 11.8 dB/s), so a steady signal reads
/// steadily even when audio arrives in blocks longer than the redraw interval: a redraw with no
/// new audio changes nothing (no audio is not silence), and the fall-back over the wait is
/// applied when audio comes. A peak-hold marker keeps the highest reading for 2 s.
public struct PeakMeter: Sendable, Hashable {
    /// Fall-back rate in dB per second (20 dB in 1.7 s).
    public static let fallbackDecibelsPerSecond = 20.0 / 1.7
    /// How long the peak-hold marker stays before it falls back too.
    public static let holdSeconds = 2.0
    /// The lowest level shown; anything quieter reads as this.
    public static let floorDecibels = -90.0

    /// The reading per channel, in dBFS (``floorDecibels`` ... 0).
    public private(set) var levels: [Double] = []
    /// The peak-hold marker per channel, in dBFS.
    public private(set) var holds: [Double] = []
    private var holdAges: [Double] = []
    private var waited = 0.0

    public init(channels: Int = 0) {
        reset(channels)
    }

    private mutating func reset(_ channels: Int) {
        levels = Array(repeating: Self.floorDecibels, count: channels)
        holds = levels
        holdAges = Array(repeating: 0, count: channels)
    }

    /// Takes the peaks (0...1 per channel) measured over the last `elapsed` seconds. With
    /// `fresh == false` (no new audio arrived since the last call) nothing changes until it does.
    public mutating func update(peaks: [Float], elapsed: Double, fresh: Bool = true) {
        if levels.count != peaks.count { reset(peaks.count) }
        waited += max(0, elapsed)
        guard fresh else { return }
        let elapsed = waited
        waited = 0
        let fall = Self.fallbackDecibelsPerSecond * elapsed
        for c in peaks.indices {
            let measured = Self.decibels(peaks[c])
            levels[c] = max(measured, levels[c] - fall, Self.floorDecibels)
            holdAges[c] += elapsed
            if levels[c] >= holds[c] {
                holds[c] = levels[c]
                holdAges[c] = 0
            } else if holdAges[c] > Self.holdSeconds {
                holds[c] = max(levels[c], holds[c] - fall)
            }
        }
    }

    /// A peak (0...1) in dBFS, never below ``floorDecibels``.
    public static func decibels(_ peak: Float) -> Double {
        peak > 0 ? max(floorDecibels, 20 * log10(Double(peak))) : floorDecibels
    }
}
