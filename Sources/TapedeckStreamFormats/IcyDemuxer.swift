/// Takes Icecast/Shoutcast metadata (ICY) out of a stream's bytes: after every `metaint` audio
/// bytes comes one length byte (×16) and that many bytes of `StreamTitle='…';StreamUrl='…';`.
/// What is left is the audio; each title change is kept with the audio byte offset it came at.
///
/// A plain value; used by one thread at a time (the connection's event loop).
package struct IcyDemuxer {
    /// A title and the offset, in audio bytes since the connection opened, where it came.
    package struct Title: Sendable, Equatable {
        package var offset: Int64
        package var text: String
    }

    private let metaint: Int
    private var untilMeta: Int
    private var metaLeft = -1          // -1: the length byte is next (when untilMeta is 0)
    private var meta: [UInt8] = []
    private var audioOffset: Int64 = 0
    private var lastTitle: String?

    /// - Parameter metaint: the `icy-metaint` header, > 0.
    package init(metaint: Int) {
        self.metaint = metaint
        untilMeta = metaint
    }

    /// Splits `chunk`: calls `audio` with each run of audio bytes, in order, and returns the
    /// titles that changed within it.
    package mutating func demux(_ chunk: UnsafeRawBufferPointer, audio: (UnsafeRawBufferPointer) -> Void) -> [Title] {
        var titles: [Title] = []
        var i = 0
        while i < chunk.count {
            if untilMeta > 0 {
                let n = min(untilMeta, chunk.count - i)
                audio(UnsafeRawBufferPointer(rebasing: chunk[i..<(i + n)]))
                untilMeta -= n
                audioOffset += Int64(n)
                i += n
            } else if metaLeft < 0 {
                metaLeft = Int(chunk[i]) * 16
                i += 1
                meta.removeAll(keepingCapacity: true)
                if metaLeft == 0 { metaDone() }
            } else {
                let n = min(metaLeft, chunk.count - i)
                meta.append(contentsOf: chunk[i..<(i + n)])
                metaLeft -= n
                i += n
                if metaLeft == 0 {
                    if let title = Self.streamTitle(meta), !title.isEmpty, title != lastTitle {
                        lastTitle = title
                        titles.append(Title(offset: audioOffset, text: title))
                    }
                    metaDone()
                }
            }
        }
        return titles
    }

    private mutating func metaDone() {
        metaLeft = -1
        untilMeta = metaint
    }

    /// The `StreamTitle` of one metadata block, or nil when it has none. Bytes that are not
    /// UTF-8 are read as Latin-1 (what older Shoutcast servers send); control characters are dropped.
    package static func streamTitle(_ block: [UInt8]) -> String? {
        let end = block.firstIndex(of: 0) ?? block.count
        let bytes = Array(block[..<end])
        let text = String(validating: bytes, as: UTF8.self) ?? String(bytes.map { Character(Unicode.Scalar($0)) })
        guard let start = text.range(of: "StreamTitle='") else { return nil }
        let rest = text[start.upperBound...]
        // The value ends at the `';` before the next key (a title may hold a quote itself).
        let stop = rest.range(of: "';")?.lowerBound ?? rest.lastIndex(of: "'") ?? rest.endIndex
        let title = String(rest[..<stop]).unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7F }
        return String(String.UnicodeScalarView(title))
    }
}
