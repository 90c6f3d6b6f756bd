import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Which file a summary was made from: device, inode, size and both change times of a
/// `stat`. A manifest is only ever replaced (a new file renamed over it), so a new manifest has a
/// new key; an edit in place changes its size or times. A plain value.
package struct FileKey: Sendable, Hashable {
    var device: UInt64 = 0
    var inode: UInt64 = 0
    var size: Int64 = 0
    var modified: Int64 = 0
    var modifiedNanoseconds: Int64 = 0
    var changed: Int64 = 0
    var changedNanoseconds: Int64 = 0

    init() {}

    init(_ st: stat) {
        device = UInt64(st.st_dev)
        inode = UInt64(st.st_ino)
        size = Int64(st.st_size)
        modified = Int64(st.st_mtim.tv_sec)
        modifiedNanoseconds = Int64(st.st_mtim.tv_nsec)
        changed = Int64(st.st_ctim.tv_sec)
        changedNanoseconds = Int64(st.st_ctim.tv_nsec)
    }

    /// Whether the key can tell two versions of a file apart: a file system that keeps whole
    /// seconds only (FAT, some network mounts) could give two manifests written in one second,
    /// at one recycled inode, the same key; their summaries are never trusted.
    var isTrustworthy: Bool { inode != 0 && (modifiedNanoseconds != 0 || changedNanoseconds != 0) }
}

