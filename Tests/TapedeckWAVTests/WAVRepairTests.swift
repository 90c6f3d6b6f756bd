import Foundation
import TapedeckTesting
import Testing
import TapedeckCore
import TapedeckNull
@testable import TapedeckWAV

@Suite("Repairing WAV files whose writer died")
struct WAVRepairTests {
    static let formats: [AudioFormat] = [
        .cdStereo,
        AudioFormat(sampleRate: 48_000, channels: 8, sampleFormat: .s24),
        AudioFormat(sampleRate: 48_000, channels: 1, sampleFormat: .s24),
        AudioFormat(sampleRate: 96_000, channels: 2, sampleFormat: .f32),
    ]

    /// Checks that sox decodes `url` without a word of warning, to exactly `expected` for integer
    /// formats (sox converts floats through 32-bit integers, so only their length is compared).
    static func expectSoxReads(_ url: URL, exactly expected: [UInt8], format: AudioFormat, in dir: URL) throws {
        let raw = dir.appendingPathComponent(UUID().uuidString + ".raw")
        let result = try WAVTestSupport.run("sox", [url.path, "-t", "raw", raw.path])
        #expect(result.status == 0)
        #expect(result.stderr.isEmpty, "sox warned: \(result.stderr)")
        let decoded = try WAVTestSupport.bytes(of: raw)
        if format.sampleFormat.isFloat {
            #expect(decoded.count == expected.count)
        } else {
            #expect(firstDifference(decoded, expected) == nil)
        }
    }

    @Test("a file copied mid-write, with a partial last frame, keeps every whole frame", arguments: formats)
    func killedMidWrite(format: AudioFormat) throws {
        let dir = try WAVTestSupport.makeTempDirectory()
        defer { WAVTestSupport.cleanUp(dir) }
        let url = dir.appendingPathComponent("live.wav")
        let crashed = dir.appendingPathComponent("crashed.wav")
        let bytes = WAVTestSupport.render(.noise(seed: 11, level: 0.8), format: format, frames: 20_001)
        let checkpointed = 8_000 * format.bytesPerFrame

        let writer = try WAVEncoder().makeWriter(at: url, format: format, metadata: WAVTestSupport.metadata)
        try WAVTestSupport.write(Array(bytes[..<checkpointed]), to: writer, format: format)
        try writer.checkpoint()
        try WAVTestSupport.write(Array(bytes[checkpointed...]), to: writer, format: format)
        // "Kill" the recorder: take the file as it is on disk while the writer is still open,
        // and add the first bytes of a frame that never finished.
        try FileManager.default.copyItem(at: url, to: crashed)
        writer.abandon()
        try WAVTestSupport.append([UInt8](repeating: 0x5A, count: format.bytesPerFrame - 1), to: crashed)

        let result = try WAVEncoder().repair(fileAt: crashed)
        #expect(result.frames == 20_001)
        #expect(result.format == format)
        #expect(result.headerRepaired)

        let file = try WAVTestSupport.bytes(of: crashed)
        let data = try #require(WAVTestSupport.chunks(file).last)
        #expect(data.id == "data")
        #expect(Int(data.size) == bytes.count)
        #expect(file.count == data.offset + 8 + bytes.count + bytes.count % 2)
        #expect(WAVTestSupport.u32(file, 4) == UInt32(file.count - 8))
        #expect(!WAVTestSupport.chunks(file).contains { $0.id == "PEAK" })
        if let fact = WAVTestSupport.chunks(file).first(where: { $0.id == "fact" }) {
            #expect(WAVTestSupport.u32(file, fact.offset + 8) == 20_001)
        }
        #expect(firstDifference(try WAVTestSupport.readAll(crashed).bytes, bytes) == nil)
        try Self.expectSoxReads(crashed, exactly: bytes, format: format, in: dir)

        // Repairing again finds nothing to change.
        let again = try WAVEncoder().repair(fileAt: crashed)
        #expect(again.frames == 20_001)
        #expect(!again.headerRepaired)
    }

    @Test("headers claiming more audio than the file holds are fixed to the real length",
          arguments: [UInt32(0), 0xFFFF_FFFF, 0x8000_0000])
    func lyingDataSize(claimed: UInt32) throws {
        let dir = try WAVTestSupport.makeTempDirectory()
        defer { WAVTestSupport.cleanUp(dir) }
        let url = dir.appendingPathComponent("liar.wav")
        let format = AudioFormat.cdStereo
        let bytes = WAVTestSupport.render(.sine(frequency: 440, level: 0.5), format: format, frames: 44_100)
        try WAVTestSupport.writeTake(bytes, at: url, format: format)
        let data = try #require(WAVTestSupport.chunks(try WAVTestSupport.bytes(of: url)).last)
        try WAVTestSupport.patch32(url, at: data.offset + 4, claimed)
        try WAVTestSupport.patch32(url, at: 4, claimed)

        let result = try WAVEncoder().repair(fileAt: url)
        #expect(result.frames == 44_100)
        #expect(result.headerRepaired)
        let file = try WAVTestSupport.bytes(of: url)
        #expect(WAVTestSupport.u32(file, data.offset + 4) == UInt32(bytes.count))
        #expect(WAVTestSupport.u32(file, 4) == UInt32(file.count - 8))
        #expect(firstDifference(try WAVTestSupport.readAll(url).bytes, bytes) == nil)
        try Self.expectSoxReads(url, exactly: bytes, format: format, in: dir)

        let script = "import sys, wave; print(wave.open(sys.argv[1], 'rb').getnframes())"
        let python = try WAVTestSupport.run("python3", ["-c", script, url.path])
        #expect(python.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "44100", "\(python.stderr)")
    }

