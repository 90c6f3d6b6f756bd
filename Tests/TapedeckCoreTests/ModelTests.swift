import Foundation
import TapedeckCore
import TapedeckTesting
import Testing

@Suite("Formats, settings and errors")
struct ModelTests {
    @Test("formats outside the supported ranges are refused with the range")
    func formatRanges() throws {
        try AudioFormat(sampleRate: 8000, channels: 1, sampleFormat: .s16).validate()
        try AudioFormat(sampleRate: 192_000, channels: 32, sampleFormat: .f32).validate()
        #expect(throws: TapedeckError.self) { try AudioFormat(sampleRate: 7999, channels: 1, sampleFormat: .s16).validate() }
        #expect(throws: TapedeckError.self) { try AudioFormat(sampleRate: 48000, channels: 33, sampleFormat: .s16).validate() }
        #expect(AudioFormat(sampleRate: 48000, channels: 2, sampleFormat: .s24).bytesPerFrame == 6)
    }

    @Test("settings are parsed by their declarations and refuse bad values with what is accepted")
    func settings() throws {
        let decls = [
            SettingDeclaration("n", .int(1...10), default: "5", help: ""),
            SettingDeclaration("on", .bool, default: "false", help: ""),
            SettingDeclaration("kind", .choice(["a", "b"]), default: "a", help: ""),
            SettingDeclaration("x", .double(0...1), default: "0.5", help: ""),
        ]
        let s = try PluginSettings.resolving(decls, overrides: ["n": "7", "on": "yes"])
        #expect(s.values == ["n": .int(7), "on": .bool(true), "kind": .string("a"), "x": .double(0.5)])
        for (key, value, fragment) in [("n", "11", "out of range"), ("n", "seven", "integer"), ("on", "maybe", "true or false"),
                                       ("kind", "c", "one of: a, b"), ("x", "nan", "number")] {
            let error = #expect(throws: TapedeckError.self) { try PluginSettings.resolving(decls, overrides: [key: value], section: "p") }
            #expect(error?.message.contains(fragment) == true, "\(error?.message ?? "")")
            #expect(error?.message.hasPrefix("p.\(key):") == true)
        }
        #expect(throws: TapedeckError.self) { try PluginSettings.resolving(decls, overrides: ["nope": "1"]) }
    }

    @Test("the DATE text is ISO 8601 in UTC at the nearest second (never the one before), as Foundation writes that second",
          arguments: [0.0, 1_700_000_000.7, 951_782_400, 4_102_444_799.999, -86_400.5, 1_234_567_890, 1_764_428_399.99978])
    func startDateText(seconds: Double) {
        let date = Date(timeIntervalSince1970: seconds)
        let metadata = TakeMetadata(takeName: "t", sessionName: "s", takeNumber: 1, startDate: date)
        #expect(metadata.startDateISO8601 == Date(timeIntervalSince1970: seconds.rounded()).ISO8601Format())
    }

