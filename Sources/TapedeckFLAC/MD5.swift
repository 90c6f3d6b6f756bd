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
        @inline(__always) func word(_ i: Int) -> UInt32 { UInt32(littleEndian: p.loadUnaligned(fromByteOffset: i &* 4, as: UInt32.self)) }
        let (m0, m1, m2, m3, m4, m5, m6, m7) = (word(0), word(1), word(2), word(3), word(4), word(5), word(6), word(7))
        let (m8, m9, m10, m11, m12, m13, m14, m15) = (word(8), word(9), word(10), word(11), word(12), word(13), word(14), word(15))
        var (a, b, c, d) = state
        // RFC 1321's 64 steps, unrolled (the constants are floor(abs(sin(i + 1)) * 2^32)).
        a = Self.f(a, b, c, d, m0, 7, 0xd76aa478)
        d = Self.f(d, a, b, c, m1, 12, 0xe8c7b756)
        c = Self.f(c, d, a, b, m2, 17, 0x242070db)
        b = Self.f(b, c, d, a, m3, 22, 0xc1bdceee)
        a = Self.f(a, b, c, d, m4, 7, 0xf57c0faf)
        d = Self.f(d, a, b, c, m5, 12, 0x4787c62a)
        c = Self.f(c, d, a, b, m6, 17, 0xa8304613)
        b = Self.f(b, c, d, a, m7, 22, 0xfd469501)
        a = Self.f(a, b, c, d, m8, 7, 0x698098d8)
        d = Self.f(d, a, b, c, m9, 12, 0x8b44f7af)
        c = Self.f(c, d, a, b, m10, 17, 0xffff5bb1)
        b = Self.f(b, c, d, a, m11, 22, 0x895cd7be)
        a = Self.f(a, b, c, d, m12, 7, 0x6b901122)
        d = Self.f(d, a, b, c, m13, 12, 0xfd987193)
        c = Self.f(c, d, a, b, m14, 17, 0xa679438e)
        b = Self.f(b, c, d, a, m15, 22, 0x49b40821)
        a = Self.g(a, b, c, d, m1, 5, 0xf61e2562)
        d = Self.g(d, a, b, c, m6, 9, 0xc040b340)
        c = Self.g(c, d, a, b, m11, 14, 0x265e5a51)
        b = Self.g(b, c, d, a, m0, 20, 0xe9b6c7aa)
        a = Self.g(a, b, c, d, m5, 5, 0xd62f105d)
        d = Self.g(d, a, b, c, m10, 9, 0x02441453)
        c = Self.g(c, d, a, b, m15, 14, 0xd8a1e681)
        b = Self.g(b, c, d, a, m4, 20, 0xe7d3fbc8)
        a = Self.g(a, b, c, d, m9, 5, 0x21e1cde6)
        d = Self.g(d, a, b, c, m14, 9, 0xc33707d6)
        c = Self.g(c, d, a, b, m3, 14, 0xf4d50d87)
        b = Self.g(b, c, d, a, m8, 20, 0x455a14ed)
        a = Self.g(a, b, c, d, m13, 5, 0xa9e3e905)
        d = Self.g(d, a, b, c, m2, 9, 0xfcefa3f8)
        c = Self.g(c, d, a, b, m7, 14, 0x676f02d9)
        b = Self.g(b, c, d, a, m12, 20, 0x8d2a4c8a)
        a = Self.h(a, b, c, d, m5, 4, 0xfffa3942)
        d = Self.h(d, a, b, c, m8, 11, 0x8771f681)
        c = Self.h(c, d, a, b, m11, 16, 0x6d9d6122)
        b = Self.h(b, c, d, a, m14, 23, 0xfde5380c)
        a = Self.h(a, b, c, d, m1, 4, 0xa4beea44)
        d = Self.h(d, a, b, c, m4, 11, 0x4bdecfa9)
        c = Self.h(c, d, a, b, m7, 16, 0xf6bb4b60)
        b = Self.h(b, c, d, a, m10, 23, 0xbebfbc70)
        a = Self.h(a, b, c, d, m13, 4, 0x289b7ec6)
        d = Self.h(d, a, b, c, m0, 11, 0xeaa127fa)
        c = Self.h(c, d, a, b, m3, 16, 0xd4ef3085)
        b = Self.h(b, c, d, a, m6, 23, 0x04881d05)
        a = Self.h(a, b, c, d, m9, 4, 0xd9d4d039)
        d = Self.h(d, a, b, c, m12, 11, 0xe6db99e5)
        c = Self.h(c, d, a, b, m15, 16, 0x1fa27cf8)
        b = Self.h(b, c, d, a, m2, 23, 0xc4ac5665)
        a = Self.i(a, b, c, d, m0, 6, 0xf4292244)
        d = Self.i(d, a, b, c, m7, 10, 0x432aff97)
        c = Self.i(c, d, a, b, m14, 15, 0xab9423a7)
        b = Self.i(b, c, d, a, m5, 21, 0xfc93a039)
        a = Self.i(a, b, c, d, m12, 6, 0x655b59c3)
        d = Self.i(d, a, b, c, m3, 10, 0x8f0ccc92)
        c = Self.i(c, d, a, b, m10, 15, 0xffeff47d)
        b = Self.i(b, c, d, a, m1, 21, 0x85845dd1)
        a = Self.i(a, b, c, d, m8, 6, 0x6fa87e4f)
        d = Self.i(d, a, b, c, m15, 10, 0xfe2ce6e0)
        c = Self.i(c, d, a, b, m6, 15, 0xa3014314)
        b = Self.i(b, c, d, a, m13, 21, 0x4e0811a1)
        a = Self.i(a, b, c, d, m4, 6, 0xf7537e82)
        d = Self.i(d, a, b, c, m11, 10, 0xbd3af235)
        c = Self.i(c, d, a, b, m2, 15, 0x2ad7d2bb)
        b = Self.i(b, c, d, a, m9, 21, 0xeb86d391)
        state = (state.0 &+ a, state.1 &+ b, state.2 &+ c, state.3 &+ d)
    }

    @inline(__always) private static func rotate(_ v: UInt32, _ s: UInt32) -> UInt32 { (v << s) | (v >> (32 &- s)) }
    // Each step adds the message word and the constant to `a` first: they do not depend on the
    // step before, so only the round function of `b` stays on the critical path. F and G are
    // written in the forms with the fewest operations after `b` is known (RFC 1321's are equal).
    @inline(__always) private static func f(_ a: UInt32, _ b: UInt32, _ c: UInt32, _ d: UInt32, _ x: UInt32, _ s: UInt32, _ t: UInt32) -> UInt32 {
        b &+ rotate((a &+ x &+ t) &+ (d ^ (b & (c ^ d))), s)
    }
    @inline(__always) private static func g(_ a: UInt32, _ b: UInt32, _ c: UInt32, _ d: UInt32, _ x: UInt32, _ s: UInt32, _ t: UInt32) -> UInt32 {
        b &+ rotate((a &+ x &+ t &+ (c & ~d)) &+ (b & d), s)
    }
    @inline(__always) private static func h(_ a: UInt32, _ b: UInt32, _ c: UInt32, _ d: UInt32, _ x: UInt32, _ s: UInt32, _ t: UInt32) -> UInt32 {
        b &+ rotate((a &+ x &+ t) &+ (b ^ (c ^ d)), s)
    }
    @inline(__always) private static func i(_ a: UInt32, _ b: UInt32, _ c: UInt32, _ d: UInt32, _ x: UInt32, _ s: UInt32, _ t: UInt32) -> UInt32 {
        b &+ rotate((a &+ x &+ t) &+ (c ^ (b | ~d)), s)
    }
}
