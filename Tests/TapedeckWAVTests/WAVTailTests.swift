import Foundation
import Testing
import TapedeckCore
import TapedeckNull
@testable import TapedeckWAV
#if canImport(Glibc)
import Glibc
#endif

/// Rewriting a finished WAV's metadata (``WAVEncoder/writeFacts(_:toFileAt:)``, `tapedeck
/// loudness`; ``WAVEncoder/writeMarkers(_:toFileAt:)``) keeps every chunk it does not own, byte
/// for byte, whatever its size, and never traps: issue 37, defect 3 (an `id3 ` chunk of 17 MiB
/// was dropped; a 5 MiB chunk after the audio trapped on "positional reads are small").
@Suite("WAV chunks after the audio")
struct WAVTailTests {
    static func le16(_ v: UInt16) -> [UInt8] { withUnsafeBytes(of: v.littleEndian, Array.init) }
    static func le32(_ v: UInt32) -> [UInt8] { withUnsafeBytes(of: v.littleEndian, Array.init) }

    /// A chunk with its pad byte (unless `padded` is false).
    static func chunk(_ id: String, _ payload: [UInt8], padded: Bool = true) -> [UInt8] {
        Array(id.utf8) + le32(UInt32(payload.count)) + payload + (padded && payload.count & 1 == 1 ? [0] : [])
    }

    static func riff(_ chunks: [UInt8]) -> [UInt8] {
        Array("RIFF".utf8) + le32(UInt32(4 + chunks.count)) + Array("WAVE".utf8) + chunks
    }

    /// A `fmt ` payload of integer PCM.
    static func fmt(channels: Int, bits: Int, rate: Int = 48_000) -> [UInt8] {
        let block = channels * bits / 8
        return le16(1) + le16(UInt16(channels)) + le32(UInt32(rate)) + le32(UInt32(rate * block)) + le16(UInt16(block)) + le16(UInt16(bits))
    }

    /// `count` bytes that differ from place to place (so a moved or cut byte shows).
    static func pattern(_ count: Int, seed: UInt8) -> [UInt8] {
        var block = [UInt8](repeating: 0, count: 65_537)
        for i in block.indices { block[i] = UInt8(truncatingIfNeeded: i &* 31) &+ seed }
        var out: [UInt8] = []
        out.reserveCapacity(count + block.count)
        while out.count < count { out += block }
        return Array(out.prefix(count))
    }

    /// Every top-level chunk of a RIFF file: id, offset of its header, size; a last chunk
    /// without its pad byte is accepted, anything else that is not a whole chunk is recorded as `?`.
    static func walk(_ b: [UInt8]) -> [(id: String, offset: Int, size: Int)] {
        var out: [(id: String, offset: Int, size: Int)] = []
        var i = 12
        while i < b.count {
            guard i + 8 <= b.count else { out.append(("?", i, b.count - i)); break }
            let size = Int(WAVTestSupport.u32(b, i + 4))
            guard i + 8 + size <= b.count else { out.append(("?", i, size)); break }
            out.append((String(decoding: b[i..<(i + 4)], as: UTF8.self), i, size))
            i += 8 + size + (size & 1)
        }
        return out
    }

    /// The payload of the first chunk called `id`.
    static func payload(_ b: [UInt8], _ id: String) -> ArraySlice<UInt8>? {
        walk(b).first { $0.id == id }.map { b[($0.offset + 8)..<($0.offset + 8 + $0.size)] }
    }

    static let loudness = Loudness(integrated: -23.45, range: 6.5, truePeak: -1.25, maxMomentary: -15, maxShortTerm: -18)

    static func metadata(takeID: String? = UUID().uuidString, source: CaptureSource? = nil) -> TakeMetadata {
        TakeMetadata(takeName: "Imported", sessionName: "Tests", takeNumber: 3, startDate: Date(timeIntervalSince1970: 1_700_000_000),
                     takeID: takeID, source: source, loudness: loudness)
    }

