public import Foundation
public import TapedeckCore

extension OpusEncoder {
    /// `opus`: an Ogg page (`OggS`) whose first packet is `OpusHead`. - Thread: any. Blocks
    /// briefly on disk I/O.
    public func hasSignature(of encoding: String, at url: URL) -> Bool? {
        guard encoding == name else { return nil }
        let head = Self.head(of: url, count: 36)
        return head.count == 36 && head.prefix(4).elementsEqual("OggS".utf8) && head[28..<36].elementsEqual("OpusHead".utf8)
    }
}

extension OpusEncoder {
    /// An Ogg Opus file is kept as it is (encoding it again would only lose more).
    /// - Thread: any. Blocks on disk I/O (the file is opened to check that it reads).
    public func storesVerbatim(_ url: URL) -> VerbatimEncoding? {
        guard hasSignature(of: name, at: url) == true, canRead(url) else { return nil }
        return VerbatimEncoding(encoding: name, fileExtension: "opus")
    }
}
