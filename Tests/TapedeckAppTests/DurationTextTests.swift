import Foundation
import TapedeckApp
import TapedeckCore
import Testing

@Suite("Durations as people type them")
struct DurationTextTests {
    @Test("every accepted form", arguments: [
        ("5", 5.0), ("2.5", 2.5), ("5s", 5), ("250ms", 0.25), ("2m", 120), ("1h", 3600), ("1m30s", 90),
        ("1h30m", 5400), ("1h30", 5400), ("2m15", 135), ("00:05", 5), ("1:30", 90), ("01:02:03.5", 3723.5),
        ("0:00:00.2", 0.2), (" 3S ", 3),
    ])
    func accepted(_ text: String, _ seconds: Double) throws {
        #expect(abs(try DurationText.seconds(text) - seconds) < 1e-9)
    }

    @Test("everything else is refused with the forms to use", arguments: [
        "", "-5", "abc", "1h1h", "5s2m", "1m1m", "5x", "1:2:3:4", "00:60", "1:75:00", "1s30", "inf", "nan", "1e3", "0x10", "400d", "9999h", ":5", "5:",
    ])
    func refused(_ text: String) {
        let error = #expect(throws: TapedeckError.self) { _ = try DurationText.seconds(text, flag: "-d/--duration") }
        #expect(error?.code == .invalidArgument)
        #expect(error?.message.hasPrefix("-d/--duration \(text): not a duration.") == true, "\(error?.message ?? "")")
    }

    @Test("zero is no length, but it is a time to start at")
    func zero() throws {
        for text in ["0", "0s", "00:00"] {
            let error = #expect(throws: TapedeckError.self) { _ = try DurationText.seconds(text, flag: "-d/--duration") }
            #expect(error?.message == "-d/--duration \(text): a length must be more than zero.")
            #expect(try DurationText.seconds(text, flag: "-s/--start", allowingZero: true) == 0)
        }
    }
}

@Suite("Byte counts")
struct ByteCountTextTests {
    @Test("sizes as dd and split take them: K, M, G, T binary, KB, MB, GB, TB decimal, KiB…TiB binary")
    func sizes() throws {
        let cases: [(String, Int64)] = [("1000000", 1_000_000), ("2G", 2 << 30), ("2GiB", 2 << 30), ("2gb", 2_000_000_000),
                                        ("1.5M", 1_572_864), ("1900MB", 1_900_000_000), ("4 GiB", 4 << 30), ("1t", 1 << 40), ("512b", 512)]
        for (text, bytes) in cases { #expect(try ByteCountText.bytes(text, flag: "--split-size") == bytes, "\(text)") }
        for text in ["", "G", "-1G", "2 parsecs", "1e3", "0", "0.1", "9999999T", "nan"] {
            #expect(throws: TapedeckError.self, "\(text)") { try ByteCountText.bytes(text, flag: "--split-size") }
        }
    }

    @Test("a split on the clock comes at the next multiple of the interval in local time")
    func clockBoundary() {
        let utc = TimeZone(identifier: "UTC")!
        let d = Date(timeIntervalSince1970: 1_764_000_000 + 1800)  // half past an hour, UTC
        #expect(SplitRule.framesToClockBoundary(from: d, every: 3600, rate: 48_000, timeZone: utc) == 1800 * 48_000)
        let onTheHour = Date(timeIntervalSince1970: 1_764_000_000)
        #expect(SplitRule.framesToClockBoundary(from: onTheHour, every: 3600, rate: 48_000, timeZone: utc) == 3600 * 48_000)
        let plusHalf = TimeZone(secondsFromGMT: 5 * 3600 + 1800)!  // half an hour off UTC: on the local hour there
        #expect(SplitRule.framesToClockBoundary(from: d, every: 3600, rate: 48_000, timeZone: plusHalf) == 3600 * 48_000)
        #expect(SplitRule.framesToClockBoundary(from: d.addingTimeInterval(0.5), every: 600, rate: 1000, timeZone: utc) == 599_500)
    }
}
