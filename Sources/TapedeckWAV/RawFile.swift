import TapedeckCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// WAV's positional file: the shared ``PositionalFile`` plus little-endian patching.
typealias RawFile = PositionalFile

extension PositionalFile {
    /// Writes `value` as 4 little-endian bytes at `offset` unless they are there already.
    /// - Returns: whether the file changed.
    @discardableResult
    func patch32(_ value: UInt32, at offset: Int64) throws -> Bool {
        let new = LE.bytes32(value)
        if try read(4, at: offset) == new { return false }
        try write(new, at: offset)
        return true
    }

    /// Writes `value` as 8 little-endian bytes at `offset` unless they are there already.
    /// - Returns: whether the file changed.
    @discardableResult
    func patch64(_ value: UInt64, at offset: Int64) throws -> Bool {
        let new = LE.bytes64(value)
        if try read(8, at: offset) == new { return false }
        try write(new, at: offset)
        return true
    }

}

/// Little-endian field access on byte arrays, bounds-checked by the caller's fixed read sizes.
enum LE {
    static func u16(_ b: [UInt8], _ i: Int) -> UInt16 {
        UInt16(b[i]) | UInt16(b[i + 1]) << 8
    }

    static func u32(_ b: [UInt8], _ i: Int) -> UInt32 {
        UInt32(b[i]) | UInt32(b[i + 1]) << 8 | UInt32(b[i + 2]) << 16 | UInt32(b[i + 3]) << 24
    }

    static func u64(_ b: [UInt8], _ i: Int) -> UInt64 {
        UInt64(u32(b, i)) | UInt64(u32(b, i + 4)) << 32
    }

    static func bytes16(_ v: UInt16) -> [UInt8] {
        [UInt8(truncatingIfNeeded: v), UInt8(truncatingIfNeeded: v >> 8)]
    }

    static func bytes32(_ v: UInt32) -> [UInt8] {
        (0..<4).map { UInt8(truncatingIfNeeded: v >> (8 * UInt32($0))) }
    }

    static func bytes64(_ v: UInt64) -> [UInt8] {
        (0..<8).map { UInt8(truncatingIfNeeded: v >> (8 * UInt64($0))) }
    }

    /// Whether `b[i..<i+4]` spells `id`.
    static func isID(_ b: [UInt8], _ i: Int, _ id: String) -> Bool {
        b.count >= i + 4 && b[i..<(i + 4)].elementsEqual(id.utf8)
    }
}
