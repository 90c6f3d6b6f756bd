public import Foundation
import TapedeckCore

extension FLACDecoder {
    /// `flac`: the stream marker `fLaC` first. - Thread: any. Blocks briefly on disk I/O.
    public func hasSignature(of encoding: String, at url: URL) -> Bool? {
        guard encoding == name else { return nil }
        return Self.head(of: url, count: 4).elementsEqual("fLaC".utf8)
    }
}