/// What the keyed lookups need from one bundle's manifest, so that naming a take, starting a
/// recording or finding interrupted takes does not parse every manifest of the library.
///
/// Derived, never the only copy: it is kept in `.tapedeck-index/FOLDER` at the library root,
/// stamped with the ``FileKey`` of the manifest it was made from, and used only while the
/// manifest still has that key; otherwise the manifest is read again. Whatever a summary
/// points at is read from the manifest itself before anything is done with it, so a damaged or
/// hostile summary can cost a lookup, never a wrong answer. A plain value.
package struct BundleSummary: Sendable, Hashable {
    /// The manifest this was made from.
    var manifestKey: FileKey
    /// The bundle folder as last seen holding no leftover manifest temporaries (zero: never).
    var folderKey: FileKey
    var sessionID: String
    var name: String
    var createdAt: Date
    /// The newest take's start date; `nil` for a session without takes.
    var newestTake: Date?
    /// Every take id, each followed by a newline (ids are letters, digits and dashes). Only
    /// compared with what is looked for, so a summary file's copy is not checked byte by byte
    /// (its checksum tells a damaged file).
    var takeIDs: [UInt8]
    /// How many takes are in state `recording` (live, or left by a process that died).
    var recordingTakes: Int

    /// When the session was last active: its newest take, or its creation.
    var lastActive: Date { newestTake ?? createdAt }

    /// Whether a take has exactly this id.
    func hasTake(_ id: String) -> Bool {
        let wanted = Array(id.utf8)
        return anyLine(of: takeIDs) { line in line.count == wanted.count && line.elementsEqual(wanted) }
    }

    /// Whether a take's id starts with `prefix` (ASCII, compared without case).
    func hasTake(prefixedBy prefix: [UInt8]) -> Bool {
        anyLine(of: takeIDs) { line in Self.hasPrefix(line, prefix) }
    }

    /// Whether `test` holds for a line of `blob`, walked in place.
    private func anyLine(of blob: [UInt8], _ test: (UnsafeBufferPointer<UInt8>) -> Bool) -> Bool {
        blob.withUnsafeBufferPointer { all in
            var start = 0
            while start < all.count {
                var end = start
                while end < all.count && all[end] != 0x0A { end += 1 }
                if test(UnsafeBufferPointer(rebasing: all[start..<end])) { return true }
                start = end + 1
            }
            return false
        }
    }

    /// `bytes` starts with `prefix`, ASCII letters compared without case.
    static func hasPrefix<C: Collection<UInt8>>(_ bytes: C, _ prefix: [UInt8]) -> Bool {
        guard bytes.count >= prefix.count else { return false }
        for (b, p) in zip(bytes, prefix) where (b >= 0x41 && b <= 0x5A ? b + 32 : b) != p { return false }
        return true
    }

    // MARK: the summary file

    static let magic: [UInt8] = Array("TDSUMMARY1\n".utf8)
    /// A summary of the largest manifest is well under this; anything larger is not one.
    static let maxBytes = 16 << 20

    /// The summary file's bytes: a magic line, the two keys, the dates, four length-prefixed
    /// fields and a checksum of everything before it (little-endian throughout).
    package func encoded() -> [UInt8] {
        var out = Self.magic
        out.reserveCapacity(out.count + 160 + name.utf8.count + takeIDs.count)
        for key in [manifestKey, folderKey] {
            for v in [Int64(bitPattern: key.device), Int64(bitPattern: key.inode), key.size, key.modified,
                      key.modifiedNanoseconds, key.changed, key.changedNanoseconds] {
                Self.append(UInt64(bitPattern: v), to: &out)
            }
        }
        Self.append(createdAt.timeIntervalSinceReferenceDate.bitPattern, to: &out)
        out.append(newestTake == nil ? 0 : 1)
        Self.append((newestTake?.timeIntervalSinceReferenceDate ?? 0).bitPattern, to: &out)
        Self.append(UInt64(recordingTakes), to: &out)
        for field in [Array(sessionID.utf8), Array(name.utf8), takeIDs] {
            Self.append(UInt64(field.count), to: &out)
            out.append(contentsOf: field)
        }
        Self.append(Self.checksum(out[...]), to: &out)
        return out
    }

    /// Reads a summary file's bytes; `nil` for anything that is not one, whole and unchanged
    /// (the file is untrusted: a cut write, a stray file, a hostile one).
    /// - Thread: any. Never blocks.
    package static func decode(_ bytes: [UInt8]) -> BundleSummary? {
        guard bytes.count >= magic.count + 8, bytes.count <= maxBytes, bytes.starts(with: magic) else { return nil }
        let body = bytes[..<(bytes.count - 8)]
        var tail = bytes.count - 8
        guard readWord(bytes, &tail) == checksum(body) else { return nil }
        var at = magic.count
        func word() -> UInt64? { at + 8 <= body.count ? readWord(bytes, &at) : nil }
        func key() -> FileKey? {
            var k = FileKey()
            guard let dev = word(), let ino = word(), let size = word(), let m = word(), let mn = word(),
                  let c = word(), let cn = word() else { return nil }
            k.device = dev
            k.inode = ino
            k.size = Int64(bitPattern: size)
            k.modified = Int64(bitPattern: m)
            k.modifiedNanoseconds = Int64(bitPattern: mn)
            k.changed = Int64(bitPattern: c)
            k.changedNanoseconds = Int64(bitPattern: cn)
            return k
        }
        func field() -> [UInt8]? {
            guard let n = word(), n <= UInt64(body.count - at) else { return nil }
            defer { at += Int(n) }
            return Array(body[at..<(at + Int(n))])
        }
        guard let manifestKey = key(), let folderKey = key(), let created = word() else { return nil }
        guard at < body.count else { return nil }
        let hasNewest = body[at]
        at += 1
        guard hasNewest <= 1, let newest = word(), hasNewest == 1 || newest == 0, let recording = word(),
              let recordingTakes = Int(exactly: recording) else { return nil }
        guard let id = field(), let name = field(), let takeIDs = field(), at == body.count else { return nil }
        let createdAt = Double(bitPattern: created)
        let newestTake = Double(bitPattern: newest)
        guard createdAt.isFinite, newestTake.isFinite,
              let sessionID = String(validating: id, as: UTF8.self), ManifestCodec.validID(sessionID),
              let sessionName = String(validating: name, as: UTF8.self),
              takeIDs.last.map({ $0 == 0x0A }) ?? true else { return nil }
        return BundleSummary(manifestKey: manifestKey, folderKey: folderKey, sessionID: sessionID, name: sessionName,
                             createdAt: Date(timeIntervalSinceReferenceDate: createdAt),
                             newestTake: hasNewest == 1 ? Date(timeIntervalSinceReferenceDate: newestTake) : nil,
                             takeIDs: takeIDs, recordingTakes: recordingTakes)
    }

    static func append(_ v: UInt64, to out: inout [UInt8]) {
        withUnsafeBytes(of: v.littleEndian) { out.append(contentsOf: $0) }
    }

    static func readWord(_ bytes: [UInt8], _ at: inout Int) -> UInt64 {
        var v: UInt64 = 0
        for i in 0..<8 { v |= UInt64(bytes[at + i]) << (8 * UInt64(i)) }
        at += 8
        return v
    }

    /// FNV-1a over the bytes, eight at a time: enough to tell a whole file from a cut or
    /// scribbled one (the summary is a hint checked against the manifest, not a security boundary).
    static func checksum(_ bytes: ArraySlice<UInt8>) -> UInt64 {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        let prime: UInt64 = 0x0000_0100_0000_01B3
        bytes.withUnsafeBytes { raw in
            var i = 0
            while i + 8 <= raw.count {
                h = (h ^ raw.loadUnaligned(fromByteOffset: i, as: UInt64.self)) &* prime
                h ^= h >> 29
                i += 8
            }
            while i < raw.count {
                h = (h ^ UInt64(raw[i])) &* prime
                i += 1
            }
        }
        return h
    }
}

extension BundleSummary {
    /// The summary of `manifest`, read from a file with `key`.
    init(manifest: Manifest, key: FileKey, folderKey: FileKey = FileKey()) {
        var takeIDs: [UInt8] = []
        takeIDs.reserveCapacity(manifest.takes.count * 37)
        for take in manifest.takes {
            takeIDs.append(contentsOf: take.id.utf8)
            takeIDs.append(0x0A)
        }
        self.init(manifestKey: key, folderKey: folderKey, sessionID: manifest.id, name: manifest.name, createdAt: manifest.createdAt,
                  newestTake: manifest.takes.map(\.startDate).max(), takeIDs: takeIDs,
                  recordingTakes: manifest.takes.count { $0.state == .recording })
    }
}
