public import Foundation
import TapedeckCore

extension SndfileFormatEncoder {
    /// `aiff`: `FORM` then `AIFF` or `AIFC`; `vorbis`: an Ogg page (`OggS`) whose first packet
    /// is Vorbis's identification header; `mp3`: an ID3v2 tag or an MPEG audio frame's sync
    /// first. - Thread: any. Blocks briefly on disk I/O.
    public func hasSignature(of encoding: String, at url: URL) -> Bool? {
        guard encoding == name else { return nil }
        let head = Self.head(of: url, count: 35)
        switch container {
        case .aiff:
            return head.count >= 12 && head.prefix(4).elementsEqual("FORM".utf8)
                && (head[8..<12].elementsEqual("AIFF".utf8) || head[8..<12].elementsEqual("AIFC".utf8))
        case .vorbis:
            return head.count == 35 && head.prefix(4).elementsEqual("OggS".utf8) && head[28] == 1 && head[29..<35].elementsEqual("vorbis".utf8)
        case .mp3:
            return head.count >= 3 && (head.prefix(3).elementsEqual("ID3".utf8) || (head[0] == 0xFF && head[1] & 0xE0 == 0xE0))
        }
    }
}
