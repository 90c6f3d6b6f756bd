import Foundation
import TapedeckCore
import TapedeckWAV
import Testing

/// Headers built to make a parser allocate or loop: every one is handled in under 100 ms, with a
/// typed error or a result clamped to the file's real size, by Tapedeck's own parser (inspect,
/// repair) and by libsndfile through the decoder.
@Suite("WAV header bombs")
struct WAVHeaderBombTests {
    static func le32(_ v: UInt32) -> [UInt8] { withUnsafeBytes(of: v.littleEndian, Array.init) }
    static func le16(_ v: UInt16) -> [UInt8] { withUnsafeBytes(of: v.littleEndian, Array.init) }
    static func le64(_ v: UInt64) -> [UInt8] { withUnsafeBytes(of: v.littleEndian, Array.init) }

    /// A PCM `fmt ` payload: 16-bit stereo 48 kHz.
    static let fmt: [UInt8] = le16(1) + le16(2) + le32(48_000) + le32(192_000) + le16(4) + le16(16)

    static func chunk(_ id: String, size: UInt32, payload: [UInt8]) -> [UInt8] {
        Array(id.utf8) + le32(size) + payload
    }

    static func riff(_ chunks: [UInt8], size: UInt32? = nil, id: String = "RIFF") -> [UInt8] {
        Array(id.utf8) + le32(size ?? UInt32(4 + chunks.count)) + Array("WAVE".utf8) + chunks
    }

    static let audio = [UInt8](repeating: 0x22, count: 4_000)

    static var cases: [(String, [UInt8])] {
        [
            ("fmt size 0", riff(chunk("fmt ", size: 0, payload: []) + chunk("data", size: 4_000, payload: audio))),
            ("fmt size 0xFFFFFFFF", riff(chunk("fmt ", size: 0xFFFF_FFFF, payload: fmt) + chunk("data", size: 4_000, payload: audio))),
            ("odd LIST before fmt", riff(chunk("LIST", size: 3, payload: [1, 2, 3, 0]) + chunk("fmt ", size: 16, payload: fmt) + chunk("data", size: 4_000, payload: audio))),
            ("huge LIST", riff(chunk("LIST", size: 0xFFFF_FFF0, payload: [0, 0, 0, 0]) + chunk("fmt ", size: 16, payload: fmt) + chunk("data", size: 4_000, payload: audio))),
            ("data 0xFFFFFFFF (killed recorder)", riff(chunk("fmt ", size: 16, payload: fmt) + chunk("data", size: 0xFFFF_FFFF, payload: audio), size: 0xFFFF_FFFF)),
            ("data 0x80000000", riff(chunk("fmt ", size: 16, payload: fmt) + chunk("data", size: 0x8000_0000, payload: audio))),
            ("data larger than the file", riff(chunk("fmt ", size: 16, payload: fmt) + chunk("data", size: 10_000_000, payload: audio))),
            ("data size 0 with audio after it", riff(chunk("fmt ", size: 16, payload: fmt) + chunk("data", size: 0, payload: audio))),
            ("odd data size", riff(chunk("fmt ", size: 16, payload: fmt) + chunk("data", size: 3_999, payload: audio))),
            ("100 000 empty chunks", riff((0..<100_000).flatMap { _ in chunk("junk", size: 0, payload: []) } + chunk("fmt ", size: 16, payload: fmt) + chunk("data", size: 4_000, payload: audio))),
            ("RF64 ds64 at the maximum", riff(chunk("ds64", size: 28, payload: le64(.max) + le64(.max) + le64(.max) + le32(0xFFFF_FFFF))
                                                + chunk("fmt ", size: 16, payload: fmt) + chunk("data", size: 0xFFFF_FFFF, payload: audio), size: 0xFFFF_FFFF, id: "RF64")),
            ("RF64 without ds64", riff(chunk("fmt ", size: 16, payload: fmt) + chunk("data", size: 0xFFFF_FFFF, payload: audio), size: 0xFFFF_FFFF, id: "RF64")),
            ("truncated header", Array(riff(chunk("fmt ", size: 16, payload: fmt)).prefix(30))),
        ]
    }

    @Test("each bomb is read, inspected and repaired in under 100 ms with a typed error or a clamp to the real size")
    func bombs() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-wav-bombs-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        for (i, (name, bytes)) in Self.cases.enumerated() {
            let url = dir.appendingPathComponent("bomb-\(i).wav")
            try Data(bytes).write(to: url)
            let maxFrames = Int64(bytes.count / 4)
            let start = ContinuousClock.now
            for step in ["inspect", "decode", "repair"] {
                do {
                    switch step {
                    case "inspect":
                        if let r = try WAVEncoder().inspect(fileAt: url) { #expect(r.frames <= maxFrames, "\(name): inspect claims \(r.frames) frames") }
                    case "decode":
                        let reader = try WAVDecoder().openReader(at: url)
                        defer { reader.close() }
                        #expect(reader.frameCount <= maxFrames, "\(name): the reader claims \(reader.frameCount) frames")
                        var buffer = [UInt8](repeating: 0, count: 4096 * 8)
                        var total: Int64 = 0
                        while true {
                            let n = try buffer.withUnsafeMutableBytes { try reader.read(into: $0.baseAddress!, maxFrames: 4096) }
                            if n == 0 { break }
                            total += Int64(n)
                            if total > maxFrames { break }
                        }
                        #expect(total <= maxFrames, "\(name): decoded \(total) frames from \(bytes.count) bytes")
                    default:
                        let r = try WAVEncoder().repair(fileAt: url)
                        #expect(r.frames <= maxFrames, "\(name): repair claims \(r.frames) frames")
                    }
                } catch is TapedeckError {
                    // A typed refusal is a correct answer.
                } catch {
                    Issue.record("\(name): \(step) threw an untyped error \(error)")
                }
            }
            #expect(ContinuousClock.now - start < .milliseconds(100), "\(name) took \(ContinuousClock.now - start)")
        }
    }
}