    @Test("a finished file is left as it is")
    func healthyFile() throws {
        let dir = try WAVTestSupport.makeTempDirectory()
        defer { WAVTestSupport.cleanUp(dir) }
        let url = dir.appendingPathComponent("fine.wav")
        let format = AudioFormat(sampleRate: 44_100, channels: 1, sampleFormat: .s24)
        let bytes = WAVTestSupport.render(.frameCounter, format: format, frames: 1_001)
        try WAVTestSupport.writeTake(bytes, at: url, format: format)
        let before = try WAVTestSupport.bytes(of: url)
        let result = try WAVEncoder().repair(fileAt: url)
        #expect(result.frames == 1_001)
        #expect(!result.headerRepaired)
        #expect(try WAVTestSupport.bytes(of: url) == before)
    }

    @Test("a LIST chunk whose entry claims more than the chunk holds is refused by the reader, not handed to libsndfile, and repair turns it into JUNK")
    func damagedListChunk() throws {
        // Found by scripts/fuzz: libsndfile 1.2's sf_open loops forever on such a chunk.
        let dir = try WAVTestSupport.makeTempDirectory()
        defer { WAVTestSupport.cleanUp(dir) }
        let url = dir.appendingPathComponent("list.wav")
        let audio = WAVTestSupport.render(.frameCounter, format: .cdStereo, frames: 4_800)
        try WAVTestSupport.writeTake(audio, at: url, format: .cdStereo)
        let bytes = try WAVTestSupport.bytes(of: url)
        let list = try #require(WAVTestSupport.chunks(bytes).first { $0.id == "LIST" }).offset
        #expect(Array(bytes[(list + 8)..<(list + 12)]) == Array("INFO".utf8))
        try WAVTestSupport.patch32(url, at: list + 16, 0xFFFF_F7FF)  // the first entry's size

        // Without the check this open never returns (libsndfile loops in sf_open), hence the limit.
        let refusal = #expect(throws: TapedeckError.self) {
            try TimeLimit.run(5, "opening the file with the damaged LIST") { _ = try WAVDecoder().openReader(at: url) }
        }
        #expect(refusal?.code == .corruptFile && refusal?.message.contains("doctor --repair") == true)
        #expect(try WAVEncoder().inspect(fileAt: url)?.headerRepaired == true)
        let result = try WAVEncoder().repair(fileAt: url)
        #expect(result.frames == 4_800 && result.headerRepaired)
        let repaired = try WAVTestSupport.bytes(of: url)
        #expect(Array(repaired[list..<(list + 4)]) == Array("JUNK".utf8) && repaired.count == bytes.count)
        #expect(try WAVEncoder().inspect(fileAt: url)?.headerRepaired == false)
        let frames = try TimeLimit.run(5, "opening the repaired file") {
            let reader = try WAVDecoder().openReader(at: url)
            defer { reader.close() }
            return reader.frameCount
        }
        #expect(frames == 4_800)
        try Self.expectSoxReads(url, exactly: audio, format: .cdStereo, in: dir)
    }

    @Test("in an RF64 file past 4 GiB, audio bytes that spell a damaged LIST where a 32-bit walk would land do not get the file refused")
    func rf64AudioThatLooksLikeList() throws {
        let dir = try WAVTestSupport.makeTempDirectory()
        defer { WAVTestSupport.cleanUp(dir) }
        let url = dir.appendingPathComponent("big.wav")
        typealias Build = WAVHeaderBombTests
        let frames: UInt64 = 1_100_000_000  // 4.4 GB of 16-bit stereo, sparse on disk
        let audioBytes = frames * 4
        func header(riffSize: UInt64) -> [UInt8] {
            Build.chunk("ds64", size: 28, payload: Build.le64(riffSize) + Build.le64(audioBytes) + Build.le64(frames) + Build.le32(0))
                + Build.chunk("fmt ", size: 16, payload: Build.fmt) + Build.chunk("data", size: 0xFFFF_FFFF, payload: [])
        }
        let head = Build.riff(header(riffSize: 4 + UInt64(header(riffSize: 0).count) + audioBytes), size: 0xFFFF_FFFF, id: "RF64")
        // Where a walk using the data chunk's 32-bit size (0xFFFFFFFF, padded) would land.
        let landing = UInt64(head.count) + 0xFFFF_FFFF + 1
        let fake = Build.chunk("LIST", size: 16, payload: Array("INFO".utf8) + Build.chunk("INAM", size: 0xFFFF_F7FF, payload: Array("name".utf8)))
        try Data().write(to: url)
        let handle = try FileHandle(forWritingTo: url)
        try handle.write(contentsOf: Data(head))
        try handle.seek(toOffset: landing)
        try handle.write(contentsOf: Data(fake))
        try handle.truncate(atOffset: UInt64(head.count) + audioBytes)
        try handle.close()
        let count = try TimeLimit.run(10, "opening the RF64 file") {
            let reader = try WAVDecoder().openReader(at: url)
            defer { reader.close() }
            return reader.frameCount
        }
        #expect(count == Int64(frames))
        #expect(try WAVEncoder().inspect(fileAt: url)?.headerRepaired == false)
    }

    @Test("a sound LIST chunk with thousands of entries is read, not refused or retired")
    func longListChunk() throws {
        let dir = try WAVTestSupport.makeTempDirectory()
        defer { WAVTestSupport.cleanUp(dir) }
        let url = dir.appendingPathComponent("labels.wav")
        typealias Build = WAVHeaderBombTests
        let entries = (0..<3_000).flatMap { _ in Build.chunk("labl", size: 4, payload: Build.le32(7)) }
        let audio = WAVTestSupport.render(.frameCounter, format: .cdStereo, frames: 100)
        try Data(Build.riff(Build.chunk("fmt ", size: 16, payload: Build.fmt)
            + Build.chunk("LIST", size: UInt32(4 + entries.count), payload: Array("adtl".utf8) + entries)
            + Build.chunk("data", size: UInt32(audio.count), payload: audio))).write(to: url)
        let before = try WAVTestSupport.bytes(of: url)
        let reader = try WAVDecoder().openReader(at: url)
        reader.close()
        #expect(reader.frameCount == 100)
        #expect(try WAVEncoder().inspect(fileAt: url)?.headerRepaired == false)
        #expect(try WAVEncoder().repair(fileAt: url).headerRepaired == false)
        #expect(try WAVTestSupport.bytes(of: url) == before)
    }

    @Test("a RIFF size that ends before the data chunk is found and fixed, for an empty and a full take")
    func shortRIFFSize() throws {
        let dir = try WAVTestSupport.makeTempDirectory()
        defer { WAVTestSupport.cleanUp(dir) }
        for frames in [0, 480] {
            let url = dir.appendingPathComponent("short-\(frames).wav")
            let bytes = WAVTestSupport.render(.frameCounter, format: .cdStereo, frames: frames)
            try WAVTestSupport.writeTake(bytes, at: url, format: .cdStereo)
            let good = try WAVTestSupport.bytes(of: url)
            try WAVTestSupport.patch32(url, at: 4, 96)  // what libsndfile leaves when no audio was written
            #expect(try WAVEncoder().inspect(fileAt: url)?.headerRepaired == true, "inspection must notice the short RIFF size")
            let result = try WAVEncoder().repair(fileAt: url)
            #expect(result.frames == Int64(frames) && result.headerRepaired)
            #expect(try WAVTestSupport.bytes(of: url) == good)
        }
    }

    @Test("audio past 4 GiB turns the file into RF64 instead of wrapping its sizes")
    func growsIntoRF64() throws {
        let dir = try WAVTestSupport.makeTempDirectory()
        defer { WAVTestSupport.cleanUp(dir) }
        let url = dir.appendingPathComponent("huge.wav")
        let format = AudioFormat.cdStereo
        try WAVTestSupport.writeTake(WAVTestSupport.render(.frameCounter, format: format, frames: 1_000), at: url, format: format)
        // A sparse tail stands in for hours of audio written after the last header update.
        let length: UInt64 = (1 << 32) + 4_006
        let handle = try FileHandle(forUpdating: url)
        try handle.truncate(atOffset: length)
        try handle.close()

        let result = try WAVEncoder().repair(fileAt: url)
        let reading = try FileHandle(forReadingFrom: url)
        let head = [UInt8](try #require(try reading.read(upToCount: 4096)))
        try reading.close()
        let data = try #require(WAVTestSupport.chunks(head).last)
        let payload = (Int64(length) - Int64(data.offset + 8)) / 4 * 4
        #expect(result.frames == payload / 4)
        #expect(String(decoding: head[0..<4], as: UTF8.self) == "RF64")
        #expect(WAVTestSupport.u32(head, 4) == 0xFFFF_FFFF)
        #expect(String(decoding: head[12..<16], as: UTF8.self) == "ds64")
        #expect(WAVTestSupport.u64(head, 28) == UInt64(payload))
        #expect(WAVTestSupport.u64(head, 36) == UInt64(payload / 4))
        #expect(data.size == 0xFFFF_FFFF)
        let reader = try WAVDecoder().openReader(at: url)
        #expect(reader.frameCount == payload / 4)
        reader.close()
    }
}
