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
