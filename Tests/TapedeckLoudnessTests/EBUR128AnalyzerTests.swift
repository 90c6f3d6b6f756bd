import Foundation
import Testing
import TapedeckCore
@testable import TapedeckLoudness
import TapedeckTesting

/// The meter against ffmpeg's own EBU R128 filter (an independent implementation), on signals
/// sox makes: a steady tone, noise whose level moves (a loudness range), and 5.1 with LFE and
/// surrounds (channel weights), in every sample format Tapedeck records.
@Suite("EBU R128 meter")
struct EBUR128AnalyzerTests {
    /// What ffmpeg's ebur128 filter says of a file: integrated, range, true peak.
    static func ffmpeg(_ path: String) throws -> (integrated: Double, range: Double, truePeak: Double) {
        let r = try ChildProcess.run(["/usr/bin/ffmpeg", "-nostats", "-hide_banner", "-i", path, "-af", "ebur128=peak=true", "-f", "null", "-"])
        #expect(r.status == 0, "\(r.output)")
        // The summary at the end: "I:   -23.0 LUFS", "LRA:   4.5 LU", "Peak:  -1.2 dBFS".
        let summary = r.output.components(separatedBy: "Summary:").last ?? ""
        func value(_ label: String) -> Double {
            guard let line = summary.split(separator: "\n").first(where: { $0.trimmingCharacters(in: .whitespaces).hasPrefix(label) }) else { return .nan }
            let number = line.split(separator: " ").dropFirst().first { Double($0) != nil }
            return number.flatMap { Double($0) } ?? .nan
        }
        return (value("I:"), value("LRA:"), value("Peak:"))
    }

    /// Measures the raw PCM of `path` (sox converts it) in uneven pieces, as a writer hands them.
    static func measure(_ wav: String, _ format: AudioFormat) throws -> Loudness {
        let raw = wav + ".raw"
        let encoding = format.sampleFormat == .f32 ? "floating-point" : "signed-integer"
        let r = try ChildProcess.run(["/usr/bin/sox", wav, "-t", "raw", "-e", encoding, "-b", "\(format.sampleFormat.bytesPerSample * 8)", raw])
        #expect(r.status == 0, "\(r.output)")
        let bytes = try Data(contentsOf: URL(fileURLWithPath: raw))
        let meter = try EBUR128Analyzer().makeMeter(for: format)
        let frameBytes = format.bytesPerFrame
        var offset = 0
        var piece = 1
        bytes.withUnsafeBytes { all in
            while offset < all.count {
                let frames = min((all.count - offset) / frameBytes, 97 * piece % 4801 + 1)
                meter.add(all.baseAddress! + offset, frames: frames)
                offset += frames * frameBytes
                piece += 1
            }
        }
        return meter.result()
    }

