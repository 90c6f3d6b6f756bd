import Foundation
import TapedeckCore
@testable import TapedeckFuzzTargets
import Testing

/// Every seed in `Fuzz/Seeds/TARGET` and every input a fuzzer once failed on (kept in
/// `Fuzz/Findings/TARGET`, one regression test each) is read or refused correctly.
@Suite("Fuzz target replays")
struct FuzzReplayTests {
    static let fuzzFolder = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Fuzz")

    static func inputs(_ folder: String, _ target: String) -> [URL] {
        let dir = fuzzFolder.appendingPathComponent(folder).appendingPathComponent(target)
        let names = (try? FileManager.default.contentsOfDirectory(atPath: dir.path)) ?? []
        return names.sorted().map { dir.appendingPathComponent($0) }
    }

    @Test("every seed and every past finding is read or refused correctly", arguments: FuzzTargets.names)
    func replay(target: String) throws {
        let seeds = Self.inputs("Seeds", target)
        #expect(seeds.count >= 3, "Fuzz/Seeds/\(target) has \(seeds.count) seeds; run scripts/fuzz-seeds")
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-fuzz-replay-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: scratch) }
        for input in seeds + Self.inputs("Findings", target) {
            let data = try Data(contentsOf: input)
            let finding = try data.withUnsafeBytes { try FuzzTargets.run(target, $0, scratch: scratch) }
            #expect(finding == nil, "\(input.lastPathComponent): \(finding?.description ?? "")")
        }
    }

    @Test("the promises can fail: a claim past the file's end, an untyped error and an unknown target are reported")
    func promisesCanFail() throws {
        let format = AudioFormat(sampleRate: 48_000, channels: 2, sampleFormat: .s16)
        #expect(throws: FuzzTargets.Finding.self) { try FuzzTargets.fits(1_001, format, 4_000, "test") }
        #expect(throws: FuzzTargets.Finding.self) { try FuzzTargets.fits(.max, format, 4_000, "test") }
        try FuzzTargets.fits(1_000, format, 4_000, "test")
        struct Untyped: Error {}
        #expect(throws: FuzzTargets.Finding.self) { try FuzzTargets.typed("test") { throw Untyped() } }
        try FuzzTargets.typed("test") { throw TapedeckError(.corruptFile, "refused") }
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-fuzz-replay-\(UUID().uuidString)")
        #expect(throws: TapedeckError.self) { try Data().withUnsafeBytes { try FuzzTargets.run("nonesuch", $0, scratch: scratch) } }
    }
}
