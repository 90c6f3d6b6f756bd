public import Foundation
import TapedeckCore

extension WAVDecoder {
    /// `wav`: a RIFF, RF64 or BW64 header of form `WAVE` (libsndfile reads more, but a take of
    /// encoding `wav` is a WAVE file). - Thread: any. Blocks briefly on disk I/O.
    public func hasSignature(of encoding: String, at url: URL) -> Bool? {
        guard encoding == name else { return nil }
        let head = Self.head(of: url, count: 12)
        guard head.count == 12 else { return false }
        let riff = head.prefix(4)
        return (riff.elementsEqual("RIFF".utf8) || riff.elementsEqual("RF64".utf8) || riff.elementsEqual("BW64".utf8))
            && head.suffix(4).elementsEqual("WAVE".utf8)
    }
}