    @Test("writeFacts keeps a 5 MiB chunk, a 17 MiB id3 chunk and LIST INFO after the audio byte for byte, and adds bext and iXML after them")
    func keepsLargeChunks() throws {
        let dir = try WAVTestSupport.makeTempDirectory()
        defer { WAVTestSupport.cleanUp(dir) }
        let url = dir.appendingPathComponent("hostile.wav")
        let audio = Self.pattern(48_000 * 4, seed: 1)
        let info = Array("INFO".utf8) + Self.chunk("INAM", Array("A song\0".utf8)) + Self.chunk("IART", Array("Someone\0".utf8))
        let original = Self.riff(Self.chunk("fmt ", Self.fmt(channels: 2, bits: 16)) + Self.chunk("data", audio)
            + Self.chunk("_PMX", Self.pattern(5 << 20, seed: 2)) + Self.chunk("id3 ", Self.pattern((17 << 20) + 1, seed: 3))
            + Self.chunk("LIST", info))
        try Data(original).write(to: url)

        try WAVEncoder().writeFacts(Self.metadata(), toFileAt: url)

        let after = try WAVTestSupport.bytes(of: url)
        // Nothing before the end of the old file moved or changed but the RIFF size.
        #expect(after.count > original.count)
        #expect(after[8..<original.count].elementsEqual(original[8...]), "every original byte is where it was")
        #expect(Int(WAVTestSupport.u32(after, 4)) == after.count - 8)
        #expect(Self.walk(after).map { $0.id } == ["fmt ", "data", "_PMX", "id3 ", "LIST", "bext", "iXML"], "\(Self.walk(after).map { $0.id })")
        let bext = try #require(Self.payload(after, "bext"))
        #expect(Int16(bitPattern: WAVTestSupport.u16(Array(bext), 412)) == -2345, "integrated loudness in hundredths")
        #expect(try WAVTestSupport.readAll(url).bytes == audio, "the audio reads back unchanged")

        // Markers after it: the foreign chunks stay; written again, the old ones are replaced.
        let markers = [TakeMarker(frame: 100, label: "one", date: Date()), TakeMarker(frame: 2_000, label: "two", date: Date())]
        try WAVEncoder().writeMarkers(markers, toFileAt: url)
        try WAVEncoder().writeMarkers(Array(markers.prefix(1)), toFileAt: url)
        try WAVEncoder().writeFacts(Self.metadata(), toFileAt: url)
        let again = try WAVTestSupport.bytes(of: url)
        #expect(Self.walk(again).map { $0.id } == ["fmt ", "data", "_PMX", "id3 ", "LIST", "bext", "iXML", "cue ", "LIST"], "\(Self.walk(again).map { $0.id })")
        #expect(again[8..<original.count].elementsEqual(original[8...]))
        #expect(Int(WAVTestSupport.u32(again, 4)) == again.count - 8)
        #expect(WAVTestSupport.u32(Array(Self.payload(again, "cue ") ?? []), 0) == 1, "one cue point")
    }

    @Test("a marker chunk of Tapedeck's before another program's becomes JUNK in place; the other chunk is not moved")
    func retiresReplacedChunksInPlace() throws {
        let dir = try WAVTestSupport.makeTempDirectory()
        defer { WAVTestSupport.cleanUp(dir) }
        let url = dir.appendingPathComponent("cue-first.wav")
        let audio = Self.pattern(4_800, seed: 4)
        let cue = Self.le32(1) + Self.le32(1) + Self.le32(10) + Array("data".utf8) + Self.le32(0) + Self.le32(0) + Self.le32(10)
        let xmp = Self.pattern(4 << 20 | 3, seed: 5)  // odd, over the 4 MiB of one read
        let original = Self.riff(Self.chunk("fmt ", Self.fmt(channels: 1, bits: 16)) + Self.chunk("data", audio)
            + Self.chunk("cue ", cue) + Self.chunk("_PMX", xmp))
        try Data(original).write(to: url)

        try WAVEncoder().writeMarkers([TakeMarker(frame: 42, label: "new", date: Date())], toFileAt: url)

        let after = try WAVTestSupport.bytes(of: url)
        let chunks = Self.walk(after)
        #expect(chunks.map { $0.id } == ["fmt ", "data", "JUNK", "_PMX", "cue ", "LIST"], "\(chunks.map { $0.id })")
        let old = try #require(chunks.first { $0.id == "JUNK" })
        #expect(after[(old.offset + 8)..<(old.offset + 8 + old.size)].allSatisfy { $0 == 0 }, "the old cue points are gone")
        #expect(Self.payload(after, "_PMX").map { Array($0) } == xmp)
        #expect(try WAVTestSupport.readAll(url).bytes == audio)
    }

    @Test("an odd-sized last chunk without its pad byte gets it before what is appended")
    func missingPadByte() throws {
        let dir = try WAVTestSupport.makeTempDirectory()
        defer { WAVTestSupport.cleanUp(dir) }
        let url = dir.appendingPathComponent("odd.wav")
        let audio = Self.pattern(2_999 * 3, seed: 6)  // 24-bit mono, odd frames: an odd data size
        let original = Self.riff(Self.chunk("fmt ", Self.fmt(channels: 1, bits: 24)) + Self.chunk("data", audio, padded: false))
        try Data(original).write(to: url)

        try WAVEncoder().writeFacts(Self.metadata(), toFileAt: url)

        let after = try WAVTestSupport.bytes(of: url)
        #expect(Self.walk(after).map { $0.id } == ["fmt ", "data", "bext", "iXML"], "\(Self.walk(after).map { $0.id })")
        #expect(after[original.count] == 0, "the pad byte")
        #expect(try WAVTestSupport.readAll(url).bytes == audio)
    }

