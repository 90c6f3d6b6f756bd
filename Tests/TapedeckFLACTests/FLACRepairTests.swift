import Foundation
import Testing
import TapedeckCore
import TapedeckTesting
@testable import TapedeckFLAC

@Suite("FLAC crash recovery and damaged files")
struct FLACRepairTests {
    let format = AudioFormat(sampleRate: 48_000, channels: 2, sampleFormat: .s16)

    /// Checks a repaired copy with flac, metaflac and the decoder against `source`'s first frames.
    func checkRepaired(_ url: URL, frames: Int64, source: [UInt8]) throws {
        #expect(try FLACTestSupport.run(["flac", "-t", "-s", url.path]).status == 0)
        let total = try FLACTestSupport.run(["metaflac", "--show-total-samples", url.path]).text
        #expect(total.trimmingCharacters(in: .whitespacesAndNewlines) == String(frames))
        let prefix = Array(source[0..<(Int(frames) * format.bytesPerFrame)])
        let md5 = try FLACTestSupport.run(["metaflac", "--show-md5sum", url.path]).text
        #expect(md5.trimmingCharacters(in: .whitespacesAndNewlines) == FLACTestSupport.md5Hex(prefix))
        let decoded = try FLACTestSupport.readAll(url)
        #expect(decoded.frameCount == frames)
        #expect(firstDifference(decoded.bytes, prefix) == nil)
        #expect(try FLACEncoder.verifyFile(at: url).frames == frames)
        // Repairing again changes nothing, not even a byte.
        let before = try Data(contentsOf: url)
        let again = try FLACEncoder().repair(fileAt: url)
        #expect(again.frames == frames && !again.headerRepaired)
        #expect(try Data(contentsOf: url) == before)
    }

    @Test func recoversWhatAKilledWriterLeft() throws {
        let dir = try FLACTestSupport.makeTempDirectory()
        defer { FLACTestSupport.cleanUp(dir) }
        let live = dir.appendingPathComponent("live.flac")
        let source = FLACTestSupport.render(format: format, frames: 160_000)
        let writer = try FLACEncoder().makeWriter(at: live, format: format, metadata: FLACTestSupport.metadata)
        let firstPart = Array(source[0..<(144_000 * format.bytesPerFrame)])
        try FLACTestSupport.write(firstPart, to: writer, format: format, chunkFrames: 1000, checkpointEvery: 10)
        try writer.checkpoint()

        // What SIGKILL right after a checkpoint leaves: STREAMINFO total 0, MD5 zero.
        let afterCheckpoint = dir.appendingPathComponent("after-checkpoint.flac")
        try FileManager.default.copyItem(at: live, to: afterCheckpoint)
        let unrepaired = try FLACTestSupport.run(["flac", "-t", afterCheckpoint.path])
        #expect(unrepaired.status != 0, "flac -t should fail on the killed file: \(unrepaired.stderr)")
        print("flac -t on an unrepaired killed file says: \(unrepaired.stderr.split(separator: "\n").suffix(3).joined(separator: " | "))")
        #expect(try FLACTestSupport.run(["metaflac", "--show-total-samples", afterCheckpoint.path]).text.hasPrefix("0"))
        let all = try FLACEncoder().repair(fileAt: afterCheckpoint)
        #expect(all.frames == 144_000 && all.headerRepaired && all.format == format)
        try checkRepaired(afterCheckpoint, frames: 144_000, source: source)

        // More audio without a checkpoint: only whole frames libFLAC wrote survive; then garbage.
        try source.withUnsafeBytes { raw in
            try writer.write(raw.baseAddress! + 144_000 * format.bytesPerFrame, frames: 10_000)
        }
        let noCheckpoint = dir.appendingPathComponent("no-checkpoint.flac")
        try FileManager.default.copyItem(at: live, to: noCheckpoint)
        let handle = try FileHandle(forWritingTo: noCheckpoint)
        try handle.seekToEnd()
        try handle.write(contentsOf: Data([0xFF, 0xF8, 0x69, 0x08]) + Data((0..<777).map { UInt8(truncatingIfNeeded: $0 * 31) }))
        try handle.close()
        let some = try FLACEncoder().repair(fileAt: noCheckpoint)
        #expect(some.frames % 4096 == 0 && some.frames <= 154_000 && some.frames >= 144_000)
        try checkRepaired(noCheckpoint, frames: some.frames, source: source)

        // The writer itself still finishes normally.
        try source.withUnsafeBytes { raw in
            try writer.write(raw.baseAddress! + 154_000 * format.bytesPerFrame, frames: 6_000)
        }
        #expect(try writer.finish() == 160_000)
        #expect(try FLACEncoder.verifyFile(at: live).frames == 160_000)
        let finished = try FLACEncoder().repair(fileAt: live)
        #expect(finished.frames == 160_000 && !finished.headerRepaired)
    }

