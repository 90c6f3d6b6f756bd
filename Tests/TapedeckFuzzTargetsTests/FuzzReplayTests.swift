import Foundation
import TapedeckCore
@testable import TapedeckFuzzTargets
import TapedeckTesting
import Testing

/// Every seed in `Fuzz/Seeds/TARGET` and every input a fuzzer once failed on (kept in
/// `Fuzz/Findings/TARGET`) is read or refused correctly, and the sound seeds are read: a target
/// that refused everything would keep no promise worth checking.
@Suite("Fuzz target replays")
struct FuzzReplayTests {
    static let fuzzFolder = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Fuzz")

    /// The inputs in `Fuzz/FOLDER/TARGET`; the config target's seeds are also the files in `Configuration/`.
    static func inputs(_ folder: String, _ target: String) -> [URL] {
        var dirs = [fuzzFolder.appendingPathComponent(folder).appendingPathComponent(target)]
        if folder == "Seeds" && target == "config" { dirs.append(fuzzFolder.deletingLastPathComponent().appendingPathComponent("Configuration")) }
        return dirs.flatMap { dir in
            ((try? FileManager.default.contentsOfDirectory(atPath: dir.path)) ?? []).sorted().map { dir.appendingPathComponent($0) }
        }
    }

    @Test("every seed and every past finding is read or refused correctly", arguments: FuzzTargets.names)
    func replay(target: String) throws {
        let seeds = Self.inputs("Seeds", target)
        #expect(seeds.count >= 3, "Fuzz/Seeds/\(target) has \(seeds.count) seeds; run scripts/fuzz-seeds")
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-fuzz-replay-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: scratch) }
        var read: [String] = []
        for input in seeds + Self.inputs("Findings", target) {
            let data = try Data(contentsOf: input)
            // Some findings made libsndfile loop forever: a regression must fail, not hang the run.
            let outcome = try TimeLimit.run(10, "\(target) on \(input.lastPathComponent)") {
                try data.withUnsafeBytes { try FuzzTargets.run(target, $0, scratch: scratch) }
            }
            if case .broken(let finding) = outcome { Issue.record("\(input.lastPathComponent): \(finding)") }
            if outcome == .read { read.append(input.lastPathComponent) }
        }
        let sound = Self.soundSeeds[target] ?? []
        #expect(Set(sound).isSubset(of: read), "\(target): read only \(read.sorted()); the sound seeds \(sound) must be read")
    }

    /// Seeds that are whole, valid files: every step of their target must read them.
    static let soundSeeds: [String: [String]] = [
        "wav": ["tapedeck-complete", "rf64-ds64", "sox-24bit-3ch-extensible"],
        "flac": ["tapedeck-complete"],
        "opus": ["tapedeck-complete", "opusenc-sine"],
        "manifest": ["two-takes", "pending-take"],
        "bundle-summary": ["two-takes", "recording-take"],
        "config": ["ci.yaml", "tapedeck.yaml", "fleet.yaml"],
        "catalog": ["three-takes"],
        "remote-manifest": ["pushed"],
        "stream": ["flac", "mp3", "mp3-icy-titles", "ogg-flac", "ogg-opus", "ogg-vorbis", "wav-live-24bit"],
        "rtp": ["ffmpeg-l16", "aes67-l24-reordered-lost", "timestamps-ahead"],
    ]

    @Test("the promises can fail: a claim past the file's end, an untyped error and an unknown target are reported")
    func promisesCanFail() throws {
        let format = AudioFormat(sampleRate: 48_000, channels: 2, sampleFormat: .s16)
        #expect(throws: FuzzTargets.Finding.self) { try FuzzTargets.fits(1_001, format, 4_000, "test") }
        #expect(throws: FuzzTargets.Finding.self) { try FuzzTargets.fits(.max, format, 4_000, "test") }
        try FuzzTargets.fits(1_000, format, 4_000, "test")
        struct Untyped: Error {}
        #expect(throws: FuzzTargets.Finding.self) { try FuzzTargets.typed("test") { throw Untyped() } }
        #expect(try FuzzTargets.typed("test") { throw TapedeckError(.corruptFile, "refused") } == false)
        #expect(try FuzzTargets.typed("test") {} == true)
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-fuzz-replay-\(UUID().uuidString)")
        #expect(throws: TapedeckError.self) { try Data().withUnsafeBytes { try FuzzTargets.run("nonesuch", $0, scratch: scratch) } }
    }
}
