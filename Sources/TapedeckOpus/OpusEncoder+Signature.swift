public import Foundation
import TapedeckCore

extension OpusEncoder {
    /// `opus`: an Ogg page (`OggS`) whose first packet is `OpusHead`. - Thread: any. Blocks
    /// briefly on disk I/O.
    public func hasSignature(of encoding: String, at url: URL) -> Bool? {
        guard encoding == name else { return nil }
        let head = Self.head(of: url, count: 36)
        return head.count == 36 && head.prefix(4).elementsEqual("OggS".utf8) && head[28..<36].elementsEqual("OpusHead".utf8)
    }
}
