public import TapedeckCore
import CZlib

/// Draws a `WaveformPeaks` overview as a PNG picture: the waveform in one colour on a
/// background, with a centre line, as audiowaveform's `--output-format png` does.
///
/// A plain value; any thread. Never blocks; ``png(of:)`` allocates the picture (width × height
/// bytes before compression).
public struct WaveformImage: Sendable {
    public var width: Int
    public var height: Int
    /// Colours as RGB: background, waveform, centre line.
    public var background: (UInt8, UInt8, UInt8) = (0xFF, 0xFF, 0xFF)
    public var wave: (UInt8, UInt8, UInt8) = (0x1F, 0x5F, 0xA8)
    public var axis: (UInt8, UInt8, UInt8) = (0xB0, 0xB0, 0xB0)

    /// The sizes `tapedeck waveform` accepts.
    public static let widths = 16...16_384
    public static let heights = 16...4096

    public init(width: Int = 1200, height: Int = 240) {
        self.width = width
        self.height = height
    }

    /// For each column, the rows its waveform covers (top row, bottom row), row 0 at the top.
    public func columns(of peaks: WaveformPeaks) -> [(top: Int, bottom: Int)?] {
        let n = peaks.count
        guard n > 0 else { return Array(repeating: nil, count: width) }
        let half = Double(height - 1) / 2
        func row(_ v: Int16) -> Int { Int((half - Double(v) / 32768 * half).rounded()) }
        return (0..<width).map { x in
            let first = x * n / width
            let last = max(first, (x + 1) * n / width - 1)
            guard first < n else { return nil }
            var lo = Int16.max, hi = Int16.min
            for i in first...min(last, n - 1) {
                lo = min(lo, peaks.minimums[i])
                hi = max(hi, peaks.maximums[i])
            }
            return (max(0, row(hi)), min(height - 1, row(lo)))
        }
    }

    /// The picture as a PNG file (8-bit indexed colour, three entries).
    public func png(of peaks: WaveformPeaks) throws -> [UInt8] {
        let cols = columns(of: peaks)
        let centre = (height - 1) / 2
        // One filter byte (0: none) before each row of palette indexes.
        var raw = [UInt8](repeating: 0, count: (width + 1) * height)
        for y in 0..<height {
            let start = y * (width + 1)
            for x in 0..<width {
                var index: UInt8 = y == centre ? 2 : 0
                if let c = cols[x], y >= c.top, y <= c.bottom { index = 1 }
                raw[start + 1 + x] = index
            }
        }
        var bound = compressBound(uLong(raw.count))
        var compressed = [UInt8](repeating: 0, count: Int(bound))
        let status = compressed.withUnsafeMutableBufferPointer { out in
            raw.withUnsafeBufferPointer { compress2(out.baseAddress, &bound, $0.baseAddress, uLong($0.count), 9) }
        }
        guard status == Z_OK else { throw TapedeckError(.internalError, "zlib could not compress the picture (\(status)).") }
        compressed.removeLast(compressed.count - Int(bound))

        var file: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        func be32(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8((v >> 16) & 0xFF), UInt8((v >> 8) & 0xFF), UInt8(v & 0xFF)] }
        func chunk(_ type: String, _ data: [UInt8]) {
            let typed = Array(type.utf8) + data
            file += be32(UInt32(data.count))
            file += typed
            let crc = typed.withUnsafeBufferPointer { crc32(0, $0.baseAddress, uInt($0.count)) }
            file += be32(UInt32(crc))
        }
        chunk("IHDR", be32(UInt32(width)) + be32(UInt32(height)) + [8, 3, 0, 0, 0])
        chunk("PLTE", [background.0, background.1, background.2, wave.0, wave.1, wave.2, axis.0, axis.1, axis.2])
        chunk("IDAT", compressed)
        chunk("IEND", [])
        return file
    }
}
