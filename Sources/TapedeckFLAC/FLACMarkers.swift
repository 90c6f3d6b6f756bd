import CFLAC
import Foundation
import TapedeckCore
#if canImport(Glibc)
import Glibc
#endif

/// Markers in a FLAC file, as Vorbis comment chapters: `CHAPTER001=00:01:23.456` and, for a label,
/// `CHAPTER001NAME=…` — the chapter convention of Vorbis comments, which keeps labels and any
/// number of markers (to 999), read by metaflac and by ffmpeg into chapters. A CUESHEET block was
/// the other choice: sample-exact, but it has no place for labels, allows at most 99 tracks on a
/// CD-DA sheet and means tracks to every reader; the catalog keeps each marker's exact frame, and
/// the comment's millisecond is finer than the period a marker is set to. The comments are
/// written into the file's padding with libFLAC's metadata interface (the whole file is rewritten
/// only if the padding is too small), then the file is synced. Plain functions; any thread; block
/// on disk I/O.
enum FLACMarkers {
    /// `HH:MM:SS.mmm` of `frame` at `rate`.
    static func time(_ frame: Int64, rate: Int) -> String {
        let ms = frame * 1000 / Int64(max(rate, 1))
        return "\(zeroPadded(Int(ms / 3_600_000), width: 2)):\(zeroPadded(Int(ms / 60_000 % 60), width: 2)):"
            + "\(zeroPadded(Int(ms / 1000 % 60), width: 2)).\(zeroPadded(Int(ms % 1000), width: 3))"
    }

    /// Replaces the file's CHAPTERnnn comments with `markers`.
    static func write(_ markers: [TakeMarker], toFileAt path: String) throws {
        guard let chain = FLAC__metadata_chain_new() else { throw TapedeckError(.io, "Out of memory reading \(path).") }
        defer { FLAC__metadata_chain_delete(chain) }
        func failure(_ action: String) -> TapedeckError {
            let status = FLAC__metadata_chain_status(chain)
            return TapedeckError(.io, "Could not \(action) \(path) to write its markers (libFLAC metadata status \(status.rawValue)).")
        }
        guard FLAC__metadata_chain_read(chain, path) != 0 else { throw failure("read") }
        guard let iterator = FLAC__metadata_iterator_new() else { throw TapedeckError(.io, "Out of memory reading \(path).") }
        defer { FLAC__metadata_iterator_delete(iterator) }
        FLAC__metadata_iterator_init(iterator, chain)
        var rate = 48_000
        var comments: UnsafeMutablePointer<FLAC__StreamMetadata>?
        repeat {
            guard let block = FLAC__metadata_iterator_get_block(iterator) else { continue }
            if block.pointee.type == FLAC__METADATA_TYPE_STREAMINFO { rate = Int(block.pointee.data.stream_info.sample_rate) }
            if block.pointee.type == FLAC__METADATA_TYPE_VORBIS_COMMENT { comments = block }
        } while FLAC__metadata_iterator_next(iterator) != 0
        if comments == nil {
            guard let block = FLAC__metadata_object_new(FLAC__METADATA_TYPE_VORBIS_COMMENT) else { throw TapedeckError(.io, "Out of memory.") }
            FLAC__metadata_iterator_init(iterator, chain)
            guard FLAC__metadata_iterator_insert_block_after(iterator, block) != 0 else {
                FLAC__metadata_object_delete(block)
                throw failure("extend")
            }
            comments = block
        }
        guard let comments else { return }
        // Earlier chapters go: CHAPTERnnn and CHAPTERnnnNAME.
        var i = Int(comments.pointee.data.vorbis_comment.num_comments) - 1
        while i >= 0 {
            let entry = comments.pointee.data.vorbis_comment.comments[i]
            let text = String(decoding: UnsafeBufferPointer(start: entry.entry, count: Int(entry.length)), as: UTF8.self).uppercased()
            if text.hasPrefix("CHAPTER"), text.dropFirst(7).prefix(3).allSatisfy(\.isNumber) {
                _ = FLAC__metadata_object_vorbiscomment_delete_comment(comments, UInt32(i))
            }
            i -= 1
        }
        for (n, m) in markers.prefix(TakeMarker.maxCount).enumerated() {
            let key = "CHAPTER\(zeroPadded(n + 1, width: 3))"
            for (name, value) in [(key, time(m.frame, rate: rate))] + (m.label.isEmpty ? [] : [(key + "NAME", m.label)]) {
                var entry = FLAC__StreamMetadata_VorbisComment_Entry()
                guard FLAC__metadata_object_vorbiscomment_entry_from_name_value_pair(&entry, name, value) != 0,
                      FLAC__metadata_object_vorbiscomment_append_comment(comments, entry, 0) != 0 else {
                    throw TapedeckError(.io, "Could not add the marker \(name) to \(path).")
                }
            }
        }
        FLAC__metadata_chain_sort_padding(chain)
        guard FLAC__metadata_chain_write(chain, 1, 0) != 0 else { throw failure("rewrite") }
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { throw TapedeckError.system(errno, while: "open \(path) to sync it") }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw TapedeckError.system(errno, while: "sync \(path)") }
    }
}