    static func folder() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("ebur128-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    /// Signals sox makes (`-R`: the same noise every run). True peak is compared on tonal
    /// signals only: on wideband noise the two 4× oversampling filters (libebur128's FIR, ffmpeg's
    /// resampler to 192 kHz) overshoot differently between samples, by up to 0.6 dB on pink noise.
    @Test("matches ffmpeg within 0.1 LU integrated and 0.2 dB true peak", arguments: [
        ("tone", "synth 12 sine 997 vol -18dB", 2, SampleFormat.s16, true),
        ("tone", "synth 12 sine 997 vol -18dB", 2, SampleFormat.s24, true),
        ("moving sweep", "synth 30 sine 100-4000 tremolo 0.3 85 vol -3dB", 1, SampleFormat.f32, true),
        ("moving noise", "synth 30 pinknoise tremolo 0.2 80 vol -6dB", 2, SampleFormat.s32, false),
        ("moving noise", "synth 30 pinknoise tremolo 0.2 80 vol -6dB", 1, SampleFormat.f32, false),
        ("near full scale", "synth 8 sine 3000 vol -0.5dB", 2, SampleFormat.s24, true),
        ("5.1", "synth 10 pinknoise pinknoise pinknoise sine 60 pinknoise pinknoise vol -10dB", 6, SampleFormat.s24, false),
    ])
    func matchesFFmpeg(_ name: String, _ effect: String, _ channels: Int, _ sample: SampleFormat, _ tonal: Bool) throws {
        let dir = try Self.folder()
        defer { try? FileManager.default.removeItem(at: dir) }
        let wav = dir.appendingPathComponent("signal.wav").path
        let encoding = sample == .f32 ? "floating-point" : "signed-integer"
        let made = try ChildProcess.run(["/usr/bin/sh", "-c", "sox -R -n -r 48000 -c \(channels) -b \(sample.bytesPerSample * 8) -e \(encoding) '\(wav)' \(effect)"])
        try #require(made.status == 0, "\(made.output)")
        let format = AudioFormat(sampleRate: 48000, channels: channels, sampleFormat: sample)
        let ours = try Self.measure(wav, format)
        let theirs = try Self.ffmpeg(wav)
        let integrated = try #require(ours.integrated)
        #expect(abs(integrated - theirs.integrated) <= 0.1, "\(name) \(sample): integrated \(integrated) vs ffmpeg \(theirs.integrated)")
        #expect(abs(ours.range - theirs.range) <= 0.2, "\(name) \(sample): range \(ours.range) vs ffmpeg \(theirs.range)")
        let peak = try #require(ours.truePeak)
        if tonal {
            #expect(abs(peak - theirs.truePeak) <= 0.2, "\(name) \(sample): true peak \(peak) vs ffmpeg \(theirs.truePeak)")
        } else {
            #expect(abs(peak - theirs.truePeak) <= 1, "\(name) \(sample): true peak \(peak) vs ffmpeg \(theirs.truePeak)")
        }
        #expect((ours.maxMomentary ?? -.infinity) >= integrated - 0.05, "the loudest 400 ms is at least the average")
        if let shortTerm = ours.maxShortTerm { #expect(shortTerm >= integrated - 0.05 && shortTerm <= (ours.maxMomentary ?? 0) + 0.05) }
    }

    @Test("silence has no integrated loudness and no peak; a take under 3 s no short-term value")
    func silence() throws {
        let format = AudioFormat(sampleRate: 44100, channels: 2, sampleFormat: .s16)
        let meter = try EBUR128Analyzer().makeMeter(for: format)
        let zeros = [Int16](repeating: 0, count: 44100 * 2)
        zeros.withUnsafeBytes { meter.add($0.baseAddress!, frames: 44100) }
        let l = meter.result()
        #expect(l.integrated == nil && l.truePeak == nil && l.maxShortTerm == nil && l.range == 0)
        // Codable and storable: no infinities.
        let data = try JSONEncoder().encode(l)
        #expect(try JSONDecoder().decode(Loudness.self, from: data) == l)
    }

    /// A signal of `seconds` in `format`: a tone and noise under a moving level (deterministic).
    static func signal(_ format: AudioFormat, seconds: Double, seed: UInt64) -> Data {
        var rng = seed
        func noise() -> Double {
            rng = rng &* 6364136223846793005 &+ 1442695040888963407
            return Double(Int64(bitPattern: rng >> 11) % (1 << 40)) / Double(1 << 40)
        }
        let frames = Int(seconds * Double(format.sampleRate))
        var out = Data(capacity: frames * format.bytesPerFrame)
        for f in 0..<frames {
            let t = Double(f) / Double(format.sampleRate)
            let level = 0.05 + 0.6 * (0.5 + 0.5 * sin(2 * .pi * 0.3 * t))
            for c in 0..<format.channels {
                let v = level * (0.7 * sin(2 * .pi * (220 + 110 * Double(c)) * t) + 0.3 * noise())
                switch format.sampleFormat {
                case .s16: withUnsafeBytes(of: Int16(v * 32767).littleEndian) { out.append(contentsOf: $0) }
                case .s24:
                    let i = Int32(v * 8_388_607)
                    out.append(contentsOf: [UInt8(truncatingIfNeeded: i), UInt8(truncatingIfNeeded: i >> 8), UInt8(truncatingIfNeeded: i >> 16)])
                case .s32: withUnsafeBytes(of: Int32(v * 2_147_483_647).littleEndian) { out.append(contentsOf: $0) }
                case .f32: withUnsafeBytes(of: Float(v).bitPattern.littleEndian) { out.append(contentsOf: $0) }
                }
            }
        }
        return out
    }

    static func feed(_ meter: any LoudnessMeter, _ bytes: Data, _ format: AudioFormat, seed: Int) -> Loudness {
        var offset = 0, piece = seed
        bytes.withUnsafeBytes { all in
            while offset < all.count {
                let frames = min((all.count - offset) / format.bytesPerFrame, 131 * piece % 9001 + 1)
                meter.add(all.baseAddress! + offset, frames: frames)
                offset += frames * format.bytesPerFrame
                piece += 1
            }
        }
        return meter.result()
    }

    @Test("the two-thread meter and the momentary and short-term maxima made from 100 ms windows give what libebur128 asked directly gives", arguments: [
        (48000, 2, SampleFormat.s24), (48000, 1, SampleFormat.f32), (44100, 2, SampleFormat.s16),
        (48000, 6, SampleFormat.s32), (11025, 2, SampleFormat.s16), (96000, 3, SampleFormat.f32),
    ])
    func twoThreadsSameFigures(_ rate: Int, _ channels: Int, _ sample: SampleFormat) throws {
        let format = AudioFormat(sampleRate: rate, channels: channels, sampleFormat: sample)
        let bytes = Self.signal(format, seconds: 9, seed: UInt64(rate + channels))
        let reference = Self.feed(try EBUR128Meter(format: format, truePeak: true, windowed: false), bytes, format, seed: 1)
        let single = Self.feed(try EBUR128Analyzer().makeMeter(for: format), bytes, format, seed: 2)
        let fast = Self.feed(try EBUR128Analyzer().makeFastMeter(for: format), bytes, format, seed: 3)
        for (name, l) in [("one thread", single), ("two threads", fast)] {
            #expect(l.integrated == reference.integrated && l.range == reference.range && l.truePeak == reference.truePeak, "\(name): \(l) vs \(reference)")
            let m = try #require(l.maxMomentary), s = try #require(l.maxShortTerm)
            #expect(abs(m - (reference.maxMomentary ?? 0)) < 1e-9 && abs(s - (reference.maxShortTerm ?? 0)) < 1e-9, "\(name): \(l) vs \(reference)")
        }
        #expect(reference.truePeak != nil && reference.integrated != nil)
    }
}