    @Test("bytes after the audio that are not whole chunks: the file is left as it was, with an error that says so", arguments: [
        [UInt8]([1, 2, 3]),
        Array("_PMX".utf8) + [0, 0, 0, 1] + [UInt8](repeating: 7, count: 100),
    ])
    func untidyTailLeftAlone(_ trailing: [UInt8]) throws {
        let dir = try WAVTestSupport.makeTempDirectory()
        defer { WAVTestSupport.cleanUp(dir) }
        let url = dir.appendingPathComponent("untidy.wav")
        let original = Self.riff(Self.chunk("fmt ", Self.fmt(channels: 2, bits: 16)) + Self.chunk("data", Self.pattern(4_000, seed: 7))) + trailing
        try Data(original).write(to: url)
        for write in [{ try WAVEncoder().writeFacts(Self.metadata(), toFileAt: url) },
                      { try WAVEncoder().writeMarkers([TakeMarker(frame: 1, label: "x", date: Date())], toFileAt: url) }] {
            let error = WAVTestSupport.error { try write() }
            #expect(error?.code == TapedeckError.Code.corruptFile, "\(String(describing: error))")
            #expect(error?.message.contains("left the file as it was") == true, "\(String(describing: error))")
            #expect(try WAVTestSupport.bytes(of: url) == original, "not a byte changed")
        }
    }

    @Test("a bext the file has gets only the loudness: originator, description, time reference, capture source and the iXML stay")
    func keepsExistingFacts() throws {
        let dir = try WAVTestSupport.makeTempDirectory()
        defer { WAVTestSupport.cleanUp(dir) }
        let url = dir.appendingPathComponent("recorded.wav")
        let id = UUID().uuidString
        var recorded = Self.metadata(takeID: id, source: CaptureSource(host: "booth", backend: "alsa", device: "hw:1"))
        recorded.loudness = nil
        recorded.notes = "as recorded"
        recorded.preRollFrames = 480
        let format = AudioFormat(sampleRate: 48_000, channels: 2, sampleFormat: .s24)
        let writer = try WAVEncoder().makeWriter(at: url, format: format, metadata: recorded)
        try WAVTestSupport.write(WAVTestSupport.render(.noise(seed: 3, level: 0.5), format: format, frames: 24_000), to: writer, format: format)
        _ = try writer.finish()
        let before = try WAVTestSupport.bytes(of: url)
        let oldBext = try #require(Self.payload(before, "bext"))
        #expect(String(decoding: oldBext.dropFirst(602), as: UTF8.self).contains("T=alsa hw:1 on booth"))

        // What `tapedeck loudness` hands over: the library's facts, without the capture source,
        // another start time and note, and the loudness.
        var measured = Self.metadata(takeID: id)
        measured.notes = "changed since"
        measured.startDate = Date(timeIntervalSince1970: 1_600_000_000)
        try WAVEncoder().writeFacts(measured, toFileAt: url)

        let after = try WAVTestSupport.bytes(of: url)
        #expect(after.count == before.count, "written in place")
        let newBext = try #require(Self.payload(after, "bext"))
        let (o, n) = (Array(oldBext), Array(newBext))
        #expect(n.count == o.count)
        #expect(n[0..<412] == o[0..<412], "description, originator, reference, date, time, time reference and UMID kept")
        #expect(n[422...] == o[422...], "coding history (the capture source) kept")
        #expect(Int16(bitPattern: WAVTestSupport.u16(n, 412)) == -2345 && WAVTestSupport.u16(n, 346) == 2)
        #expect(Self.payload(after, "iXML") == Self.payload(before, "iXML"), "the iXML kept (USER, PRE_RECORD_SAMPLECOUNT)")
        #expect(Self.payload(after, "data") == Self.payload(before, "data"))
    }

    @Test("a read longer than PositionalFile.maxRead is a TapedeckError, not a trap")
    func longReadThrows() throws {
        let dir = try WAVTestSupport.makeTempDirectory()
        defer { WAVTestSupport.cleanUp(dir) }
        let url = dir.appendingPathComponent("big.bin")
        try Data(count: PositionalFile.maxRead + 16).write(to: url)
        let fd = open(url.path, O_RDONLY | O_CLOEXEC)
        try #require(fd >= 0)
        defer { close(fd) }
        let file = PositionalFile(fd: fd, path: url.path, kind: "WAV")
        #expect(try file.read(PositionalFile.maxRead, at: 0).count == PositionalFile.maxRead)
        for count in [PositionalFile.maxRead + 1, Int.max, -1] {
            let error = WAVTestSupport.error { _ = try file.read(count, at: 0) }
            #expect(error?.code == TapedeckError.Code.unsupportedFormat && error?.message.contains(url.path) == true, "\(String(describing: error))")
        }
    }
}
