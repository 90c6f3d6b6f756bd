import Foundation

/// MD5 (RFC 1321), as FLAC uses it for STREAMINFO's audio signature.
///
/// Streaming: feed bytes with ``update(_:count:)`` in any pieces, then ``finalize()``. Used by
/// repair (which must compute the signature of the frames it keeps) and to check tail records.
/// Not for security. Thread: any (a value type; each instance is owned by its caller). Never blocks.
struct MD5 {
    private var state: (UInt32, UInt32, UInt32, UInt32) = (0x6745_2301, 0xEFCD_AB89, 0x98BA_DCFE, 0x1032_5476)
    private var block = [UInt8](repeating: 0, count: 64)
    private var blockCount = 0
    private var length: UInt64 = 0

    private static let shifts: [UInt32] = [7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22,
                                           5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20,
                                           4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23,
                                           6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21]
    private static let table: [UInt32] = (0..<64).map { UInt32(truncatingIfNeeded: Int64(abs(sin(Double($0 + 1))) * 4_294_967_296)) }

    init() {}

    /// Adds `count` bytes at `bytes`.
    mutating func update(_ bytes: UnsafeRawPointer, count: Int) {
        length &+= UInt64(count)
        var offset = 0
        if blockCount > 0 {
            let n = min(64 - blockCount, count)
            for i in 0..<n { block[blockCount + i] = bytes.load(fromByteOffset: i, as: UInt8.self) }
            blockCount += n
            offset = n
            if blockCount == 64 {
                block.withUnsafeBytes { compress(UnsafeRawPointer($0.baseAddress!)) }
                blockCount = 0
            }
        }
        while count - offset >= 64 {
            compress(bytes + offset)
            offset += 64
        }
        for i in 0..<(count - offset) { block[i] = bytes.load(fromByteOffset: offset + i, as: UInt8.self) }
        blockCount += count - offset
    }

    /// Adds the bytes of `array`.
    mutating func update(_ array: [UInt8]) {
        array.withUnsafeBytes { if let base = $0.baseAddress { update(base, count: $0.count) } }
    }

    /// Pads, and returns the 16-byte digest. The instance is spent afterwards.
    mutating func finalize() -> [UInt8] {
        let bits = length &* 8
        var pad: [UInt8] = [0x80]
        let padTo = (blockCount < 56 ? 56 : 120) - blockCount
        pad += [UInt8](repeating: 0, count: padTo - 1)
        for i in 0..<8 { pad.append(UInt8(truncatingIfNeeded: bits >> (8 * UInt64(i)))) }
        let saved = length
        update(pad)
        length = saved
        var out: [UInt8] = []
        for word in [state.0, state.1, state.2, state.3] {
            for i in 0..<4 { out.append(UInt8(truncatingIfNeeded: word >> (8 * UInt32(i)))) }
        }
        return out
    }

    /// The digest of `bytes` as lowercase hex.
    static func hex(_ digest: [UInt8]) -> String {
        digest.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
    }

    private mutating func compress(_ p: UnsafeRawPointer) {
        withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 16) { m in
            for i in 0..<16 { m[i] = UInt32(littleEndian: p.loadUnaligned(fromByteOffset: i * 4, as: UInt32.self)) }
            rounds(m)
        }
    }

    private mutating func rounds(_ m: UnsafeMutableBufferPointer<UInt32>) {
        var (a, b, c, d) = state
        for i in 0..<64 {
            var f: UInt32
            let g: Int
            switch i {
            case 0..<16: f = (b & c) | (~b & d); g = i
            case 16..<32: f = (d & b) | (~d & c); g = (5 * i + 1) % 16
            case 32..<48: f = b ^ c ^ d; g = (3 * i + 5) % 16
            default: f = c ^ (b | ~d); g = (7 * i) % 16
            }
            f = f &+ a &+ Self.table[i] &+ m[g]
            a = d; d = c; c = b
            b = b &+ ((f << Self.shifts[i]) | (f >> (32 - Self.shifts[i])))
        }
        state = (state.0 &+ a, state.1 &+ b, state.2 &+ c, state.3 &+ d)
    }
}