    @Test func abandonLeavesTheFileAsAKillWould() throws {
        let dir = try FLACTestSupport.makeTempDirectory()
        defer { FLACTestSupport.cleanUp(dir) }
        let url = dir.appendingPathComponent("abandoned.flac")
        let source = FLACTestSupport.render(format: format, frames: 50_000)
        let writer = try FLACEncoder().makeWriter(at: url, format: format, metadata: FLACTestSupport.metadata)
        try FLACTestSupport.write(source, to: writer, format: format, chunkFrames: 5_000, checkpointEvery: 1)
        let snapshot = try Data(contentsOf: url)
        writer.abandon()
        #expect(try Data(contentsOf: url) == snapshot, "abandon() must not touch the file")
        #expect(try FLACEncoder().repair(fileAt: url).frames == 50_000)
    }

    @Test("a STREAMINFO garbled to a format Tapedeck never writes is damage: refused as corrupt, the file left alone")
    func garbledStreamInfoIsCorrupt() throws {
        let dir = try FLACTestSupport.makeTempDirectory()
        defer { FLACTestSupport.cleanUp(dir) }
        let url = dir.appendingPathComponent("garbled.flac")
        let writer = try FLACEncoder().makeWriter(at: url, format: format,
                                                  metadata: TakeMetadata(takeName: "t", sessionName: "s", takeNumber: 1, startDate: Date()))
        let silence = [UInt8](repeating: 0, count: 4096 * format.bytesPerFrame)
        try silence.withUnsafeBytes { try writer.write($0.baseAddress!, frames: 4096) }
        _ = try writer.finish()
        var bytes = [UInt8](try Data(contentsOf: url))
        // The sample rate's 20 bits start at byte 18: 0xBF113 is 782 611 Hz (as a power cut left one).
        bytes[18] = 0xBF
        bytes[19] = 0x11
        bytes[20] = (bytes[20] & 0x0F) | 0x30
        try Data(bytes).write(to: url)
        do {
            _ = try FLACEncoder().repair(fileAt: url)
            Issue.record("a garbled STREAMINFO was repaired as if it were true")
        } catch let error as TapedeckError {
            #expect(error.code == .corruptFile, "\(error)")
            #expect(error.message.contains("782611 Hz"), "\(error.message)")
        }
        #expect(try Data(contentsOf: url) == Data(bytes), "a refused file is left alone")
    }

    @Test func damagedFilesAreRefusedQuickly() throws {
        let dir = try FLACTestSupport.makeTempDirectory()
        defer { FLACTestSupport.cleanUp(dir) }
        var streamInfo16MB: [UInt8] = Array("fLaC".utf8) + [0x80, 0xFF, 0xFF, 0xFF]
        streamInfo16MB += [UInt8](repeating: 0x11, count: 200)
        let cases: [(String, [UInt8])] = [
            ("empty", []),
            ("marker-only", Array("fLaC".utf8)),
            ("garbage", (0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 13) }),
            ("streaminfo-16mb", streamInfo16MB),
        ]
        for (name, bytes) in cases {
            let url = dir.appendingPathComponent("\(name).flac")
            try Data(bytes).write(to: url)
            let start = ContinuousClock.now
            for attempt in 0..<2 {
                do {
                    if attempt == 0 { _ = try FLACEncoder().repair(fileAt: url) } else { _ = try FLACDecoder().openReader(at: url) }
                    Issue.record("\(name) was accepted")
                } catch let error as TapedeckError {
                    #expect(error.code == .corruptFile, "\(name): \(error)")
                    #expect(error.message.contains(url.path))
                }
            }
            #expect(ContinuousClock.now - start < .milliseconds(100), "\(name) took too long")
            #expect(try Data(contentsOf: url) == Data(bytes), "a refused file is left alone")
        }
        do {
            _ = try FLACDecoder().openReader(at: dir.appendingPathComponent("missing.flac"))
            Issue.record("missing file opened")
        } catch let error as TapedeckError {
            #expect(error.code == .notFound)
        }
    }

    @Test func verifyFileCatchesDamage() throws {
        let dir = try FLACTestSupport.makeTempDirectory()
        defer { FLACTestSupport.cleanUp(dir) }
        let url = dir.appendingPathComponent("flip.flac")
        try FLACTestSupport.writeTake(FLACTestSupport.render(format: format, frames: 40_000), at: url, format: format)
        var bytes = [UInt8](try Data(contentsOf: url))
        bytes[bytes.count - 3000] ^= 0x10
        try Data(bytes).write(to: url)
        #expect(throws: TapedeckError.self) { _ = try FLACEncoder.verifyFile(at: url) }
        // Repair keeps the frames before the damage.
        let repaired = try FLACEncoder().repair(fileAt: url)
        #expect(repaired.frames < 40_000 && repaired.frames % 4096 == 0)
        #expect(try FLACEncoder.verifyFile(at: url).frames == repaired.frames)
    }
}
