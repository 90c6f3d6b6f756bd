import Testing
@testable import TapedeckCore

@Suite("waveform peaks")
struct WaveformPeaksTests {
    /// The min and max of each block of `per` frames (over all channels), computed plainly.
    static func expected(_ samples: [Float], channels: Int, per: Int) -> [(Int16, Int16)] {
        stride(from: 0, to: samples.count / channels, by: per).map { start in
            let block = samples[(start * channels)..<(min(samples.count / channels, start + per) * channels)]
            func q(_ s: Float) -> Int16 { Int16(max(-32768, min(32767, (s * 32768).rounded()))) }
            return (q(block.min()!), q(block.max()!))
        }
    }

    @Test("every point covers framesPerPoint frames, whatever the length and however the audio arrives",
          arguments: [1, 31, 32, 33, 4096 * 32, 4096 * 32 + 1, 300_000, 1_000_003])
    func builder(frames: Int) {
        var generator = SystemRandomNumberGenerator()
        let channels = 2
        let samples = (0..<(frames * channels)).map { _ in Float.random(in: -1...1, using: &generator) }
        var b = WaveformBuilder(sampleRate: 48000, capacity: 4096)
        var done = 0
        while done < frames {
            let n = min(frames - done, Int.random(in: 1...5000, using: &generator))
            samples.withUnsafeBufferPointer { b.add($0.baseAddress! + done * channels, frames: n, channels: channels) }
            done += n
        }
        let peaks = b.peaks()
        #expect(peaks.count <= 4096)
        #expect(peaks.count * peaks.framesPerPoint >= frames && peaks.count * peaks.framesPerPoint - frames < peaks.framesPerPoint)
        if frames > 4096 * 32 { #expect(peaks.count >= 2048) }
        let want = Self.expected(samples, channels: channels, per: peaks.framesPerPoint)
        #expect(want.count == peaks.count)
        #expect(zip(want, zip(peaks.minimums, peaks.maximums)).allSatisfy { w, p in w.0 == p.0 && w.1 == p.1 })
    }

    @Test("the .dat file reads back; damaged and foreign files do not")
    func datFile() {
        let p = WaveformPeaks(sampleRate: 44100, framesPerPoint: 256, minimums: [-32768, -5, 0], maximums: [32767, 5, 0])
        #expect(WaveformPeaks(datFile: p.datFile) == p)
        var bytes = p.datFile
        #expect(WaveformPeaks(datFile: Array(bytes.dropLast())) == nil)
        bytes[0] = 9
        #expect(WaveformPeaks(datFile: bytes) == nil)
        #expect(WaveformPeaks(datFile: []) == nil)
        // A length past the limit is refused before anything is allocated.
        var huge = p.datFile
        huge.replaceSubrange(16..<20, with: [0xFF, 0xFF, 0xFF, 0x7F])
        #expect(WaveformPeaks(datFile: huge) == nil)
    }
}
