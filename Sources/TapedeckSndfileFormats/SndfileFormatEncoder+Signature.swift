public import Foundation
public import TapedeckCore

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

extension SndfileFormatEncoder {
    /// MP3 and Ogg Vorbis files are kept as they are: decoding them and storing the samples
    /// again would make them many times larger (32-bit float) and add nothing, and encoding
    /// them again would lose more. AIFF is decoded and stored with the library's encoder.
    /// - Thread: any. Blocks on disk I/O (the file is opened to check that it reads).
    public func storesVerbatim(_ url: URL) -> VerbatimEncoding? {
        guard !container.isLossless, hasSignature(of: name, at: url) == true, canRead(url) else { return nil }
        return VerbatimEncoding(encoding: name, fileExtension: container.fileExtension)
    }
}