    @Test("a take that began a fraction before a second is labelled with that second everywhere: BWF date and time, TimeReference keeps the fraction")
    func localTimeRounds() {
        // 0.22 ms before a whole second (a take of a --split-align run that began on the boundary).
        let whole = 1_764_428_400.0
        let early = LocalTimeOfDay(Date(timeIntervalSince1970: whole - 0.00022))
        let exact = LocalTimeOfDay(Date(timeIntervalSince1970: whole))
        #expect(early.date == exact.date && early.time == exact.time)
        #expect(abs(early.secondsSinceMidnight - (exact.secondsSinceMidnight - 0.00022)) < 1e-6
                || abs(early.secondsSinceMidnight - (exact.secondsSinceMidnight + 86_400 - 0.00022)) < 1e-6)
        // Half a second is rounded up, less is not.
        #expect(LocalTimeOfDay(Date(timeIntervalSince1970: whole + 0.4)).time == exact.time)
        #expect(LocalTimeOfDay(Date(timeIntervalSince1970: whole - 0.5)).time == exact.time)
        #expect(exact.utcOffset.count == 6 && ["+", "-"].contains(exact.utcOffset.first))
    }

    @Test("start-up helpers that avoid Foundation give Foundation's results")
    func foundationFreeHelpers() {
        for text in ["", "  ", "\t5 ", "1.5\u{00A0}", "\u{3000}x y\u{2003}", "é ", " \n7\n ", "\u{200B}8"] {
            #expect(String(text.trimmingSpaces) == text.trimmingCharacters(in: .whitespaces), "\(text.debugDescription)")
        }
        // NameRules' blank-name test against Foundation's whitespacesAndNewlines.
        for name in ["", " \t", "\n\u{2028}\u{85}\r", "\u{3000}\u{A0}", "a", " \u{200B} ", "\u{1680}x"] {
            #expect(name.unicodeScalars.allSatisfy(NameRules.isBlank) == name.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty,
                    "\(name.debugDescription)")
        }
        for id in ["3F2504E0-4F89-11D3-9A0C-0305E82C3301", "abc", "a-b-c-d-e-f-g-h-i-j", "ÄB-cd-EF-gh-ij"] {
            #expect(NameRules.shortID(of: id) == String(id.replacingOccurrences(of: "-", with: "").prefix(8)).lowercased())
        }
        for value in [0, 7, 42, 123, 1234, -5] {
            #expect(zeroPadded(value, width: 3) == String(format: "%03d", value))
        }
    }

    @Test("ENOSPC becomes diskFull with advice")
    func systemErrors() {
        let e = TapedeckError.system(28, while: "write x")
        #expect(e.code == .diskFull && e.systemCode == 28)
        #expect(e.message.contains("Free some space"))
    }

    @Test("24-bit samples round-trip through the packed representation")
    func sample24() {
        var buf = [UInt8](repeating: 0, count: 12)
        buf.withUnsafeMutableBytes { p in
            for (i, v) in [Int32(-8_388_608), 8_388_607, -1, 0].enumerated() { Sample24.store(v, p.baseAddress!, index: i) }
        }
        let back = buf.withUnsafeBytes { p in (0..<4).map { Sample24.load(p.baseAddress!, index: $0) } }
        #expect(back == [-8_388_608, 8_388_607, -1, 0])
    }

    @Test("peaks are per channel and scaled to full scale")
    func peaks() {
        let format = AudioFormat(sampleRate: 48000, channels: 2, sampleFormat: .s16)
        let samples: [Int16] = [16384, -32768, -8192, 100]
        var peaks: [Float] = []
        samples.withUnsafeBytes { LevelMeter.accumulatePeaks($0.baseAddress!, frames: 2, format: format, into: &peaks) }
        #expect(peaks == [0.5, 1.0])
    }

    @Test("the sums of squares for the RMS level, full scale 1, in every sample format")
    func squares() {
        // Two frames of two channels: channel 1 at ±half scale, channel 2 at a quarter and zero.
        let half: [Double] = [0.5, 0.25, -0.5, 0]
        func measure(_ format: SampleFormat, _ bytes: [UInt8]) -> [Double] {
            var (peaks, squares, clipped): ([Float], [Double], Int64) = ([], [], 0)
            bytes.withUnsafeBytes {
                LevelMeter.accumulatePeaks($0.baseAddress!, frames: 2, format: AudioFormat(sampleRate: 48_000, channels: 2, sampleFormat: format),
                                           into: &peaks, clipped: &clipped, squares: &squares)
            }
            return squares
        }
        let s16 = half.flatMap { withUnsafeBytes(of: Int16($0 * 32_768).littleEndian, Array.init) }
        let s24 = half.flatMap { v -> [UInt8] in let i = Int32(v * 8_388_608); return [UInt8(i & 0xFF), UInt8((i >> 8) & 0xFF), UInt8((i >> 16) & 0xFF)] }
        let s32 = half.flatMap { withUnsafeBytes(of: Int32($0 * 2_147_483_648).littleEndian, Array.init) }
        let f32 = half.flatMap { withUnsafeBytes(of: Float($0).bitPattern.littleEndian, Array.init) }
        for (format, bytes) in [(SampleFormat.s16, s16), (.s24, s24), (.s32, s32), (.f32, f32)] {
            let sums = measure(format, bytes)
            #expect(sums.count == 2 && abs(sums[0] - 0.5) < 1e-9 && abs(sums[1] - 0.0625) < 1e-9, "\(format): \(sums)")
        }
    }
}
