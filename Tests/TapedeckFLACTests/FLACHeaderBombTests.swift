import Foundation
import TapedeckCore
import TapedeckFLAC
import Testing

/// FLAC metadata built to make a reader allocate or loop: STREAMINFO claiming the most samples
/// the field holds, VORBIS_COMMENT lengths and counts at their maximum, block lengths past the
/// end of the file. Each is handled in under 100 ms with a typed error or a clamp.
@Suite("FLAC header bombs")
struct FLACHeaderBombTests {
    static func be24(_ v: Int) -> [UInt8] { [UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
    static func le32(_ v: UInt32) -> [UInt8] { withUnsafeBytes(of: v.littleEndian, Array.init) }

    /// STREAMINFO: 4096-sample blocks, 48 kHz, 2 channels, 16 bits, `total` samples (36 bits).
    static func streamInfo(total: UInt64, last: Bool) -> [UInt8] {
        var b: [UInt8] = [last ? 0x80 : 0x00] + be24(34)
        b += [0x10, 0x00, 0x10, 0x00]            // min/max block size 4096
        b += [0, 0, 0, 0, 0, 0]                  // min/max frame size unknown
        // 20 bits rate, 3 bits channels-1, 5 bits bps-1, 36 bits total samples
        let rate: UInt64 = 48_000, channels: UInt64 = 1, bps: UInt64 = 15
        let packed = rate << 44 | channels << 41 | bps << 36 | (total & 0xF_FFFF_FFFF)
        b += (0..<8).map { UInt8(packed >> (56 - 8 * UInt64($0)) & 0xFF) }
        b += [UInt8](repeating: 0, count: 16)    // MD5 unknown
        return b
    }

    static var cases: [(String, [UInt8])] {
        let marker = Array("fLaC".utf8)
        return [
            ("STREAMINFO total samples at the maximum", marker + streamInfo(total: 0xF_FFFF_FFFF, last: true)),
            ("VORBIS_COMMENT vendor length at the maximum", marker + streamInfo(total: 0, last: false)
                + [0x84] + be24(16) + le32(0xFFFF_FFFF) + [UInt8](repeating: 0x41, count: 12)),
            ("VORBIS_COMMENT count at the maximum", marker + streamInfo(total: 0, last: false)
                + [0x84] + be24(16) + le32(4) + Array("test".utf8) + le32(0xFFFF_FFFF) + [0, 0, 0, 0]),
            ("metadata block longer than the file", marker + streamInfo(total: 0, last: false) + [0x81] + be24(0xFF_FFFF) + [0, 0, 0, 0]),
            ("10 000 empty PADDING blocks", marker + streamInfo(total: 0, last: false)
                + (0..<10_000).flatMap { _ in [UInt8(0x01)] + be24(0) } + [0x81] + be24(0)),
        ]
    }

    @Test("each bomb is repaired or decoded in under 100 ms, with a typed error or a clamp to the real size")
    func bombs() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-flac-bombs-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        for (i, (name, bytes)) in Self.cases.enumerated() {
            let url = dir.appendingPathComponent("bomb-\(i).flac")
            try Data(bytes).write(to: url)
            let start = ContinuousClock.now
            do {
                let reader = try FLACDecoder().openReader(at: url)
                defer { reader.close() }
                #expect(reader.frameCount <= Int64(bytes.count), "\(name): the reader claims \(reader.frameCount) frames from \(bytes.count) bytes")
                var buffer = [UInt8](repeating: 0, count: 4096 * 8)
                let n = try buffer.withUnsafeMutableBytes { try reader.read(into: $0.baseAddress!, maxFrames: 4096) }
                #expect(n == 0, "\(name): decoded \(n) frames from a file with no audio frames")
            } catch is TapedeckError {
            } catch {
                Issue.record("\(name): decoding threw an untyped error \(error)")
            }
            do {
                let r = try FLACEncoder().repair(fileAt: Self.copy(url, dir))
                #expect(r.frames == 0, "\(name): repair claims \(r.frames) frames")
            } catch is TapedeckError {
            } catch {
                Issue.record("\(name): repair threw an untyped error \(error)")
            }
            #expect(ContinuousClock.now - start < .milliseconds(100), "\(name) took \(ContinuousClock.now - start)")
        }
    }

    static func copy(_ url: URL, _ dir: URL) throws -> URL {
        let target = dir.appendingPathComponent(UUID().uuidString + ".flac")
        try FileManager.default.copyItem(at: url, to: target)
        return target
    }
}
